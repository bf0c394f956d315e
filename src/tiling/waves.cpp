// run_waves (tiling/tiles.h): tiles in flight on threads that live for the whole call.
//
// Why not a thread per tile: in wasm32 a thread's stack is taken from the module's heap
// (emscripten mallocs DEFAULT_PTHREAD_STACK_SIZE, 2 MiB, at pthread_create), and a joined
// thread's stack is freed only when the browser's main thread handles its 'cleanupThread'
// message (library_pthread.js) — whenever its event loop gets to it. Threads made per wave left
// the heap's peak to that timing: the page's tiled runs rose to one of two heaps, 2.1 MB apart
// (xQSM 64³ at 32,8: 132.0 or 134.1 MB), on the same input (issue #54). Threads made once per
// call hold the same stacks from the first wave to the last.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "tiling/tiles.h"

namespace qsmcore::tiling {

namespace {

// `size` threads; run(first, last) has thread k call work(first + k) when that is below last,
// waits for all of them, and rethrows the first exception any call threw.
class WaveCrew {
 public:
  WaveCrew(std::int64_t size, const std::function<void(std::int64_t)>& work)
      : work_(work), errors_(static_cast<std::size_t>(size)) {
    threads_.reserve(static_cast<std::size_t>(size));
    for (std::int64_t k = 0; k < size; ++k) threads_.emplace_back([this, k] { serve(k); });
  }
  ~WaveCrew() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_.notify_all();
    for (auto& t : threads_) t.join();
  }
  WaveCrew(const WaveCrew&) = delete;
  WaveCrew& operator=(const WaveCrew&) = delete;

  void run(std::int64_t first, std::int64_t last) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      first_ = first;
      last_ = last;
      pending_ = threads_.size();
      for (auto& e : errors_) e = nullptr;
      ++wave_;
    }
    start_.notify_all();
    std::unique_lock<std::mutex> lock(mu_);
    finished_.wait(lock, [this] { return pending_ == 0; });
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  void serve(std::int64_t k) {
    std::uint64_t seen = 0;
    for (;;) {
      std::int64_t index = 0;
      bool mine = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        start_.wait(lock, [&] { return stop_ || wave_ != seen; });
        if (stop_) return;
        seen = wave_;
        index = first_ + k;
        mine = index < last_;
      }
      std::exception_ptr error;
      if (mine) {
        try {
          work_(index);
        } catch (...) {
          error = std::current_exception();
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      errors_[static_cast<std::size_t>(k)] = error;
      if (--pending_ == 0) finished_.notify_one();
    }
  }

  const std::function<void(std::int64_t)>& work_;
  std::mutex mu_;
  std::condition_variable start_, finished_;
  std::uint64_t wave_ = 0;  // bumped by run(): a new wave to serve
  std::int64_t first_ = 0, last_ = 0;
  std::size_t pending_ = 0;  // threads yet to finish this wave
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;  // last: started after every member above exists
};

}  // namespace

void run_waves(std::int64_t n, std::int64_t in_flight, const std::function<void(std::int64_t)>& work,
               const std::function<void(std::int64_t)>& done) {
  const std::int64_t wave = std::min(std::max<std::int64_t>(in_flight, 1), std::max<std::int64_t>(n, 1));
  if (wave == 1) {
    for (std::int64_t i = 0; i < n; ++i) {
      work(i);
      done(i);
    }
    return;
  }
  WaveCrew crew(wave, work);
  for (std::int64_t first = 0; first < n; first += wave) {
    const std::int64_t last = std::min(n, first + wave);
    crew.run(first, last);
    for (std::int64_t i = first; i < last; ++i) done(i);
  }
}

}  // namespace qsmcore::tiling
