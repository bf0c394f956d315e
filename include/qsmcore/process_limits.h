// What this process may use, as the defaults of ModelOptions see it: the CPUs (threads = 0) and
// the memory budget (mem_budget = kAutoMemBudget). A job on a cluster node or in a container is
// allowed far less than the machine has; these read what it is allowed.
#pragma once
#include <cstdint>
#include <string>

namespace qsmcore {

/// CPUs this process may use: the smallest of its affinity mask, its cgroup CPU quota (v2
/// cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, rounded up) and SLURM_CPUS_PER_TASK,
/// among those present. Read once per process.
int usable_cpus();

/// A memory budget and where it came from, for messages ("SLURM_MEM_PER_NODE 8.0 MiB less ...").
struct MemBudget {
  std::int64_t bytes = 0;  // 0 = no budget
  std::string source;
};

/// The budget a run gets when none is given: what the process may use — the smallest of its
/// cgroup memory limit (v2 memory.max, v1 memory.limit_in_bytes, own cgroup and ancestors),
/// SLURM_MEM_PER_NODE (MiB), SLURM_MEM_PER_CPU × CPUs, and MemAvailable — less a reserve of
/// 64 MiB + 5 % for what the engine does not account. A limit below the reserve gives 1 byte
/// (every run refused, with the reason). bytes = 0 when nothing can be read. Read at each call.
MemBudget process_mem_budget();

}  // namespace qsmcore
