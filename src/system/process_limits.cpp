#include "system/process_limits.h"

#include <sched.h>
#ifdef __EMSCRIPTEN__
#include <emscripten/heap.h>
#endif

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

namespace qsmcore::system {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The whole of `s` as a signed number (no sign other than a leading '-').
std::optional<std::int64_t> whole_number(std::string_view s) {
  s = trim(s);
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> cpus_from_quota(std::int64_t quota, std::int64_t period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  const auto q = static_cast<std::uint64_t>(quota), p = static_cast<std::uint64_t>(period);
  return std::max<std::uint64_t>(1, (q + p - 1) / p);  // 1.5 CPUs of quota keep 2 threads busy
}

std::optional<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const char* env_of(const Sources& s, const char* name) {
  return s.env ? s.env(name) : std::getenv(name);
}

// Keeps the smaller of `best` and a present `value` (the first source wins a tie).
void take_min(std::optional<Limit>& best, std::optional<std::uint64_t> value, const std::string& source) {
  if (value && (!best || *value < best->value)) best = Limit{*value, source};
}

// The folders of a cgroup hierarchy mounted at `mount`: the process's own and every ancestor
// up to the mount itself. A limit set on a parent (a SLURM job, a container) binds the child.
// When the own folder is not visible (a container that mounts only its own cgroup at the
// root), the mount is the own cgroup.
std::vector<std::filesystem::path> cgroup_chain(const std::filesystem::path& mount, const std::string& path) {
  std::vector<std::filesystem::path> chain;
  std::filesystem::path rel = std::filesystem::path(path).relative_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(mount / rel, ec)) rel.clear();
  for (;; rel = rel.parent_path()) {
    chain.push_back(mount / rel);
    if (rel.empty()) break;
  }
  return chain;
}

// The v1 hierarchy holding `controller`: mounted at the controller list's name ("cpu,cpuacct")
// or at the controller's own name (the usual symlink).
std::optional<std::pair<std::filesystem::path, std::string>> v1_hierarchy(const Sources& s, const CgroupPaths& paths,
                                                                          const std::string& controller) {
  for (const auto& [list, path] : paths.v1) {
    std::stringstream in(list);
    for (std::string c; std::getline(in, c, ',');) {
      if (c != controller) continue;
      std::error_code ec;
      for (const std::string& dir : {list, controller})
        if (std::filesystem::is_directory(s.cgroup_root / dir, ec)) return std::pair{s.cgroup_root / dir, path};
    }
  }
  return std::nullopt;
}

CgroupPaths own_cgroups(const Sources& s) {
  const auto text = read_text(s.proc_self_cgroup);
  return text ? parse_proc_cgroup(*text) : CgroupPaths{};
}

// cgroup v2 when the unified hierarchy is mounted at the root (cgroup.controllers exists there).
bool unified_at_root(const Sources& s) {
  std::error_code ec;
  return std::filesystem::exists(s.cgroup_root / "cgroup.controllers", ec);
}

// A cgroup limit: the smallest `read(dir)` over the process's cgroup and its ancestors (a parent's
// limit binds the child), in v2 when the unified hierarchy is at the root, else in the v1
// hierarchy of `controller`. `source` names what was read, for messages.
using LimitReader = std::function<std::optional<std::uint64_t>(const std::filesystem::path&)>;
std::optional<std::uint64_t> cgroup_limit(const Sources& s, const std::string& controller, const std::string& v2_name,
                                          const LimitReader& v2, const std::string& v1_name, const LimitReader& v1,
                                          std::string& source) {
  const CgroupPaths paths = own_cgroups(s);
  std::optional<std::uint64_t> best;
  const auto walk = [&](const std::filesystem::path& mount, const std::string& path, const LimitReader& read) {
    for (const auto& dir : cgroup_chain(mount, path))
      if (const auto v = read(dir); v && (!best || *v < *best)) best = v;
  };
  if (paths.v2 && unified_at_root(s)) {
    source = "cgroup v2 " + v2_name;
    walk(s.cgroup_root, *paths.v2, v2);
  } else if (const auto h = v1_hierarchy(s, paths, controller)) {
    source = "cgroup v1 " + v1_name;
    walk(h->first, h->second, v1);
  }
  return best;
}

std::optional<std::uint64_t> cgroup_cpus(const Sources& s, std::string& source) {
  return cgroup_limit(
      s, "cpu", "cpu.max",
      [](const std::filesystem::path& d) {
        const auto t = read_text(d / "cpu.max");
        return t ? parse_cpu_max(*t) : std::nullopt;
      },
      "cpu.cfs_quota_us",
      [](const std::filesystem::path& d) {
        const auto q = read_text(d / "cpu.cfs_quota_us"), p = read_text(d / "cpu.cfs_period_us");
        return q && p ? parse_cfs_quota(*q, *p) : std::nullopt;
      },
      source);
}

std::optional<std::uint64_t> cgroup_memory(const Sources& s, std::string& source) {
  const auto file = [](const char* name) {
    return [name](const std::filesystem::path& d) {
      const auto t = read_text(d / name);
      return t ? parse_memory_limit(*t) : std::nullopt;
    };
  };
  return cgroup_limit(s, "memory", "memory.max", file("memory.max"), "memory.limit_in_bytes",
                      file("memory.limit_in_bytes"), source);
}

std::optional<std::uint64_t> affinity_cpus() {
#ifdef __EMSCRIPTEN__
  // No affinity in WebAssembly: the pthread build may use what the host reports (Node's CPUs, the
  // browser's hardwareConcurrency); the single-threaded build reports 1.
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? std::optional<std::uint64_t>(n) : std::nullopt;
#else
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return std::nullopt;
  const int n = CPU_COUNT(&set);
  return n > 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(n)) : std::nullopt;
#endif
}

}  // namespace

