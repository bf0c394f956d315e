// The public face of process_limits (qsmcore/process_limits.h) and the resolution of
// ModelOptions' automatic defaults.
#include <algorithm>
#include <cstdio>

#include "qsmcore/onnx_model.h"
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

ModelOptions with_process_defaults(ModelOptions o) {
  if (o.threads <= 0) o.threads = usable_cpus();
  if (o.mem_budget < 0) {
    const MemBudget b = process_mem_budget();
    o.mem_budget = b.bytes;
    o.mem_budget_source = b.source;
  }
  return o;
}

}  // namespace qsmcore
