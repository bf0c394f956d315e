// Tile budgeting: the reference's pinned values (memory.md §4.3) and qsmcore's per-network
// concurrency, which must never exceed what the budget allows.
#include "qsmcore/tiling.h"

#include <gtest/gtest.h>

#include <limits>

#include "qsmcore/error.h"

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

// A tiled network with made-up measured figures (the functions only read these fields): the
// native tile cost `fixed` + `per_voxel` per patch voxel, and no wasm32 figure.
qsmcore::ModelSpec tiled_net(std::uint64_t per_voxel, std::uint64_t fixed = 0) {
  qsmcore::ModelSpec s;
  s.id = "test-net";
  s.size_divisor = 8;
  s.pad_multiple = {8, 8, 8};
  s.tiled = true;
  s.native_tile_bytes_per_voxel = per_voxel;
  s.native_tile_fixed_bytes = fixed;
  s.memory = qsmcore::NetworkMemory{.resident_bytes = 20'000'000,
                                    .load_peak_bytes = 20'000'000,
                                    .inference_fixed_bytes = 30'000'000,
                                    .inference_bytes_per_voxel = per_voxel};
  return s;
}

TEST(NetworkTiling, ConcurrencyStaysWithinBudgetAndPool) {
  const qsmcore::ModelSpec net = tiled_net(937, 123'456);
  const TileConfig cfg{56, 4};
  const std::uint64_t tile = qsmcore::tile_bytes(net, cfg);
  EXPECT_EQ(tile, 123'456 + 64ull * 64 * 64 * 937);  // the fixed part counts once per tile
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
  // The advice counts the tile's fixed part too: the same room minus it fits a 40³ patch only.
  const qsmcore::ModelSpec heavy = tiled_net(1000, 48ull * 48 * 48 * 1000 - 40ull * 40 * 40 * 1000);
  try {
    qsmcore::tile_concurrency(heavy, TileConfig{128, 8}, budget, 4);
    FAIL() << "a 144³ tile cannot fit";
  } catch (const qsmcore::Error& e) {
    EXPECT_NE(std::string(e.what()).find("largest core that fits is 24"), std::string::npos) << e.what();
  }
}

TEST(NetworkTiling, WasmTilesInFlightUseTheNetworksOwnFigure) {
  // The reference's 1100 B/voxel gives 5 tiles of 64³; a lighter network gets more.
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(tiled_net(1100), {56, 4}, 16), 5u);
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(tiled_net(400), {56, 4}, 16), 14u);
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(tiled_net(400), {56, 4}, 3), 3u);
  // The wasm32 figure, where there is one, is the seed's tile_bytes_per_voxel.
  qsmcore::ModelSpec wasm = tiled_net(1100, 1'000'000);
  wasm.tile_bytes_per_voxel = 400;
  EXPECT_EQ(qsmcore::wasm_tile_bytes(wasm, {56, 4}), 64ull * 64 * 64 * 400);
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(wasm, {56, 4}, 16), 14u);
  qsmcore::ModelSpec not_tiled = tiled_net(400);
  not_tiled.tiled = false;
  EXPECT_THROW(qsmcore::tile_bytes(not_tiled, {56, 4}), qsmcore::Error);
}

// The wasm32 tiled run (memory.md §4.6): its tile line replaces the slope, and the run's heap is
// its held part + the larger of the wrapper's step before the tiles and the tiles' phase.
TEST(NetworkTiling, WasmTiledRunFiguresGiveTheTileAndThePeak) {
  qsmcore::ModelSpec net = tiled_net(1100, 1'000'000);
  net.tile_bytes_per_voxel = 400;
  EXPECT_THROW(qsmcore::wasm_tiled_peak_bytes(net, {56, 4}, {64, 64, 64}, 2), qsmcore::Error);  // not measured
  net.wasm_tiled_run =
      qsmcore::WasmTiledRun{.held_bytes = 10'000'000, .tile_fixed_bytes = 3'000'000, .tile_bytes_per_voxel = 200};
  const std::uint64_t tile = 3'000'000 + 64ull * 64 * 64 * 200;  // 55'428'800
  EXPECT_EQ(qsmcore::wasm_tile_bytes(net, {56, 4}), tile);
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(net, {56, 4}, 64), 1'500'000'000 / tile);  // 27
  // 96³ volume, the field read in place: the output volume + 4 KiB.
  const std::uint64_t voxels = 96ull * 96 * 96, wrapper = 8 * voxels + 4096, held = 10'000'000;
  EXPECT_EQ(qsmcore::wasm_tiled_peak_bytes(net, {56, 4}, {96, 96, 96}, 3, false), held + wrapper + 3 * tile);
  // Under a budget: what fits beside the held part and the wrapper, at least 1, at most the pool.
  const std::uint64_t room = held + wrapper + 2 * tile;
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(net, {56, 4}, 16, room, wrapper), 2u);
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(net, {56, 4}, 16, room - 1, wrapper), 1u);
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(net, {56, 4}, 16, 1000, wrapper), 1u);
  EXPECT_EQ(qsmcore::wasm_tiles_in_flight(net, {56, 4}, 2, 100 * room, wrapper), 2u);
}

