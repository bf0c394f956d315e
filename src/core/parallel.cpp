// The two implementations of core/parallel.h: OpenMP natively, a std::thread pool where there
// is no OpenMP runtime (WebAssembly), serial where there are no threads at all.
#include "core/parallel.h"

#include <algorithm>

#ifdef _OPENMP
#include <omp.h>
#else
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace qsmcore {
namespace {

// Chunk t of T over [0, n): the first n % T chunks take one more index, as schedule(static).
std::pair<std::int64_t, std::int64_t> static_chunk(std::int64_t n, int t, int teams) {
  const std::int64_t base = n / teams, extra = n % teams;
  const std::int64_t lo = t * base + std::min<std::int64_t>(t, extra);
  return {lo, lo + base + (t < extra ? 1 : 0)};
}

}  // namespace

#ifdef _OPENMP

int max_threads() {
  return omp_get_max_threads();
}
void set_max_threads(int n) {
  omp_set_num_threads(std::max(1, n));
}
int team_size_here() {
  int n = 1;
#pragma omp parallel
  {
#pragma omp single
    n = omp_get_num_threads();
  }
  return n;
}

void detail::run_static_chunks(std::int64_t n, ChunkFn fn, void* ctx) {
#pragma omp parallel
  {
    const auto [lo, hi] = static_chunk(n, omp_get_thread_num(), omp_get_num_threads());
    if (lo < hi) fn(ctx, lo, hi);
  }
}

#else

namespace {

#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
constexpr bool kHaveThreads = false;  // the single-threaded wasm build (no SharedArrayBuffer)
#else
constexpr bool kHaveThreads = true;
#endif

int default_threads() {
  if (!kHaveThreads) return 1;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

thread_local int tl_threads = 0;         // 0: the process default
thread_local bool tl_in_region = false;  // regions opened inside a region run serially, as OpenMP's nested default

// Spins until `ready` (an acquire load) holds or kSpin has passed, whichever comes first; the
// caller then waits as before, which returns at once when it holds. A sleeping thread is woken
// through a futex, which in a browser is Atomics.notify and takes tens to hundreds of
// microseconds to run the waiter again; a conv chain opens a region for every slab of every
// layer (IR2QSM at 64³: 682 per run), each a few milliseconds long, so that latency on both the
// fork and the join was paid every time.
constexpr auto kSpin = std::chrono::microseconds(200);
template <class Ready>
void spin_until(Ready&& ready) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i)
      if (ready()) return;
    if (std::chrono::steady_clock::now() >= until) return;
  }
}

// Workers are started on first use and live for the process; jobs are whole chunks.
class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool;  // never destroyed: workers may outlive static destructors
    return *pool;
  }
  void ensure_workers(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    while (static_cast<int>(workers_.size()) < n) {
      workers_.emplace_back([this] { work(); });
      workers_.back().detach();
    }
  }
  void submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
      queued_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_one();
  }

 private:
  void work() {
    tl_in_region = true;
    for (;;) {
      std::function<void()> job;
      spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; });
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()> > jobs_;
  std::atomic<int> queued_{0};  // jobs_.size(), readable without the lock while spinning
  std::vector<std::thread> workers_;
};

// What one region waits for: its chunks still running, and the first exception one threw.
// `pending` changes only under the lock, so a joiner that saw it reach 0 while spinning takes
// the lock once more before the region leaves its stack: the last worker has let go of it then.
struct Region {
  std::mutex mu;
  std::condition_variable done;
  std::atomic<int> pending{0};
  std::exception_ptr error;
  void finish(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu);
    if (e && !error) error = e;
    if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) done.notify_all();
  }
};

}  // namespace

int max_threads() {
  return tl_threads > 0 ? tl_threads : default_threads();
}
void set_max_threads(int n) {
  tl_threads = kHaveThreads ? std::max(1, n) : 1;
}
int team_size_here() {
  return tl_in_region ? 1 : max_threads();
}

void detail::run_static_chunks(std::int64_t n, ChunkFn fn, void* ctx) {
  const int teams = static_cast<int>(std::min<std::int64_t>(n, team_size_here()));
  if (teams <= 1) {
    fn(ctx, 0, n);
    return;
  }
  Pool& pool = Pool::get();
  pool.ensure_workers(teams - 1);
  Region region;
  region.pending.store(teams - 1, std::memory_order_relaxed);
  for (int t = 1; t < teams; ++t) {
    const auto [lo, hi] = static_chunk(n, t, teams);
    pool.submit([&region, fn, ctx, lo = lo, hi = hi] {
      std::exception_ptr e;
      try {
        fn(ctx, lo, hi);
      } catch (...) {
        e = std::current_exception();
      }
      region.finish(e);
    });
  }
  std::exception_ptr own;
  tl_in_region = true;
  try {
    const auto [lo, hi] = static_chunk(n, 0, teams);
    fn(ctx, lo, hi);
  } catch (...) {
    own = std::current_exception();
  }
  tl_in_region = false;
  spin_until([&] { return region.pending.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lock(region.mu);
  region.done.wait(lock, [&] { return region.pending.load(std::memory_order_relaxed) == 0; });
  if (own) std::rethrow_exception(own);
  if (region.error) std::rethrow_exception(region.error);
}

#endif

}  // namespace qsmcore
