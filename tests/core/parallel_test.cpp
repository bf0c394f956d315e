// core/parallel.h: every index runs exactly once, on at most max_threads() threads, a chunk's
// exception reaches the caller, and a region opened inside a region runs serially. In the
// engine's build this is OpenMP; the ThreadSanitizer target (tests/CMakeLists.txt) compiles
// parallel.cpp without OpenMP, so there the same tests drive the std::thread pool that
// WebAssembly runs on, whose workers and joiner spin before they sleep.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/parallel.h"

namespace {

TEST(ParallelFor, EveryIndexRunsOnceWhateverTheThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE(threads);
    qsmcore::ScopedThreads scope(threads);
    for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{7}, std::int64_t{1000}}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      qsmcore::parallel_for(n, true, [&](std::int64_t i) { hits[static_cast<std::size_t>(i)].fetch_add(1); });
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << "index " << i;
    }
  }
}

// Thousands of short regions back to back, as a conv chain opens for every slab: each sees all of
// its own writes when it returns (the join), and none of a region's work leaks into the next.
TEST(ParallelFor, ShortRegionsBackToBackEachSeeTheirOwnWork) {
  qsmcore::ScopedThreads scope(2);
  std::vector<std::int64_t> out(64);
  for (std::int64_t round = 0; round < 3000; ++round) {
    qsmcore::parallel_for(static_cast<std::int64_t>(out.size()), true,
                          [&](std::int64_t i) { out[static_cast<std::size_t>(i)] = round * 64 + i; });
    std::int64_t wrong = 0;
    for (std::size_t i = 0; i < out.size(); ++i) wrong += out[i] != round * 64 + static_cast<std::int64_t>(i);
    ASSERT_EQ(wrong, 0) << "round " << round;
  }
}

// Only the pool carries exceptions across threads: an exception may not leave an OpenMP region,
// so the engine never throws inside one. The TSan target defines QSM_STD_THREAD_POOL.
#ifdef QSM_STD_THREAD_POOL
TEST(ParallelFor, AChunksExceptionReachesTheCaller) {
  qsmcore::ScopedThreads scope(2);
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{99}}) {
    std::atomic<int> ran{0};
    EXPECT_THROW(qsmcore::parallel_for(100, true,
                                       [&](std::int64_t i) {
                                         ran.fetch_add(1);
                                         if (i == bad) throw std::runtime_error("chunk failed");
                                       }),
                 std::runtime_error)
        << "index " << bad;
    EXPECT_GE(ran.load(), 1);
  }
  // The pool is still usable after a failed region.
  std::atomic<int> sum{0};
  qsmcore::parallel_for(10, true, [&](std::int64_t i) { sum.fetch_add(static_cast<int>(i)); });
  EXPECT_EQ(sum.load(), 45);
}
#endif

TEST(ParallelFor, ANestedRegionRunsSerially) {
  qsmcore::ScopedThreads scope(2);
  std::atomic<int> nested_teams{0}, inner{0};
  qsmcore::parallel_for(4, true, [&](std::int64_t) {
    nested_teams.fetch_add(qsmcore::team_size_here() == 1 ? 0 : 1);
    qsmcore::parallel_for(8, true, [&](std::int64_t) { inner.fetch_add(1); });
  });
  EXPECT_EQ(inner.load(), 32);
  EXPECT_EQ(nested_teams.load(), 0) << "a region inside a region got more than one thread";
}

// Two threads of the process opening regions at once share the pool's workers.
TEST(ParallelFor, RegionsFromTwoCallersAtOnce) {
  std::atomic<std::int64_t> total{0};
  auto caller = [&] {
    qsmcore::ScopedThreads scope(2);
    for (int r = 0; r < 500; ++r) qsmcore::parallel_for(16, true, [&](std::int64_t i) { total.fetch_add(i); });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 500 * 120);
}

}  // namespace
