// What this process may use, as the defaults of ModelOptions see it: the CPUs (threads = 0). A
// job on a cluster node or in a container is allowed far less than the machine has; this reads
// what it is allowed.
#pragma once
namespace qsmcore {

/// CPUs this process may use: the smallest of its affinity mask, its cgroup CPU quota (v2
/// cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, rounded up) and SLURM_CPUS_PER_TASK,
/// among those present. Read once per process.
int usable_cpus();

}  // namespace qsmcore
