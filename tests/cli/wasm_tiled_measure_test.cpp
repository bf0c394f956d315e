// The wasm32 tiled run's fit (memory.md §4.6) on runs made up from known figures: it must give
// back the held part and the tile line they were made from, keep every run at or below its
// prediction, and round-trip through the generated table's text.
#include "cli/wasm_tiled_measure.h"

#include <gtest/gtest.h>

#include "cli/measured_table.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"

using namespace qsmcore;
using namespace qsmcore::cli;

namespace {

// A run of `n` tiles of a patch under made-up figures: held 12 MB, tile 4 MB + 150 B/voxel, the
// volumes 10 MB; `extra` added to the rise (an allocator's hole).
WasmTiledPoint run(std::size_t patch, std::int64_t n, std::uint64_t extra = 0) {
  WasmTiledPoint p;
  p.patch = patch;
  p.core = patch - 16;  // halo 8
  p.in_flight = n;
  p.volume_bytes = 10'000'000;
  p.rise_bytes = p.volume_bytes + 12'000'000 + static_cast<std::uint64_t>(n) * (4'000'000 + 150 * p.voxels()) + extra;
  return p;
}

// A tiled network whose patches are multiples of 8 (xQSM): the line starts at 48³ (core 32).
const ModelSpec& net() {
  return *find_model("xqsm");
}

}  // namespace

TEST(WasmTiledRunFit, RecoversTheFiguresTheRunsWereMadeFrom) {
  // The 40³ patch (core 24) is below the line's range: a hole there changes nothing.
  const WasmTiledRun f =
      fit_wasm_tiled_run(net(), {run(56, 1), run(40, 2, 3'000'000), run(48, 2), run(56, 2), run(64, 2)});
  EXPECT_EQ(f.tile_bytes_per_voxel, 150u);
  EXPECT_NEAR(static_cast<double>(f.tile_fixed_bytes), 4e6, 1.0);
  // The held part + the scatter allowance: 2 % of the median run's heap above its volumes (56³).
  const double median = 12e6 + 2 * (4e6 + 150.0 * 56 * 56 * 56);
  EXPECT_NEAR(static_cast<double>(f.held_bytes), 12e6 + kTiledRiseScatter * median, 1.0);
}

TEST(WasmTiledRunFit, NoRunLiesAboveItsPrediction) {
  // A 1.5 MB hole at 48³ (as measured for IR2QSM) lifts the line there and no lower.
  const std::vector<WasmTiledPoint> points{run(56, 1), run(40, 2), run(48, 2, 1'500'000), run(56, 2), run(64, 2)};
  const WasmTiledRun f = fit_wasm_tiled_run(net(), points);
  for (const WasmTiledPoint& p : points) EXPECT_GE(predicted_tiled_rise(f, p), p.rise_bytes) << p.patch;
  // Tight where it binds: only the scatter allowance above it.
  const double allowance = kTiledRiseScatter * (12e6 + 2 * (4e6 + 150.0 * 56 * 56 * 56) + 0.0);
  EXPECT_LT(static_cast<double>(predicted_tiled_rise(f, points[2])),
            static_cast<double>(points[2].rise_bytes) + allowance + 2e4);
}

TEST(WasmTiledRunFit, RefusesRunsThatCannotSplitHeldAndTile) {
  EXPECT_THROW(fit_wasm_tiled_run(net(), {run(40, 2), run(56, 2)}), Error);              // no one-tile run
  EXPECT_THROW(fit_wasm_tiled_run(net(), {run(56, 1), run(40, 2), run(64, 2)}), Error);  // none at its patch
  EXPECT_THROW(fit_wasm_tiled_run(net(), {run(56, 1), run(56, 2)}), Error);              // one patch only
}

TEST(WasmTiledRunFit, RowsRoundTripThroughTheGeneratedTable) {
  std::map<std::string, WasmTileRow> rows;
  rows["xqsm"].bytes_per_voxel = 429;
  rows["xqsm"].note = "xqsm: patches 48³ 64³ 80³, check 72³ +0.43 %, 2 thread(s)";
  rows["xqsm"].run = WasmTiledRun{.held_bytes = 123, .tile_fixed_bytes = 456, .tile_bytes_per_voxel = 789};
  rows["xqsm"].run_note = "tiled runs on a 64³ head: 40/1: 1.00/0.99";
  rows["ir2qsm"].bytes_per_voxel = 166;
  rows["ir2qsm"].note = "ir2qsm: patches 48³ 64³ 80³, check 72³ +3.19 %, 2 thread(s)";
  const std::map<std::string, WasmTileRow> back = wasm_tile_rows(measured_wasm_tiles_header(rows));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back.at("xqsm").bytes_per_voxel, 429u);
  EXPECT_EQ(back.at("xqsm").run, rows["xqsm"].run);
  EXPECT_EQ(back.at("xqsm").note, rows["xqsm"].note);
  EXPECT_EQ(back.at("xqsm").run_note, rows["xqsm"].run_note);
  EXPECT_EQ(back.at("ir2qsm").bytes_per_voxel, 166u);
  EXPECT_EQ(back.at("ir2qsm").run, WasmTiledRun{});
  EXPECT_EQ(back.at("ir2qsm").note, rows["ir2qsm"].note);
  EXPECT_EQ(back.at("ir2qsm").run_note, "");
}
