// DIR/jobs.json: every attempt at every subject, as `submit`, `resume` and `run --local` made
// them (an array task of a job, or a local child process), so `status` can ask the scheduler
// about the right task and `resume` knows what each subject was given last time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qsmcore::batch {

struct Attempt {
  std::string subject;
  std::string kind;    // "slurm" | "local"
  std::string group;   // slurm: the script's name (its log is logs/GROUP_JOB_INDEX.log)
  std::string job_id;  // slurm: the array job's id
  std::int64_t index = 0;
  std::int64_t mem_mib = 0, time_min = 0;  // what it was given (read from the script as submitted)
  int number = 1;                          // 1 = first attempt
  // local: how the child ended (finished = false while running, or when the runner died first)
  bool finished = false;
  int exit_code = -1, signal = 0;
  /// The subject's fingerprint in the plan it was made under (SubjectPlan::fingerprint): a
  /// folder planned again for another model or other inputs does not take its old attempts
  /// for this plan's.
  std::string fingerprint;
};

struct Jobs {
  std::vector<Attempt> attempts;
  std::vector<std::string> summary_jobs;  // the afterany jobs that run `qsm batch status`
  /// The last attempt at `subject`; nullptr if it was never run.
  const Attempt* latest(const std::string& subject) const;
  /// The last attempt at `subject` made under the plan whose fingerprint for it is
  /// `fingerprint`; nullptr if none was.
  const Attempt* latest(const std::string& subject, const std::string& fingerprint) const;
  std::vector<std::string> job_ids() const;  // every slurm job id, once
};

Jobs read_jobs(const std::string& out_dir);  // empty when DIR/jobs.json does not exist yet
void write_jobs(const std::string& out_dir, const Jobs& jobs);

}  // namespace qsmcore::batch
