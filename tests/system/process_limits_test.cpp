// What the process may use: the parsers on sample texts of the kernel's and SLURM's files and
// variables, and the readers on fake cgroup trees (v1, v2, a container's namespaced view).
#include "system/process_limits.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <string>

#include "qsmcore/process_limits.h"

namespace qsmcore::system {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

TEST(ProcessLimitsParse, CpuMax) {
  EXPECT_EQ(parse_cpu_max("max 100000\n"), std::nullopt);
  EXPECT_EQ(parse_cpu_max("200000 100000\n"), 2u);
  EXPECT_EQ(parse_cpu_max("150000 100000"), 2u);  // 1.5 CPUs of quota: two threads stay busy
  EXPECT_EQ(parse_cpu_max("50000 100000"), 1u);   // never 0
  EXPECT_EQ(parse_cpu_max("400000"), 4u);         // period omitted: the kernel's default 100 ms
  EXPECT_EQ(parse_cpu_max(""), std::nullopt);
  EXPECT_EQ(parse_cpu_max("lots 100000"), std::nullopt);
}

TEST(ProcessLimitsParse, CfsQuota) {
  EXPECT_EQ(parse_cfs_quota("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("300000\n", "100000\n"), 3u);
  EXPECT_EQ(parse_cfs_quota("100000", "0"), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("x", "100000"), std::nullopt);
}

TEST(ProcessLimitsParse, MemoryLimit) {
  EXPECT_EQ(parse_memory_limit("max\n"), std::nullopt);
  EXPECT_EQ(parse_memory_limit("9223372036854771712\n"), std::nullopt);  // v1 "unlimited"
  EXPECT_EQ(parse_memory_limit("1073741824\n"), kGiB);
  EXPECT_EQ(parse_memory_limit(""), std::nullopt);
  EXPECT_EQ(parse_memory_limit("12ab"), std::nullopt);
}

TEST(ProcessLimitsParse, MemAvailable) {
  const std::string meminfo =
      "MemTotal:       32768000 kB\nMemFree:         1000000 kB\nMemAvailable:   23663024 kB\nBuffers: 1 kB\n";
  EXPECT_EQ(parse_mem_available(meminfo), std::uint64_t{23663024} * 1024);
  EXPECT_EQ(parse_mem_available("MemTotal: 5 kB\nMemFree: 3 kB\n"), std::nullopt);  // kernels before 3.14
  EXPECT_EQ(parse_mem_available("MemAvailable: many kB\n"), std::nullopt);
}

TEST(ProcessLimitsParse, SlurmValues) {
  EXPECT_EQ(parse_slurm_mem("8"), 8 * kMiB);  // SLURM writes MiB
  EXPECT_EQ(parse_slurm_mem("4096\n"), 4 * kGiB);
  EXPECT_EQ(parse_slurm_mem("4G"), 4 * kGiB);
  EXPECT_EQ(parse_slurm_mem("512k"), 512 * std::uint64_t{1024});
  EXPECT_EQ(parse_slurm_mem("0"), std::nullopt);
  EXPECT_EQ(parse_slurm_mem("4X"), std::nullopt);
  EXPECT_EQ(parse_slurm_mem(""), std::nullopt);
  EXPECT_EQ(parse_count("4"), 4u);
  EXPECT_EQ(parse_count("0"), std::nullopt);
  EXPECT_EQ(parse_count("-2"), std::nullopt);
  EXPECT_EQ(parse_count("2(x3)"), std::nullopt);
}

TEST(ProcessLimitsParse, ProcSelfCgroup) {
  const CgroupPaths v1 =
      parse_proc_cgroup("9:name=systemd:/\n4:memory:/slurm/job_7\n3:cpu,cpuacct:/slurm/job_7\n0::/\n");
  EXPECT_EQ(v1.v1.at("memory"), "/slurm/job_7");
  EXPECT_EQ(v1.v1.at("cpu,cpuacct"), "/slurm/job_7");
  ASSERT_TRUE(v1.v2.has_value());  // hybrid: the unified hierarchy is listed too
  const CgroupPaths v2 = parse_proc_cgroup("0::/user.slice/job.scope\n");
  EXPECT_EQ(v2.v2, "/user.slice/job.scope");
  EXPECT_TRUE(v2.v1.empty());
}

TEST(ProcessLimitsParse, Reserve) {
  EXPECT_EQ(memory_reserve(0), 64 * kMiB);
  EXPECT_EQ(memory_reserve(20 * kGiB), 64 * kMiB + kGiB);
}

// A fake /proc/self/cgroup, /sys/fs/cgroup and /proc/meminfo under a temporary folder, and a
// fake environment.
class FakeSystem {
 public:
  FakeSystem() {
    std::string tmpl = (fs::temp_directory_path() / "qsm-limits-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp");
    root_ = tmpl;
    sources.proc_self_cgroup = root_ / "proc_self_cgroup";
    sources.cgroup_root = root_ / "cgroup";
    sources.meminfo = root_ / "meminfo";
    sources.affinity = false;
    sources.env = [this](const char* name) -> const char* {
      const auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
    fs::create_directories(sources.cgroup_root);
  }
  ~FakeSystem() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void write(const fs::path& path, const std::string& text) const {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  Sources sources;
  std::map<std::string, std::string> env;

 private:
  fs::path root_;
};

TEST(ProcessLimits, CgroupV2QuotaOfAnAncestorBinds) {
  FakeSystem f;
  f.write(f.sources.proc_self_cgroup, "0::/job/step\n");
  f.write(f.sources.cgroup_root / "cgroup.controllers", "cpu memory\n");
  f.write(f.sources.cgroup_root / "job/cpu.max", "200000 100000\n");
  f.write(f.sources.cgroup_root / "job/step/cpu.max", "max 100000\n");
  f.write(f.sources.cgroup_root / "job/memory.max", "max\n");
  f.write(f.sources.cgroup_root / "job/step/memory.max", "1073741824\n");
  f.write(f.sources.meminfo, "MemAvailable: 8388608 kB\n");
  const Limit cpus = cpu_limit(f.sources);
  EXPECT_EQ(cpus.value, 2u);
  EXPECT_EQ(cpus.source, "cgroup v2 cpu.max");
  const auto mem = memory_limit(f.sources);
  ASSERT_TRUE(mem);
  EXPECT_EQ(mem->value, kGiB);
  EXPECT_EQ(mem->source, "cgroup v2 memory.max");
}

TEST(ProcessLimits, CgroupV1CombinedCpuHierarchy) {
  FakeSystem f;
  f.write(f.sources.proc_self_cgroup, "4:memory:/slurm/job_7\n3:cpu,cpuacct:/slurm/job_7\n");
  f.write(f.sources.cgroup_root / "cpu,cpuacct/slurm/job_7/cpu.cfs_quota_us", "300000\n");
  f.write(f.sources.cgroup_root / "cpu,cpuacct/slurm/job_7/cpu.cfs_period_us", "100000\n");
  f.write(f.sources.cgroup_root / "memory/slurm/job_7/memory.limit_in_bytes", "2147483648\n");
  f.write(f.sources.cgroup_root / "memory/memory.limit_in_bytes", "9223372036854771712\n");
  f.write(f.sources.meminfo, "MemAvailable: 8388608 kB\n");
  EXPECT_EQ(cpu_limit(f.sources).value, 3u);
  EXPECT_EQ(cpu_limit(f.sources).source, "cgroup v1 cpu.cfs_quota_us");
  const auto mem = memory_limit(f.sources);
  ASSERT_TRUE(mem);
  EXPECT_EQ(mem->value, 2 * kGiB);
  EXPECT_EQ(mem->source, "cgroup v1 memory.limit_in_bytes");
}

TEST(ProcessLimits, ContainerSeesItsOwnCgroupAtTheMount) {
  // /proc/self/cgroup names the host's path, which the container's mount does not show.
  FakeSystem f;
  f.write(f.sources.proc_self_cgroup, "0::/kubepods/pod42/abc\n");
  f.write(f.sources.cgroup_root / "cgroup.controllers", "cpu memory\n");
  f.write(f.sources.cgroup_root / "cpu.max", "100000 100000\n");
  f.write(f.sources.cgroup_root / "memory.max", "536870912\n");
  EXPECT_EQ(cpu_limit(f.sources).value, 1u);
  EXPECT_EQ(memory_limit(f.sources)->value, 512 * kMiB);
}

TEST(ProcessLimits, SlurmVariablesAreHonoured) {
  FakeSystem f;
  f.write(f.sources.meminfo, "MemAvailable: 8388608 kB\n");  // 8 GiB
  f.env["SLURM_CPUS_PER_TASK"] = "3";
  EXPECT_EQ(cpu_limit(f.sources).value, 3u);
  EXPECT_EQ(cpu_limit(f.sources).source, "SLURM_CPUS_PER_TASK");
  f.env["SLURM_MEM_PER_NODE"] = "1024";
  EXPECT_EQ(memory_limit(f.sources)->value, kGiB);
  EXPECT_EQ(memory_limit(f.sources)->source, "SLURM_MEM_PER_NODE");
  f.env.erase("SLURM_MEM_PER_NODE");
  f.env["SLURM_MEM_PER_CPU"] = "256";
  f.env["SLURM_CPUS_ON_NODE"] = "2";
  EXPECT_EQ(memory_limit(f.sources)->value, 512 * kMiB);
  EXPECT_NE(memory_limit(f.sources)->source.find("SLURM_MEM_PER_CPU"), std::string::npos);
}

TEST(ProcessLimits, SmallestLimitWinsAndMemAvailableIsTheFallback) {
  FakeSystem f;
  f.write(f.sources.meminfo, "MemAvailable: 1048576 kB\n");  // 1 GiB
  f.env["SLURM_MEM_PER_NODE"] = "4096";                      // 4 GiB: the machine has less free
  EXPECT_EQ(memory_limit(f.sources)->value, kGiB);
  EXPECT_EQ(memory_limit(f.sources)->source, "MemAvailable");
  f.env.clear();
  fs::remove(f.sources.meminfo);
  EXPECT_EQ(memory_limit(f.sources), std::nullopt);
}

TEST(ProcessLimits, AffinityMaskBoundsTheCpus) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const auto allowed = static_cast<std::uint64_t>(CPU_COUNT(&set));
  FakeSystem f;
  f.sources.affinity = true;
  EXPECT_LE(cpu_limit(f.sources).value, allowed);
  f.env["SLURM_CPUS_PER_TASK"] = std::to_string(allowed + 4);  // more than the mask: the mask binds
  EXPECT_EQ(cpu_limit(f.sources).value, allowed);
  EXPECT_EQ(cpu_limit(f.sources).source, "affinity mask");
}

TEST(ProcessLimits, ProcessBudgetNamesItsSourceAndKeepsTheReserve) {
  ::setenv("SLURM_MEM_PER_NODE", "1024", 1);
  const MemBudget b = process_mem_budget();
  ::unsetenv("SLURM_MEM_PER_NODE");
  EXPECT_LE(b.bytes, static_cast<std::int64_t>(kGiB - memory_reserve(kGiB)));
  if (b.bytes == static_cast<std::int64_t>(kGiB - memory_reserve(kGiB))) {
    EXPECT_NE(b.source.find("SLURM_MEM_PER_NODE"), std::string::npos) << b.source;
  }
  ::setenv("SLURM_MEM_PER_NODE", "8", 1);  // below the reserve: every run refused, never "unlimited"
  const MemBudget tiny = process_mem_budget();
  ::unsetenv("SLURM_MEM_PER_NODE");
  EXPECT_EQ(tiny.bytes, 1);
  EXPECT_NE(tiny.source.find("SLURM_MEM_PER_NODE"), std::string::npos) << tiny.source;
}

}  // namespace
}  // namespace qsmcore::system
