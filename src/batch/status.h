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
  /// unknown because the scheduler did not answer about its task (squeue failed): it may still
  /// be queued or running, so resume does not submit it again unless told to (--force).
  bool scheduler_silent = false;
};

/// The log file of an attempt.
std::string attempt_log(const BatchPlan& p, const Attempt& a);

/// Every subject of the plan, classified. `records`: task_records() of jobs.job_ids() (empty
/// for a local batch); `silent`: the jobs the scheduler did not answer about, with why
/// (SchedulerAnswer::silent). Only this plan's outputs and attempts count (fingerprint.h): a
/// report of another plan's run leaves its subject "planned".
std::vector<SubjectStatus> classify(const BatchPlan& p, const Jobs& jobs,
                                    const std::map<std::string, TaskRecord>& records,
                                    const std::map<std::string, std::string>& silent = {});

/// DIR/status.json and DIR/status.tsv, atomically. In the TSV every cell is escaped
/// (tsv_cell), so an error holding a tab or a line break stays in its row and column.
void write_status(const BatchPlan& p, const std::vector<SubjectStatus>& st);

/// A TSV cell: backslash, tab, line feed and carriage return written as \\, \t, \n and \r
/// (the "linear TSV" convention, the escapes PostgreSQL's COPY text format uses).
std::string tsv_cell(const std::string& text);

/// One line per state with its count, then one per subject not done.
std::string status_text(const std::vector<SubjectStatus>& st);

}  // namespace qsmcore::batch
