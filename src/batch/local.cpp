// Running a plan on this machine (local.h).
#include "batch/local.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>

#include "batch/status.h"
#include "memory/byte_size.h"
#include "qsmcore/error.h"
#include "system/spawn.h"

namespace qsmcore::batch {
namespace {

using memory::kMiB;

}  // namespace

int run_local(const BatchPlan& p, Jobs& jobs, const LocalOptions& o) {
  const std::vector<SubjectStatus> st = classify(p, jobs, {});
  std::deque<const SubjectPlan*> queue;
  for (const SubjectStatus& x : st) {
    const SubjectPlan* s = p.find(x.id);
    if (x.state == "done" || !s->error.empty()) continue;
    if (o.budget_bytes > 0 && s->mem_mib * kMiB > o.budget_bytes) {
      o.say(s->id + ": needs " + std::to_string(s->mem_mib) + " MiB, more than the budget of " +
            std::to_string(o.budget_bytes / kMiB) + " MiB: not run");
      continue;
    }
    queue.push_back(s);
  }
  const std::size_t total = queue.size();
  std::map<int, std::size_t> running;  // pid -> its attempt
  std::int64_t in_use = 0;
  int failed = 0, finished = 0;
  while (!queue.empty() || !running.empty()) {
    while (!queue.empty() && static_cast<int>(running.size()) < std::max(1, o.jobs) &&
           (o.budget_bytes <= 0 || in_use + queue.front()->mem_mib * kMiB <= o.budget_bytes)) {
      const SubjectPlan* s = queue.front();
      queue.pop_front();
      std::filesystem::remove(s->log_local);
      // The subject's whole request: an explicit --mem-budget is on the child's process, which
      // leaves its own share to what it holds outside the engine (cli/cli_util.cpp).
      const int pid = system::spawn_logged(
          {p.qsm, "batch", "task", p.out_dir, "--subject", s->id, "--mem-budget", std::to_string(s->mem_mib * kMiB)},
          s->log_local);
      Attempt a;
      a.subject = s->id;
      a.kind = "local";
      a.mem_mib = s->mem_mib;
      a.time_min = s->time_min;
      a.fingerprint = s->fingerprint;
      const Attempt* last = jobs.latest(s->id, s->fingerprint);
      a.number = last ? last->number + 1 : 1;
      jobs.attempts.push_back(a);
      running[pid] = jobs.attempts.size() - 1;
      in_use += s->mem_mib * kMiB;
      write_jobs(p.out_dir, jobs);
      o.say("started " + s->id + " (" + std::to_string(s->mem_mib) + " MiB of " +
            (o.budget_bytes > 0 ? std::to_string(o.budget_bytes / kMiB) + " MiB" : std::string("no budget")) + ", " +
            std::to_string(running.size()) + " running)");
    }
    const auto exit = system::wait_any_child();
    if (!exit) break;
    const auto it = running.find(exit->pid);
    if (it == running.end()) continue;
    Attempt& a = jobs.attempts[it->second];
    a.finished = true;
    a.exit_code = exit->exit_code;
    a.signal = exit->signal;
    in_use -= a.mem_mib * kMiB;
    running.erase(it);
    write_jobs(p.out_dir, jobs);
    ++finished;
    const bool ok = exit->exit_code == 0 && exit->signal == 0;
    failed += ok ? 0 : 1;
    o.say("[" + std::to_string(finished) + "/" + std::to_string(total) + "] " + a.subject +
          (ok ? " finished" : " failed (see " + p.find(a.subject)->log_local + ")"));
  }
  return failed;
}

}  // namespace qsmcore::batch
