// The public face of process_limits (qsmcore/process_limits.h): the CPUs and the memory budget
// this process may use. ModelOptions' automatic defaults built on them are the engine's
// (runtime/model_defaults.cpp).
#include <algorithm>
#include <cstdio>

#include "qsmcore/process_limits.h"
#include "system/process_limits.h"

namespace qsmcore {
namespace {

std::string mib_text(std::uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

}  // namespace

int usable_cpus() {
  // Read once: the affinity mask and quotas of a running job do not change under it, and
  // tile workers ask often.
  static const int cpus = static_cast<int>(std::min<std::uint64_t>(system::cpu_limit().value, 1 << 16));
  return cpus;
}

MemBudget process_mem_budget() {
  const auto limit = system::memory_limit();
  if (!limit) return {};
  const std::uint64_t reserve = system::memory_reserve(limit->value);
  MemBudget b;
  b.bytes = limit->value > reserve ? static_cast<std::int64_t>(limit->value - reserve) : 1;
  b.source =
      limit->source + " " + mib_text(limit->value) + " less a reserve of " + mib_text(reserve) + " (64 MiB + 5 %)";
  return b;
}

}  // namespace qsmcore