std::optional<std::uint64_t> parse_cpu_max(std::string_view text) {
  text = trim(text);
  const auto space = text.find(' ');
  const std::string_view quota = text.substr(0, space);
  const std::string_view period = space == std::string_view::npos ? "100000" : text.substr(space + 1);
  if (quota == "max") return std::nullopt;
  const auto q = whole_number(quota), p = whole_number(period);
  return q && p ? cpus_from_quota(*q, *p) : std::nullopt;
}

std::optional<std::uint64_t> parse_cfs_quota(std::string_view quota, std::string_view period) {
  const auto q = whole_number(quota), p = whole_number(period);
  return q && p ? cpus_from_quota(*q, *p) : std::nullopt;
}

std::optional<std::uint64_t> parse_memory_limit(std::string_view text) {
  text = trim(text);
  if (text == "max") return std::nullopt;
  const auto v = whole_number(text);
  if (!v || *v <= 0 || *v >= (std::int64_t{1} << 62)) return std::nullopt;
  return static_cast<std::uint64_t>(*v);
}

std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view key = "MemAvailable:";
  for (std::size_t at = 0; at < meminfo.size();) {
    const auto eol = meminfo.find('\n', at);
    std::string_view line = meminfo.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at);
    at = eol == std::string_view::npos ? meminfo.size() : eol + 1;
    if (line.substr(0, key.size()) != key) continue;
    line = trim(line.substr(key.size()));
    const bool kb = line.size() > 3 && line.substr(line.size() - 3) == " kB";
    const auto v = whole_number(kb ? line.substr(0, line.size() - 3) : line);
    if (!v || *v < 0) return std::nullopt;
    return static_cast<std::uint64_t>(*v) * (kb ? 1024u : 1u);
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_count(std::string_view text) {
  const auto v = whole_number(text);
  return v && *v > 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(*v)) : std::nullopt;
}

std::optional<std::uint64_t> parse_slurm_mem(std::string_view text) {
  text = trim(text);
  std::uint64_t scale = std::uint64_t{1} << 20;  // SLURM writes MiB
  if (!text.empty() && std::isalpha(static_cast<unsigned char>(text.back()))) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    const std::string_view units = "KMGT";
    const auto k = units.find(u);
    if (k == std::string_view::npos) return std::nullopt;
    scale = std::uint64_t{1} << (10 * (k + 1));
    text.remove_suffix(1);
  }
  const auto v = parse_count(text);
  if (!v || *v > (std::uint64_t{1} << 62) / scale) return std::nullopt;
  return *v * scale;
}

CgroupPaths parse_proc_cgroup(std::string_view text) {
  CgroupPaths out;
  std::stringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? std::string::npos : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && controllers.empty())
      out.v2 = path;
    else if (!controllers.empty())
      out.v1[controllers] = path;
  }
  return out;
}

Limit cpu_limit(const Sources& s) {
  std::optional<Limit> best;
  if (s.affinity) take_min(best, affinity_cpus(), "affinity mask");
  std::string cgroup_source;
  const auto cgroup = cgroup_cpus(s, cgroup_source);
  take_min(best, cgroup, cgroup_source);
  if (const char* v = env_of(s, "SLURM_CPUS_PER_TASK")) take_min(best, parse_count(v), "SLURM_CPUS_PER_TASK");
  if (best) return *best;
  return Limit{std::max<std::uint64_t>(1, std::thread::hardware_concurrency()), "the machine's CPUs"};
}

std::optional<Limit> memory_limit(const Sources& s) {
  std::optional<Limit> best;
  std::string cgroup_source;
  const auto cgroup = cgroup_memory(s, cgroup_source);
  take_min(best, cgroup, cgroup_source);
  if (const char* v = env_of(s, "SLURM_MEM_PER_NODE")) take_min(best, parse_slurm_mem(v), "SLURM_MEM_PER_NODE");
  if (const char* v = env_of(s, "SLURM_MEM_PER_CPU")) {
    // Per CPU of the job on this node; SLURM_CPUS_ON_NODE says how many it has.
    const char* on_node = env_of(s, "SLURM_CPUS_ON_NODE");
    const char* per_task = env_of(s, "SLURM_CPUS_PER_TASK");
    const auto cpus = on_node ? parse_count(on_node) : per_task ? parse_count(per_task) : cpu_limit(s).value;
    const auto per_cpu = parse_slurm_mem(v);
    if (per_cpu && cpus && *cpus <= (std::uint64_t{1} << 62) / *per_cpu)
      take_min(best, *per_cpu * *cpus, "SLURM_MEM_PER_CPU × " + std::to_string(*cpus) + " CPUs");
  }
  if (const auto t = read_text(s.meminfo)) take_min(best, parse_mem_available(*t), "MemAvailable");
#ifdef __EMSCRIPTEN__
  // A wasm32 module can never hold more than its linear memory's maximum (4 GiB here), whatever
  // the host has: a run predicted beyond it is refused before it allocates, never a stalled heap.
  take_min(best, static_cast<std::uint64_t>(emscripten_get_heap_max()), "the wasm32 heap maximum");
#endif
  return best;
}

std::uint64_t memory_reserve(std::uint64_t limit) {
  return (std::uint64_t{64} << 20) + limit / 20;
}

}  // namespace qsmcore::system
