// The sbatch scripts of a plan: one array job per group of subjects with the same request (a
// bucket, or a chunk of one when it has more subjects than the cluster's MaxArraySize; `resume`
// writes its own groups). Each task execs `qsm batch task DIR NAME`, which picks its subject
// from DIR/sbatch/NAME.tasks by SLURM_ARRAY_TASK_ID: no shell between the scheduler's step and
// qsm, so nothing but qsm counts against --mem.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "batch/plan.h"

namespace qsmcore::batch {

struct TaskGroup {
  std::string name;  // the script's name under DIR/sbatch, without .sbatch
  std::int64_t mem_mib = 0, time_min = 0;
  std::vector<std::string> subjects;  // in array-index order
};

/// The plan's buckets as groups, each at most max_array_size subjects.
std::vector<TaskGroup> plan_groups(const BatchPlan& p);

std::string script_path(const BatchPlan& p, const std::string& name);
std::string tasks_path(const BatchPlan& p, const std::string& name);

/// Writes DIR/sbatch/NAME.sbatch and NAME.tasks atomically.
void write_script(const BatchPlan& p, const TaskGroup& g);

/// The subject ids of DIR/sbatch/NAME.tasks, in order.
std::vector<std::string> read_tasks(const BatchPlan& p, const std::string& name);

/// --mem=…M of a script as written (a user may have edited it); 0 if absent.
std::int64_t script_mem_mib(const std::string& script);
std::int64_t script_time_min(const std::string& script);

/// 'text' for a POSIX shell.
std::string shell_quote(const std::string& text);

}  // namespace qsmcore::batch
