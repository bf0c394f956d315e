// sbatch scripts and task lists (scripts.h).
#include "batch/scripts.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/atomic_file.h"
#include "qsmcore/error.h"

namespace qsmcore::batch {
namespace {

namespace fs = std::filesystem;

std::string hh_mm_ss(std::int64_t minutes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:00", static_cast<long long>(minutes / 60),
                static_cast<long long>(minutes % 60));
  return buf;
}

std::string grids_text(const BatchPlan& p, const TaskGroup& g) {
  std::string text;
  std::int64_t largest = 0;
  for (const auto& id : g.subjects) {
    const SubjectPlan* s = p.find(id);
    if (s == nullptr) continue;
    const std::string grid =
        std::to_string(s->dims[0]) + "x" + std::to_string(s->dims[1]) + "x" + std::to_string(s->dims[2]);
    if (text.find(grid) == std::string::npos) text += (text.empty() ? "" : ", ") + grid;
    largest = std::max(largest, s->input_bytes + s->predicted_bytes);
  }
  return text + "; largest inputs + predicted peak " + std::to_string(largest >> 20) + " MiB";
}

void write_text(const std::string& path, const std::string& text, bool executable) {
  io::write_file_atomically(path, std::as_bytes(std::span(text)));
  if (executable)
    fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
}

std::int64_t directive(const std::string& script, const std::string& prefix) {
  std::ifstream f(script);
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(prefix, 0) == 0) return std::atoll(line.c_str() + prefix.size());
  return 0;
}

}  // namespace

std::vector<TaskGroup> plan_groups(const BatchPlan& p) {
  std::vector<TaskGroup> groups;
  const auto chunk = static_cast<std::size_t>(std::max<std::int64_t>(1, p.max_array_size));
  for (const Bucket& b : p.buckets) {
    const std::size_t chunks = (b.subjects.size() + chunk - 1) / chunk;
    for (std::size_t c = 0; c < chunks; ++c) {
      TaskGroup g;
      g.name = chunks == 1 ? b.name : b.name + "-c" + std::to_string(c);
      g.mem_mib = b.mem_mib;
      g.time_min = b.time_min;
      const auto first = b.subjects.begin() + static_cast<std::ptrdiff_t>(c * chunk);
      g.subjects.assign(first, first + static_cast<std::ptrdiff_t>(std::min(chunk, b.subjects.size() - c * chunk)));
      groups.push_back(std::move(g));
    }
  }
  return groups;
}

std::string script_path(const BatchPlan& p, const std::string& name) {
  return (fs::path(p.out_dir) / "sbatch" / (name + ".sbatch")).string();
}

std::string tasks_path(const BatchPlan& p, const std::string& name) {
  return (fs::path(p.out_dir) / "sbatch" / (name + ".tasks")).string();
}

std::string shell_quote(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void write_script(const BatchPlan& p, const TaskGroup& g) {
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# qsm batch: " << g.subjects.size() << " subject(s) of " << p.label() << " (" << grids_text(p, g) << ")\n"
    << "#SBATCH --job-name=qsm-" << p.label() << "-" << g.name << "\n"
    << "#SBATCH --array=0-" << g.subjects.size() - 1 << "\n"
    << "#SBATCH --mem=" << g.mem_mib << "M\n"
    << "#SBATCH --cpus-per-task=" << p.threads << "\n"
    << "#SBATCH --time=" << hh_mm_ss(g.time_min) << "\n"
    << "#SBATCH --output=" << p.out_dir << "/logs/" << g.name << "_%A_%a.log\n";
  if (!p.partition.empty()) s << "#SBATCH --partition=" << p.partition << "\n";
  if (!p.account.empty()) s << "#SBATCH --account=" << p.account << "\n";
  s << "# --mem holds the inputs and the engine's predicted peak within the task's own default budget\n"
    << "# (SLURM_MEM_PER_NODE less 64 MiB + 5 %); --time is 3x the time measured per voxel"
    << (p.is_pipeline() ? " and echo" : "") << " + 2 min.\n"
    << "exec " << shell_quote(p.qsm) << " batch task " << shell_quote(p.out_dir) << " --group " << shell_quote(g.name)
    << "\n";
  std::string tasks;
  for (const auto& id : g.subjects) tasks += id + "\n";
  write_text(tasks_path(p, g.name), tasks, false);
  write_text(script_path(p, g.name), s.str(), true);
}

std::vector<std::string> read_tasks(const BatchPlan& p, const std::string& name) {
  const std::string path = tasks_path(p, name);
  std::ifstream f(path);
  if (!f) throw Error(ErrorKind::Io, path + ": cannot open the task list");
  std::vector<std::string> ids;
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) ids.push_back(line);
  return ids;
}

std::int64_t script_mem_mib(const std::string& script) {
  return directive(script, "#SBATCH --mem=");
}

std::int64_t script_time_min(const std::string& script) {
  std::ifstream f(script);
  std::string line;
  const std::string prefix = "#SBATCH --time=";
  while (std::getline(f, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    long long h = 0, m = 0;
    if (std::sscanf(line.c_str() + prefix.size(), "%lld:%lld", &h, &m) == 2) return h * 60 + m;
  }
  return 0;
}

}  // namespace qsmcore::batch
