// Tile budgeting: the reference's pinned values (memory.md §4.3) and qsmcore's per-network
// concurrency, which must never exceed what the budget allows.
#include <gtest/gtest.h>

#include <limits>

#include "qsmcore/error.h"
#include "qsmcore/tiling.h"

namespace {

using qsmcore::TileConfig;

TEST(ReferenceTiling, PinnedValues) {
  EXPECT_EQ(qsmcore::max_wasm_patch_edge(), 131u);
  EXPECT_EQ(qsmcore::tiles_within_wasm_budget({56, 4}), 5u);
  EXPECT_EQ(qsmcore::tiles_within_wasm_budget({24, 4}), 41u);
  for (std::size_t core : {120, 150, 400}) EXPECT_EQ(qsmcore::tiles_within_wasm_budget({core, 4}), 1u) << core;
  EXPECT_EQ(qsmcore::tiles_within_wasm_budget({128, 8}), 1u);
  EXPECT_EQ(qsmcore::tiles_within_wasm_budget({192, 32}), 1u);
  EXPECT_GT(qsmcore::tiles_within_wasm_budget({0, 4}), 1u);
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  EXPECT_EQ(qsmcore::tiles_within_wasm_budget({huge, 4}), 1u);
  EXPECT_EQ(qsmcore::patch_activation_bytes(huge), std::numeric_limits<std::uint64_t>::max());
}

TEST(ReferenceTiling, BudgetCountIsMonotoneInPatchSize) {
  for (std::size_t halo : {0, 4, 8})
    for (std::size_t core = 1; core < 300; ++core)
      EXPECT_LE(qsmcore::tiles_within_wasm_budget({core + 1, halo}), qsmcore::tiles_within_wasm_budget({core, halo}));
}

TEST(ReferenceTiling, PatchFitsOnWasm) {
  EXPECT_NO_THROW(qsmcore::check_wasm_patch_fits({120, 4}, 8));
  EXPECT_THROW(qsmcore::check_wasm_patch_fits({121, 4}, 8), qsmcore::Error);  // patch 136
  EXPECT_NO_THROW(qsmcore::check_wasm_patch_fits({123, 4}, 1));
  EXPECT_THROW(qsmcore::check_wasm_patch_fits({124, 4}, 1), qsmcore::Error);
  try {
    qsmcore::check_wasm_patch_fits(TileConfig{}, 8);
    FAIL() << "the default 144³ patch must not fit on wasm32";
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
    EXPECT_NE(std::string(e.what()).find("144\u00b3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("largest core that fits is 112"), std::string::npos) << e.what();
  }
  try {
    qsmcore::check_wasm_patch_fits({8, 64}, 8);
    FAIL();
  } catch (const qsmcore::Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduce the halo"), std::string::npos) << e.what();
  }
}

// A tiled network with made-up measured figures (the functions only read these fields).
qsmcore::ModelSpec tiled_net(std::uint64_t per_voxel) {
  qsmcore::ModelSpec s;
  s.id = "test-net";
  s.size_divisor = 8;
  s.pad_multiple = {8, 8, 8};
  s.tiled = true;
  s.tile_bytes_per_voxel = per_voxel;
  s.memory = qsmcore::NetworkMemory{.resident_bytes = 20'000'000, .load_peak_bytes = 20'000'000,
                                    .inference_fixed_bytes = 30'000'000, .inference_bytes_per_voxel = per_voxel};
  return s;
}

TEST(NetworkTiling, ConcurrencyStaysWithinBudgetAndPool) {
  const qsmcore::ModelSpec net = tiled_net(937);
  const TileConfig cfg{56, 4};
  const std::uint64_t tile = qsmcore::tile_bytes(net, cfg);
  EXPECT_EQ(tile, 64ull * 64 * 64 * 937);
  const std::uint64_t held = 50'000'000;
  for (std::uint64_t budget = held + tile; budget < held + 20 * tile; budget += tile / 3) {
    for (std::size_t threads : {1, 2, 4, 16}) {
      const std::size_t n = qsmcore::tile_concurrency(net, cfg, budget, threads);
      EXPECT_GE(n, 1u);
      EXPECT_LE(n, threads);
      EXPECT_LE(held + n * tile, budget) << "budget " << budget << ", threads " << threads;
      if (n < threads) {
        EXPECT_GT(held + (n + 1) * tile, budget) << "one more tile would have fit";
      }
    }
  }
  EXPECT_EQ(qsmcore::tile_concurrency(net, cfg, 0, 6), 6u);  // no budget: the pool
}

TEST(NetworkTiling, RefusesWhenNotOneTileFitsAndSaysWhatWould) {
  const qsmcore::ModelSpec net = tiled_net(1000);
  const std::uint64_t budget = 50'000'000 + 48ull * 48 * 48 * 1000;  // room for a 48³ patch
  try {
    qsmcore::tile_concurrency(net, TileConfig{128, 8}, budget, 4);
    FAIL() << "a 144³ tile cannot fit";
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
    EXPECT_NE(std::string(e.what()).find("largest core that fits is 32"), std::string::npos) << e.what();
  }
  EXPECT_EQ(qsmcore::tile_concurrency(net, TileConfig{32, 8}, budget, 4), 1u);
}

TEST(NetworkTiling, WasmTilesInFlightUseTheNetworksOwnFigure) {
  // The reference's 1100 B/voxel gives 5 tiles of 64³; a lighter network gets more.
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(tiled_net(1100), {56, 4}, 16), 5u);
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(tiled_net(400), {56, 4}, 16), 14u);
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(tiled_net(400), {56, 4}, 3), 3u);
  qsmcore::ModelSpec not_tiled = tiled_net(400);
  not_tiled.tiled = false;
  EXPECT_THROW(qsmcore::tile_bytes(not_tiled, {56, 4}), qsmcore::Error);
}

}  // namespace
