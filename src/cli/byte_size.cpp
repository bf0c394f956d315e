#include "cli/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "memory/byte_size.h"
#include "qsmcore/error.h"

namespace qsmcore::cli {

std::int64_t parse_byte_size(const std::string& text, const std::string& what) {
  // One parser for the library and the command (memory/byte_size.cpp); it caps at 9e18.
  return static_cast<std::int64_t>(memory::parse_byte_size(text, what));
}

std::string format_bytes(std::int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (std::fabs(b) >= 1073741824.0) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  }
  return buf;
}

}  // namespace qsmcore::cli
