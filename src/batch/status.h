// `qsm batch status`: what became of each subject, from its own report (written last by `qsm
// run`, with the process's peak RSS), its log (the scheduler writes why it killed a task there)
// and the scheduler's record; never from an exit code alone.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "batch/jobs.h"
#include "batch/plan.h"
#include "batch/slurm.h"

namespace qsmcore::batch {

struct SubjectStatus {
  std::string id;
  // done | failed | oom | timeout | pending | running | planned (never run) | unknown (run, but
  // neither a report nor a record says how it ended)
  std::string state;
  std::string error;  // failed: the task's error (or the plan's); oom/timeout: the scheduler's line
  std::string where;  // the attempt: "slurm job 12 task 3" / "local"; "" if never run
  int attempts = 0;
  std::int64_t mem_mib = 0;          // what the last attempt was given
  std::int64_t predicted_bytes = 0;  // inputs + the engine's prediction
  std::int64_t peak_rss_bytes = 0;   // done: the report's process peak RSS
  std::int64_t measured_bytes = 0;   // done: the report's accounted peak (memory.measured_peak_bytes)
  double seconds = 0;                // done: the report's total time
};

/// The log file of an attempt.
std::string attempt_log(const BatchPlan& p, const Attempt& a);

/// Every subject of the plan, classified. `records`: task_records() of jobs.job_ids() (empty
/// for a local batch).
std::vector<SubjectStatus> classify(const BatchPlan& p, const Jobs& jobs,
                                    const std::map<std::string, TaskRecord>& records);

/// DIR/status.json and DIR/status.tsv, atomically.
void write_status(const BatchPlan& p, const std::vector<SubjectStatus>& st);

/// One line per state with its count, then one per subject not done.
std::string status_text(const std::vector<SubjectStatus>& st);

}  // namespace qsmcore::batch
