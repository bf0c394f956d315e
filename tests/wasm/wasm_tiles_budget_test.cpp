// wasm_tiles_in_flight under a budget (issue #54): the web page's tile plan (src/wasm/web_api.cpp)
// lowers the tiles in flight through it, so it must give what the page's estimate of the run
// allows — wasm_tiled_peak_bytes where the network's wasm32 tiled run is measured, else
// tiled_peak_bytes: the most tiles (at most the unbudgeted count) whose estimated peak fits the
// budget, and 1 where not even one does. The oracle is that estimate itself, searched count by
// count, for every tiled network of the registry.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "qsmcore/models.h"
#include "qsmcore/tiling.h"

using namespace qsmcore;

namespace {

// The page's estimate of a run with k tiles in flight (a field in ppm: no copy).
std::uint64_t estimate(const ModelSpec& spec, TileConfig cfg, std::array<std::size_t, 3> volume, std::size_t k) {
  return spec.wasm_tiled_run ? wasm_tiled_peak_bytes(spec, cfg, volume, k, false)
                             : tiled_peak_bytes(spec, cfg, volume, k, false);
}

// The largest k in [1, most] whose estimate fits `budget`; 1 when none does.
std::size_t most_that_fit(const ModelSpec& spec, TileConfig cfg, std::array<std::size_t, 3> volume, std::size_t most,
                          std::uint64_t budget) {
  std::size_t k = 1;
  while (k < most && estimate(spec, cfg, volume, k + 1) <= budget) ++k;
  return k;
}

}  // namespace

TEST(WasmTilesBudget, LowersToWhatTheTiledPeakEstimateFits) {
  int networks = 0;
  for (const ModelSpec& spec : all_models()) {
    if (!spec.tiled) continue;
    ++networks;
    for (const TileConfig cfg : {TileConfig{16, 8}, TileConfig{32, 8}, TileConfig{48, 4}}) {
      for (const std::array<std::size_t, 3> volume : {std::array<std::size_t, 3>{64, 64, 64}, {96, 80, 72}}) {
        const std::uint64_t voxels = volume[0] * volume[1] * volume[2];
        const std::uint64_t wrapper = tiled_wrapper_bytes(spec, voxels, false);
        for (const std::size_t pool : {1u, 2u, 4u, 16u}) {
          const std::size_t unbudgeted = wasm_tiles_in_flight(spec, cfg, pool);
          EXPECT_EQ(wasm_tiles_in_flight(spec, cfg, pool, 0, wrapper), unbudgeted) << spec.id << ": no budget";
          const std::uint64_t one = estimate(spec, cfg, volume, 1);
          const std::uint64_t all = estimate(spec, cfg, volume, unbudgeted);
          // From well below one tile's peak to above the unbudgeted count's, in uneven steps.
          for (std::uint64_t budget = one / 2; budget <= all + all / 8; budget += (all - one) / 7 + one / 9 + 1) {
            const std::size_t n = wasm_tiles_in_flight(spec, cfg, pool, budget, wrapper);
            EXPECT_GE(n, 1u);
            EXPECT_LE(n, unbudgeted);
            if (budget >= one) {
              EXPECT_EQ(n, most_that_fit(spec, cfg, volume, unbudgeted, budget))
                  << spec.id << " core " << cfg.core << ", pool " << pool << ", budget " << budget;
              EXPECT_LE(estimate(spec, cfg, volume, n), budget) << spec.id;
            }
          }
        }
      }
    }
  }
  EXPECT_GE(networks, 5);  // xQSM, QSMnet, QSMnet+, IR2QSM, qsmcore-invnet
}
