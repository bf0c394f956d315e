// The wasm32 tile cost (memory.md §4.5, §4.6): the generated table names only registered tiled
// networks, and the functions turn its figures (the whole tiled run's tile line where measured,
// else the per-voxel slope) into a tile's bytes and tiles in flight by memory.md §4.3's formulas
// (written out here).
#include <gtest/gtest.h>

#include "models/measured_wasm_tiles.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"
#include "qsmcore/tiling.h"

using namespace qsmcore;

TEST(WasmTileCost, TableRowsAreRegisteredTiledNetworks) {
  for (const auto& row : models_detail::kMeasuredWasmTiles) {
    const ModelSpec* spec = find_model(row.id);
    ASSERT_NE(spec, nullptr) << row.id;
    EXPECT_TRUE(spec->tiled) << row.id;
    EXPECT_GT(row.bytes_per_voxel, 0u) << row.id;
    EXPECT_EQ(wasm_tile_bytes_per_voxel(*spec), row.bytes_per_voxel);
    EXPECT_EQ(spec->tile_bytes_per_voxel, row.bytes_per_voxel);  // the seed's field carries it
    // The whole tiled run's figures, where measured, ride along unchanged.
    if (row.run.tile_bytes_per_voxel > 0) {
      ASSERT_TRUE(spec->wasm_tiled_run.has_value()) << row.id;
      EXPECT_EQ(*spec->wasm_tiled_run, row.run) << row.id;
    } else {
      EXPECT_FALSE(spec->wasm_tiled_run.has_value()) << row.id;
    }
  }
}

TEST(WasmTileCost, BytesAndTilesInFlightFollowTheFormulas) {
  for (const ModelSpec& spec : all_models()) {
    const TileConfig cfg{56, 4};
    if (!spec.tiled) {
      EXPECT_FALSE(wasm_tile_bytes_per_voxel(spec).has_value()) << spec.id;
      EXPECT_THROW(wasm_tile_bytes(spec, cfg), Error) << spec.id;
      continue;
    }
    std::uint64_t d = spec.size_divisor;
    for (auto m : spec.pad_multiple) d = std::max<std::uint64_t>(d, m);
    const std::uint64_t p = (56 + 8 + d - 1) / d * d;
    const auto w = wasm_tile_bytes_per_voxel(spec);
    const auto& run = spec.wasm_tiled_run;
    const std::uint64_t per = run ? run->tile_fixed_bytes + run->tile_bytes_per_voxel * p * p * p
                              : w ? *w * p * p * p
                                  : spec.native_tile_fixed_bytes + *spec.native_tile_bytes_per_voxel * p * p * p;
    if (w || run) {
      EXPECT_EQ(wasm_tile_bytes(spec, cfg), per) << spec.id;
    }
    for (std::size_t pool : {1u, 4u, 64u})
      EXPECT_EQ(wasm_tiles_in_flight(spec, cfg, pool),
                std::min<std::uint64_t>(pool, std::max<std::uint64_t>(1, 1'500'000'000 / per)))
          << spec.id;
  }
}
