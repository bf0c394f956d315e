// `qsm batch run DIR --local`: the same plan on this machine. Subjects run as child processes
// (`qsm batch task`), as many at once as -j allows and as long as the sum of their requests (the
// --mem each would ask a cluster for) fits the budget; each child gets the budget its request
// gives a cluster task, so it refuses rather than outgrows its share.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "batch/jobs.h"
#include "batch/plan.h"

namespace qsmcore::batch {

struct LocalOptions {
  int jobs = 1;                                 // at most this many subjects at once
  std::int64_t budget_bytes = 0;                // the sum of the running subjects' requests stays within it
  std::function<void(const std::string&)> say;  // one line per start and end
};

/// Runs every subject not done (and not refused by the plan). Returns how many failed to finish.
int run_local(const BatchPlan& p, Jobs& jobs, const LocalOptions& o);

}  // namespace qsmcore::batch
