// OpenMP's thread count is a property of the calling thread (an ICV of its task): a tile worker
// or the prefetch worker starts with the process default (every core), not with what the caller
// asked for, and omp_set_num_threads in one thread does nothing for another. oneDNN primitives
// fix their thread count when they are created, so setting it only before running is too late.
// Every place that creates, rebuilds or runs kernels therefore holds one of these for its own
// thread; the previous count comes back when it ends (the caller's own OpenMP code is left alone).
#pragma once
#include <omp.h>

namespace qsmcore {

class OmpThreads {
 public:
  explicit OmpThreads(int threads) : saved_(omp_get_max_threads()) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

/// The team size a parallel region opened here gets: what the kernels run now would use.
inline int omp_team_size_here() {
  int n = 1;
#pragma omp parallel
  {
#pragma omp single
    n = omp_get_num_threads();
  }
  return n;
}

}  // namespace qsmcore
