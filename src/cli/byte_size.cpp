#include "cli/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "qsmcore/error.h"

namespace qsmcore::cli {

std::int64_t parse_byte_size(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorKind::InvalidInput, what + ": '" + text + "' is not a byte size (" + why +
                                              "; write e.g. 2GiB, 500MB or 1048576)");
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) throw bad("no number");
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(text.substr(0, i), &used);
    if (used != i) throw bad("malformed number");
  } catch (const std::logic_error&) {
    throw bad("malformed number");
  }
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1.0},      {"B", 1.0},      {"kB", 1e3},           {"KB", 1e3},           {"MB", 1e6},
      {"GB", 1e9},    {"TB", 1e12},    {"KiB", 1024.0},       {"MiB", 1048576.0},    {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0},        {"K", 1024.0},         {"M", 1048576.0},      {"G", 1073741824.0},
      {"T", 1099511627776.0}};
  for (const auto& [name, factor] : units) {
    if (unit != name) continue;
    const double bytes = std::ceil(value * factor);
    if (!(bytes >= 0) || bytes > 9.0e18) throw bad("out of range");
    return static_cast<std::int64_t>(bytes);
  }
  throw bad("unknown unit '" + unit + "'");
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
