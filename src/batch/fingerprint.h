// What makes a cohort's outputs a given plan's (issue #51). `qsm batch plan` may be run again
// over a folder that already holds outputs: for another model, with other run arguments, or
// after an input changed. A subject's report alone says that some run finished, not that it was
// this plan's run; counting it as done would hand the user another model's χ. So each plan has
// a fingerprint, and each subject one of its own:
//   plan:    SHA-256 over the kind, the model id (or "pipeline"), the SHA-256 of every weight
//            file the runs use (the network's, or those of a pipeline's --inversion and
//            --mask-net networks) and the plan-wide run arguments;
//   subject: SHA-256 over the plan's fingerprint, the subject's own arguments, and the path,
//            size and modification time of every input file they name (with the BIDS echoes a
//            task stacks, and the JSON sidecars beside them, which give echo times and B0).
// A task writes its subject's fingerprint to plan_fingerprint.txt in the subject's folder before
// it runs; status, run --local and resume count a subject done only when its report is complete,
// that file holds this plan's fingerprint, and the report is not older than that file (written
// by the run the task started, not left from an earlier plan's). Attempts in jobs.json carry the
// fingerprint they ran under, so an earlier plan's attempts are not taken for this one's.
#pragma once
#include <string>
#include <vector>

#include "batch/plan.h"

namespace qsmcore::batch {

/// Fills p.fingerprint and every subject's fingerprint. `weight_sha256`: the SHA-256 of each
/// weight file the runs use, in order.
void fingerprint_plan(BatchPlan& p, const std::vector<std::string>& weight_sha256);

/// The SHA-256 of each file (computed; Error{Io} naming one that cannot be read).
std::vector<std::string> files_sha256(const std::vector<std::string>& paths);

/// DIR/subjects/ID/plan_fingerprint.txt: the fingerprint of the plan the subject last started
/// a run under.
std::string fingerprint_path(const SubjectPlan& s);
/// Writes the subject's fingerprint there (atomically); what a task does before it runs.
void write_fingerprint(const SubjectPlan& s);
/// What is there ("" when nothing is).
std::string read_fingerprint(const SubjectPlan& s);

/// Whether the subject's report (which must exist) was written by a run of this plan: the
/// plan has no fingerprints (written before them), or the file holds this subject's
/// fingerprint and the report is not older than it.
bool report_is_this_plans(const SubjectPlan& s);

}  // namespace qsmcore::batch
