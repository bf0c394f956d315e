// What the operating system lets this process use: CPUs (affinity mask, cgroup CPU quota,
// SLURM_CPUS_PER_TASK) and memory (cgroup memory limit, SLURM_MEM_PER_NODE / SLURM_MEM_PER_CPU,
// MemAvailable). A batch job's allocation is usually much smaller than the machine; sizing
// thread pools and budgets by the machine oversubscribes cores and meets the OOM killer.
//
// The parsers are pure functions of the files' text so that tests can feed them samples; the
// readers take a Sources (file locations, environment) that tests point at a fake tree.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace qsmcore::system {

/// A limit and where it came from ("affinity mask", "cgroup v2 cpu.max", "SLURM_MEM_PER_NODE", ...).
struct Limit {
  std::uint64_t value = 0;
  std::string source;
};

// ---- parsers ---------------------------------------------------------------------------------

/// cgroup v2 cpu.max: "QUOTA PERIOD" in µs -> CPUs (quota / period rounded up, at least 1);
/// nullopt for "max ..." (no quota) or unreadable text.
std::optional<std::uint64_t> parse_cpu_max(std::string_view text);
/// cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us -> CPUs as above; nullopt when the quota is
/// -1 (none) or the text is not a number.
std::optional<std::uint64_t> parse_cfs_quota(std::string_view quota, std::string_view period);
/// cgroup v2 memory.max or v1 memory.limit_in_bytes -> bytes; nullopt for "max" and for v1's
/// "unlimited" (the page-rounded 2^63-1 it reports, or anything at or above 2^62).
std::optional<std::uint64_t> parse_memory_limit(std::string_view text);
/// /proc/meminfo -> MemAvailable in bytes (the file writes kB); nullopt when absent.
std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo);
/// A positive whole number ("4", " 4\n"); nullopt for anything else, 0 included.
std::optional<std::uint64_t> parse_count(std::string_view text);
/// SLURM memory variables: MiB, optionally with a K, M, G or T suffix as sbatch --mem accepts
/// ("4096", "4G") -> bytes; nullopt for anything else.
std::optional<std::uint64_t> parse_slurm_mem(std::string_view text);

/// /proc/self/cgroup -> the process's cgroup per hierarchy: the v2 path ("0::/PATH") and, per
/// v1 controller list ("4:memory:/PATH", "3:cpu,cpuacct:/PATH"), its path.
struct CgroupPaths {
  std::optional<std::string> v2;
  std::map<std::string, std::string> v1;  // controller list as written ("cpu,cpuacct") -> path
};
CgroupPaths parse_proc_cgroup(std::string_view text);

// ---- readers ---------------------------------------------------------------------------------

/// Where the readers look. The defaults are this process's real files and environment.
struct Sources {
  std::filesystem::path proc_self_cgroup = "/proc/self/cgroup";
  std::filesystem::path cgroup_root = "/sys/fs/cgroup";
  std::filesystem::path meminfo = "/proc/meminfo";
  std::function<const char*(const char*)> env;  // empty = std::getenv
  bool affinity = true;                         // consult sched_getaffinity of this process
};

/// CPUs the process may use: the smallest of the affinity mask, the cgroup quota (of its own
/// cgroup and every ancestor) and SLURM_CPUS_PER_TASK, among those present; the machine's
/// count when none is.
Limit cpu_limit(const Sources& s = {});
/// Memory the process may use, in bytes: the smallest of its cgroup memory limit (own cgroup and
/// ancestors, v2 memory.max or v1 memory.limit_in_bytes), SLURM_MEM_PER_NODE (MiB),
/// SLURM_MEM_PER_CPU × the job's CPUs on this node, and MemAvailable, among those present.
/// nullopt when none can be read.
std::optional<Limit> memory_limit(const Sources& s = {});

/// What is held back from a memory limit for what the engine does not account (code, libraries,
/// stacks, allocator slack): 64 MiB + 5 % of the limit.
std::uint64_t memory_reserve(std::uint64_t limit);

}  // namespace qsmcore::system
