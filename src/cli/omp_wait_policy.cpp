// Why: libgomp's default has a thread that reaches the end of a parallel region spin for up to
// 300000 iterations (GOMP_SPINCOUNT, ~ms) before it sleeps. Alone on its cores that costs
// nothing, but a run rarely is: two runs sharing cores (ctest -j2, a SLURM node shared by tasks,
// a batch beside a viewer) or our own spill and prefetch threads beside a kernel's team find a
// core held by a thread that only spins while the thread it waits for is descheduled. Measured on
// this 2-core machine: the residency, spill and finer-slab tests under ctest -j2 took 252 s with
// the default and 28 s passive; a lone full-size xQSM run takes the same time either way
// (20.4/19.6 s default, 20.2/21.4 s passive; user time 33.5 → 32 s).
//
// How: libgomp reads its environment once, in its initialiser, before main. Setting it earlier
// does not work: a .preinit_array function runs before libgomp's initialiser, but libc's own
// initialiser, which runs in between, resets environ to the process's original array (measured
// with libgomp 12: GOMP_SPINCOUNT stayed 300000). So the command executes itself again, once,
// with the variable set; the second image finds it set and goes on. The Python module needs no
// such step: it sets the variable before it loads the engine (python/qsmcore/__init__.py).
#include "cli/omp_wait_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace qsmcore::cli {

void reexec_with_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure (no /proc): go on as we are
}

}  // namespace qsmcore::cli
