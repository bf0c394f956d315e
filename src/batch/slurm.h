// What qsm batch asks SLURM, through its client commands (no library: the commands are what a
// cluster's users have, and their output formats are stable). Facts measured on Slurm 22.05
// (../shared/spec/slurm.md): `sbatch --parsable` prints the job id; finished array tasks stay in
// `squeue -t all` until MinJobAge; without slurmdbd `sacct` fails, and a jobcomp/filetxt log has
// one line per finished task with ArrayJobId/ArrayTaskId.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace qsmcore::batch {

/// MaxArraySize from `scontrol show config`; 1001 (Slurm's default) when it cannot be read.
std::int64_t cluster_max_array_size();

/// `sbatch --parsable ARGS...`: the job id. Error naming what was submitted and sbatch's message.
std::string sbatch(const std::vector<std::string>& args);

struct TaskRecord {
  std::string state;      // PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, OUT_OF_MEMORY, CANCELLED, ...
  std::string reason;     // squeue's %r where known
  std::string exit_code;  // "0:9" (code:signal) where known
};

/// What the scheduler said of the array tasks of some jobs.
struct SchedulerAnswer {
  std::map<std::string, TaskRecord> records;  // keyed "JOB_INDEX"
  /// The jobs squeue did not answer about (it failed: the controller down or unreachable, the
  /// command missing), with its message. squeue lists every job the controller still knows,
  /// queued, running or recently finished, and says "Invalid job id" of one it has forgotten
  /// (finished long ago): only a failure of another kind leaves a task's fate unknown.
  std::map<std::string, std::string> silent;
};

/// What the scheduler knows of the array tasks of `job_ids`: squeue (live and recently
/// finished), then sacct (where accounting runs), then the jobcomp/filetxt log.
SchedulerAnswer query_tasks(const std::vector<std::string>& job_ids);
/// query_tasks(job_ids).records.
std::map<std::string, TaskRecord> task_records(const std::vector<std::string>& job_ids);

}  // namespace qsmcore::batch
