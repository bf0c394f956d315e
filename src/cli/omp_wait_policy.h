// The qsm command's OpenMP threads wait passively unless the user chose a policy.
#pragma once

namespace qsmcore::cli {

/// When neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set: sets OMP_WAIT_POLICY=passive and
/// executes this program again with the same arguments, so libgomp (which read its environment
/// as it loaded, before main) starts with it. Returns only when nothing needs doing or the new
/// image cannot start (then the run goes on with libgomp's default).
void reexec_with_passive_omp_wait(char** argv);

}  // namespace qsmcore::cli
