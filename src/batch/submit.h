// `qsm batch submit` and `qsm batch resume`: the plan's array jobs handed to SLURM, a summary
// job after all of them (afterany: it runs `qsm batch status`), and later only what is not done,
// with more memory where a task was killed for it and more time where it ran out.
#pragma once
#include <string>
#include <vector>

#include "batch/jobs.h"
#include "batch/plan.h"
#include "batch/scripts.h"
#include "batch/status.h"

namespace qsmcore::batch {

/// Submits every group of the plan (its scripts as they are on disk now), then the summary job.
/// Error if this plan was submitted already (use resume); attempts of an earlier plan of the
/// folder (another fingerprint) do not count. Records each job in DIR/jobs.json as it
/// goes. Returns a line per job for the user.
std::vector<std::string> submit(const BatchPlan& p, Jobs& jobs);

/// What resume gives a subject next: an OOM kill 1.5× the memory it had (at least the plan's), a
/// timeout 2× the time; anything else the plan's request.
TaskGroup next_request(const SubjectPlan& s, const SubjectStatus& st, const Attempt* last);

/// Resubmits every subject not done, not pending or running and not refused by the plan itself.
/// A subject unknown because the scheduler did not answer (SubjectStatus::scheduler_silent) may
/// still be queued or running: Error, nothing submitted, unless `force` (then it is submitted
/// again like the others, and runs twice if it was still queued).
std::vector<std::string> resume(const BatchPlan& p, Jobs& jobs, const std::vector<SubjectStatus>& st,
                                bool force = false);

}  // namespace qsmcore::batch
