// Submitting and resubmitting array jobs (submit.h).
#include "batch/submit.h"

#include <algorithm>
#include <map>

#include "batch/scripts.h"
#include "batch/slurm.h"
#include "qsmcore/error.h"

namespace qsmcore::batch {
namespace {

// Submits one written group: its attempts recorded with what its script asks for now.
std::string submit_group(const BatchPlan& p, const TaskGroup& g, int number, Jobs& jobs) {
  const std::string script = script_path(p, g.name);
  const std::string id = sbatch({script});
  const std::vector<std::string> tasks = read_tasks(p, g.name);
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    Attempt a;
    a.subject = tasks[k];
    a.kind = "slurm";
    a.group = g.name;
    a.job_id = id;
    a.index = static_cast<std::int64_t>(k);
    a.mem_mib = script_mem_mib(script);
    a.time_min = script_time_min(script);
    a.number = number;
    const SubjectPlan* s = p.find(tasks[k]);
    a.fingerprint = s ? s->fingerprint : std::string();
    jobs.attempts.push_back(std::move(a));
  }
  write_jobs(p.out_dir, jobs);
  return "submitted " + g.name + ": job " + id + ", " + std::to_string(tasks.size()) + " task(s), --mem " +
         std::to_string(script_mem_mib(script)) + "M, --time " + std::to_string(script_time_min(script)) + " min";
}

std::string submit_summary(const BatchPlan& p, const std::vector<std::string>& ids, Jobs& jobs) {
  std::string dep = "afterany";
  for (const auto& id : ids) dep += ":" + id;
  std::vector<std::string> args{"--dependency=" + dep, "--job-name=qsm-batch-summary",
                                "--mem=256M",          "--cpus-per-task=1",
                                "--time=00:10:00",     "--output=" + p.out_dir + "/logs/summary_%j.log"};
  if (!p.partition.empty()) args.push_back("--partition=" + p.partition);
  if (!p.account.empty()) args.push_back("--account=" + p.account);
  args.push_back("--wrap=exec " + shell_quote(p.qsm) + " batch status " + shell_quote(p.out_dir));
  const std::string id = sbatch(args);
  jobs.summary_jobs.push_back(id);
  write_jobs(p.out_dir, jobs);
  return "submitted the summary: job " + id + " (qsm batch status after all of them; DIR/status.tsv)";
}

// Error unless `force` when the scheduler did not answer about a subject's task.
void refuse_blind_resubmission(const std::vector<SubjectStatus>& st, bool force) {
  if (force) return;
  std::vector<std::string> ids;
  std::string why;
  for (const SubjectStatus& x : st)
    if (x.scheduler_silent) {
      ids.push_back(x.id);
      if (why.empty()) why = x.error;
    }
  if (ids.empty()) return;
  std::string listed;
  for (std::size_t k = 0; k < ids.size() && k < 5; ++k) listed += (k ? ", " : "") + ids[k];
  if (ids.size() > 5) listed += ", ...";
  throw Error(ErrorKind::Io, std::to_string(ids.size()) + " subject(s) (" + listed +
                                 ") not resubmitted, nor any other: " + why +
                                 ". Run `qsm batch resume` again once squeue answers, or add --force to submit "
                                 "them again anyway (a task still queued then runs twice)");
}

}  // namespace

std::vector<std::string> submit(const BatchPlan& p, Jobs& jobs) {
  const bool submitted = std::any_of(jobs.attempts.begin(), jobs.attempts.end(), [&](const Attempt& a) {
    const SubjectPlan* s = p.find(a.subject);
    return s != nullptr && a.fingerprint == s->fingerprint;
  });
  if (submitted)
    throw Error(ErrorKind::InvalidInput, p.out_dir +
                                             ": this plan was submitted already (jobs.json); use `qsm batch "
                                             "status` and `qsm batch resume`");
  std::vector<std::string> lines, ids;
  for (const TaskGroup& g : plan_groups(p)) {
    lines.push_back(submit_group(p, g, 1, jobs));
    ids.push_back(jobs.attempts.back().job_id);
  }
  if (ids.empty()) throw Error(ErrorKind::InvalidInput, p.out_dir + ": the plan has no subject that can run");
  lines.push_back(submit_summary(p, ids, jobs));
  return lines;
}

TaskGroup next_request(const SubjectPlan& s, const SubjectStatus& st, const Attempt* last) {
  TaskGroup g;
  g.mem_mib = s.mem_mib;
  g.time_min = s.time_min;
  if (last != nullptr && st.state == "oom") g.mem_mib = std::max(s.mem_mib, ladder_mib(last->mem_mib * 3 / 2));
  if (last != nullptr && st.state == "timeout") g.time_min = std::max(s.time_min, 2 * last->time_min);
  return g;
}

std::vector<std::string> resume(const BatchPlan& p, Jobs& jobs, const std::vector<SubjectStatus>& st, bool force) {
  refuse_blind_resubmission(st, force);
  int round = 1;
  for (const auto& a : jobs.attempts) round = std::max(round, a.number + 1);
  std::map<std::pair<std::int64_t, std::int64_t>, TaskGroup> groups;
  std::vector<std::string> lines;
  for (const SubjectStatus& x : st) {
    const SubjectPlan* s = p.find(x.id);
    if (s == nullptr || x.state == "done" || x.state == "pending" || x.state == "running") continue;
    if (!s->error.empty()) {
      lines.push_back("not resubmitted " + x.id + ": the plan refused it (" + s->error + "); fix it and plan again");
      continue;
    }
    TaskGroup want = next_request(*s, x, jobs.latest(x.id, s->fingerprint));
    TaskGroup& g = groups[{want.mem_mib, want.time_min}];
    g.mem_mib = want.mem_mib;
    g.time_min = want.time_min;
    g.subjects.push_back(x.id);
  }
  std::vector<std::string> ids;
  int k = 0;
  for (auto& [request, g] : groups) {
    // Chunks of at most MaxArraySize, as the plan's.
    const auto chunk = static_cast<std::size_t>(std::max<std::int64_t>(1, p.max_array_size));
    for (std::size_t first = 0; first < g.subjects.size(); first += chunk) {
      TaskGroup part = g;
      part.name = "r" + std::to_string(round) + "-" + std::to_string(k++);
      part.subjects.assign(
          g.subjects.begin() + static_cast<std::ptrdiff_t>(first),
          g.subjects.begin() + static_cast<std::ptrdiff_t>(std::min(g.subjects.size(), first + chunk)));
      write_script(p, part);
      lines.push_back(submit_group(p, part, round, jobs));
      ids.push_back(jobs.attempts.back().job_id);
    }
  }
  if (ids.empty()) {
    lines.push_back("nothing to resubmit");
    return lines;
  }
  lines.push_back(submit_summary(p, ids, jobs));
  return lines;
}

}  // namespace qsmcore::batch
