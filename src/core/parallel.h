// Data parallelism for the engine's own loops (reference kernels, post-ops, physics glue).
// Natively this is OpenMP, whose team size oneDNN also follows, so one setting governs both.
// WebAssembly has no OpenMP runtime (Debian's emscripten ships no libomp), so there the same
// calls run on a small std::thread pool; a build without pthreads runs them serially.
//
// The thread count is a property of the calling thread, as OpenMP's is: a tile worker or the
// prefetch worker starts with the process default, and whoever builds or runs kernels holds a
// ScopedThreads for its own thread.
#pragma once
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace qsmcore {

/// Threads a parallel region opened by this thread may use.
int max_threads();
/// Sets max_threads() for this thread (n ≥ 1).
void set_max_threads(int n);
/// The team size a parallel region opened here actually gets (OpenMP may give fewer than asked).
int team_size_here();

/// Sets this thread's count for its lifetime, restoring the previous one after.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) : saved_(max_threads()) {
    if (threads > 0) set_max_threads(threads);
  }
  ~ScopedThreads() { set_max_threads(saved_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_;
};

namespace detail {
using ChunkFn = void (*)(void* ctx, std::int64_t lo, std::int64_t hi);
/// Splits [0, n) into one contiguous chunk per thread (as OpenMP's schedule(static)) and runs
/// fn on each; returns when all are done.
void run_static_chunks(std::int64_t n, ChunkFn fn, void* ctx);
}  // namespace detail

/// Runs f(i) for every i in [0, n), over max_threads() threads when `parallel` (else serially).
/// Each index runs on exactly one thread, so results do not depend on the thread count.
template <class F>
void parallel_for(std::int64_t n, bool parallel, F&& f) {
  if (!parallel || n <= 1) {
    for (std::int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  auto chunk = [](void* ctx, std::int64_t lo, std::int64_t hi) {
    auto& fn = *static_cast<std::remove_reference_t<F>*>(ctx);
    for (std::int64_t i = lo; i < hi; ++i) fn(i);
  };
  detail::run_static_chunks(n, chunk, const_cast<void*>(static_cast<const void*>(&f)));
}

/// Σ f(k) over k in [0, n), each term on one thread (in parallel when `parallel`) and the terms
/// added in order afterwards, so the sum does not depend on the thread count: the reductions of the
/// classical stages (sums over a volume's planes), whose outputs are checked bit for bit across
/// thread counts. A term is typically one plane's sum.
template <class F>
double ordered_sum(std::int64_t n, bool parallel, F&& f) {
  std::vector<double> terms(static_cast<std::size_t>(n > 0 ? n : 0), 0.0);
  parallel_for(n, parallel, [&](std::int64_t k) { terms[static_cast<std::size_t>(k)] = f(k); });
  double total = 0.0;
  for (double t : terms) total += t;
  return total;
}

}  // namespace qsmcore
