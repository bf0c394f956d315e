// SLURM's client commands (slurm.h).
#include "batch/slurm.h"

#include <fstream>
#include <sstream>

#include "qsmcore/error.h"
#include "system/spawn.h"

namespace qsmcore::batch {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  s.erase(0, s.find_first_not_of(' '));
  return s;
}

std::string joined(const std::vector<std::string>& ids) {
  std::string s;
  for (const auto& id : ids) s += (s.empty() ? "" : ",") + id;
  return s;
}

// "KEY = value" lines of `scontrol show config`.
std::map<std::string, std::string> cluster_config() {
  std::map<std::string, std::string> c;
  const auto r = system::run_command({"scontrol", "show", "config"});
  if (r.exit_code != 0) return c;
  std::istringstream s(r.out);
  std::string line;
  while (std::getline(s, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) c[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return c;
}

// "A|B|C" lines -> the record of the task each names ("12_3"; a plain job "12" stays "12").
void read_table(const std::string& text, std::map<std::string, TaskRecord>& records, bool squeue) {
  std::istringstream s(text);
  std::string line;
  while (std::getline(s, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, '|')) f.push_back(trim(cell));
    if (f.size() < 3 || f[0].empty()) continue;
    TaskRecord& r = records[f[0]];
    r.state = f[1].substr(0, f[1].find(' '));  // sacct: "CANCELLED by 0"
    if (squeue)
      r.reason = f[2];
    else
      r.exit_code = f[2];
  }
}

// jobcomp/filetxt: "JobId=9 ... JobState=FAILED ... ArrayJobId=5 ArrayTaskId=0 ... ExitCode=0:9".
void read_jobcomp(const std::string& path, const std::vector<std::string>& job_ids,
                  std::map<std::string, TaskRecord>& records) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::map<std::string, std::string> kv;
    std::istringstream ls(line);
    std::string word;
    while (ls >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
    }
    const std::string job = kv.count("ArrayJobId") ? kv["ArrayJobId"] : kv["JobId"];
    bool ours = false;
    for (const auto& id : job_ids) ours = ours || id == job;
    if (!ours) continue;
    const std::string key = kv.count("ArrayTaskId") ? job + "_" + kv["ArrayTaskId"] : job;
    records[key] = {kv["JobState"], "", kv["ExitCode"]};
  }
}

}  // namespace

std::int64_t cluster_max_array_size() {
  const auto c = cluster_config();
  const auto it = c.find("MaxArraySize");
  const long long v = it == c.end() ? 0 : std::atoll(it->second.c_str());
  return v > 1 ? v - 1 : 1001;  // array indices run to MaxArraySize - 1
}

std::string sbatch(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"sbatch", "--parsable"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = system::run_command(argv);
  const std::string out = trim(r.out);
  std::string id = out.substr(0, out.find(';'));  // "ID;cluster" on federations
  if (r.exit_code != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    std::string shown;
    for (const auto& a : argv) shown += (shown.empty() ? "" : " ") + a;
    throw Error(ErrorKind::Io, shown + " failed (exit " + std::to_string(r.exit_code) + "): " + trim(r.err + r.out));
  }
  return id;
}

SchedulerAnswer query_tasks(const std::vector<std::string>& job_ids) {
  SchedulerAnswer a;
  if (job_ids.empty()) return a;
  const auto c = cluster_config();
  if (c.count("JobCompType") && c.at("JobCompType") == "jobcomp/filetxt" && c.count("JobCompLoc"))
    read_jobcomp(c.at("JobCompLoc"), job_ids, a.records);
  const auto acct =
      system::run_command({"sacct", "-n", "-P", "-X", "-j", joined(job_ids), "--format=JobID,State,ExitCode"});
  if (acct.exit_code == 0) read_table(acct.out, a.records, false);
  // Each id alone: squeue refuses the whole list when one id is no longer known.
  for (const auto& id : job_ids) {
    const auto q = system::run_command({"squeue", "-h", "-r", "-t", "all", "-j", id, "-o", "%i|%T|%r"});
    if (q.exit_code == 0) {
      read_table(q.out, a.records, true);
    } else if ((q.err + q.out).find("Invalid job id") == std::string::npos) {
      const std::string said = trim(q.err + q.out);
      a.silent[id] = "squeue -j " + id + " failed, exit " + std::to_string(q.exit_code) +
                     (q.exit_code == 127 ? " (squeue not found)"
                      : said.empty()     ? ""
                                         : ": " + said);
    }
  }
  return a;
}

std::map<std::string, TaskRecord> task_records(const std::vector<std::string>& job_ids) {
  return query_tasks(job_ids).records;
}

}  // namespace qsmcore::batch