// TileCost: the line from its small points' end up, the chord between small points below it,
// the first point's bytes under the first. Values worked out by hand.
TEST(NetworkTiling, TileCostIsTheLineAboveItsSmallPatches) {
  const qsmcore::TileCost c{
      .fixed_bytes = 1'000, .bytes_per_voxel = 10, .small = {{{1'000, 30'000}, {2'000, 40'000}, {4'000, 41'000}}}};
  EXPECT_EQ(c.bytes({10, 10, 10}), 30'000u);   // on the first point
  EXPECT_EQ(c.bytes({5, 10, 10}), 30'000u);    // below it: its bytes
  EXPECT_EQ(c.bytes({15, 10, 10}), 35'000u);   // half-way to the second
  EXPECT_EQ(c.bytes({30, 10, 10}), 40'500u);   // half-way to the third
  EXPECT_EQ(c.bytes({1, 2'001, 1}), 40'001u);  // a chord rounded up (40'000 + 1'000 · 1/2'000)
  EXPECT_EQ(c.bytes({40, 10, 10}), 41'000u);   // the last point: the line, 1'000 + 4'000 · 10
  EXPECT_EQ(c.bytes({50, 10, 10}), 51'000u);   // the line
  const qsmcore::TileCost line{.fixed_bytes = 7, .bytes_per_voxel = 3};
  EXPECT_EQ(line.bytes({2, 2, 2}), 31u);  // no small points: the line everywhere
}

// fit_tile_cost: points from the patch of core 32 up make the line (slope rounded up, fixed part
// the least that covers them); points up to that patch are kept as they are.
TEST(NetworkTiling, FitTileCostCoversEveryPoint) {
  const qsmcore::ModelSpec net = tiled_net(1);  // divisor 8: patches 32, 40, 48, 64, 80
  std::vector<qsmcore::TilePoint> runs;
  const auto v = [](std::uint64_t p) { return p * p * p; };
  // A line of 100.5 B/voxel + 2'000 from 48³ up, a bump of 1 MB at 32³ and 0.5 MB at 40³.
  for (const std::uint64_t p : {80u, 32u, 64u, 40u, 48u}) {
    std::uint64_t bytes = 2'000 + v(p) * 201 / 2;
    if (p == 32) bytes += 1'000'000;
    if (p == 40) bytes += 500'000;
    runs.push_back({v(p), bytes});
  }
  const qsmcore::TileCost c = qsmcore::fit_tile_cost(net, runs);
  EXPECT_EQ(c.bytes_per_voxel, 101u);
  // 101 · v(p) over-counts by v(p)/2 at every point, the most at 48³: the fixed part is 0 then.
  EXPECT_EQ(c.fixed_bytes, 0u);
  EXPECT_EQ(c.small[0], (qsmcore::TilePoint{v(32), 2'000 + v(32) * 201 / 2 + 1'000'000}));
  EXPECT_EQ(c.small[1], (qsmcore::TilePoint{v(40), 2'000 + v(40) * 201 / 2 + 500'000}));
  EXPECT_EQ(c.small[2], (qsmcore::TilePoint{v(48), 2'000 + v(48) * 201 / 2}));
  for (const auto& r : runs) {
    const std::uint64_t got = c.bytes({static_cast<std::size_t>(r.voxels), 1, 1});
    EXPECT_GE(got, r.bytes) << r.voxels;
    EXPECT_LE(got, r.bytes + r.voxels) << r.voxels;  // at most 1 B/voxel over
  }
  // Too few points on the line.
  EXPECT_THROW(qsmcore::fit_tile_cost(net, {{v(32), 1}, {v(48), 2}}), qsmcore::Error);
}

}  // namespace
