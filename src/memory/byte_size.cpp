#include "memory/byte_size.h"

#include <cctype>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "qsmcore/error.h"

namespace qsmcore::memory {

std::uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorKind::InvalidInput,
                 what + ": '" + text + "' is not a byte size (" + why + "; write e.g. 2GiB, 500MB or 1048576)");
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
  static const std::vector<std::pair<std::string, double>> units = {{"", 1.0},
                                                                    {"B", 1.0},
                                                                    {"kB", 1e3},
                                                                    {"KB", 1e3},
                                                                    {"MB", 1e6},
                                                                    {"GB", 1e9},
                                                                    {"TB", 1e12},
                                                                    {"KiB", 1024.0},
                                                                    {"MiB", 1048576.0},
                                                                    {"GiB", 1073741824.0},
                                                                    {"TiB", 1099511627776.0},
                                                                    {"K", 1024.0},
                                                                    {"k", 1024.0},
                                                                    {"M", 1048576.0},
                                                                    {"G", 1073741824.0},
                                                                    {"T", 1099511627776.0}};
  for (const auto& [name, factor] : units) {
    if (unit != name) continue;
    const double bytes = std::ceil(value * factor);
    // 9e18 keeps the value representable as int64 too (the CLI's --mem-budget is signed).
    if (!(bytes >= 0) || bytes > 9.0e18) throw bad("out of range");
    return static_cast<std::uint64_t>(bytes);
  }
  throw bad("unknown unit '" + unit + "'");
}

}  // namespace qsmcore::memory
