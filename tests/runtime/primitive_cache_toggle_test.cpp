// oneDNN's primitive cache is process-wide: kernels::release_unused_primitives() empties it by
// setting its capacity to 0 and back. Models on several threads drop plans at once (a tiled run,
// a server's models), and two unlocked toggles interleaved (get 1024, set 0 | get 0, set 0, set
// 0 | set 1024 ...) could leave the capacity at 0 — every later primitive then built anew,
// generated code and all — or lose entries another model just cached. Oracle: the capacity a
// caller set before the threads started, which the toggles must restore (issue #51).
#include <gtest/gtest.h>

#if QSM_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#include <thread>
#include <vector>

#include "kernels/pack_cache.h"

namespace {

TEST(PrimitiveCacheToggle, ConcurrentReleasesRestoreTheCapacity) {
  const int before = dnnl::get_primitive_cache_capacity();
  constexpr int kCapacity = 777;  // not the default, so a restore from a stale read shows
  dnnl::set_primitive_cache_capacity(kCapacity);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([] {
        for (int i = 0; i < 200; ++i) qsmcore::kernels::release_unused_primitives();
      });
    for (auto& th : threads) th.join();
    ASSERT_EQ(dnnl::get_primitive_cache_capacity(), kCapacity) << "after round " << round;
  }
  dnnl::set_primitive_cache_capacity(before);
}

}  // namespace
#endif
