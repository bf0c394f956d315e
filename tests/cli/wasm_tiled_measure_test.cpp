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
  // The 40³ patch (core 24) is below the line's range: a hole there moves its own point
  // (tile_small, half the hole in each of the two tiles), not the line.
  const WasmTiledPoint small = run(40, 2, 3'000'000);
  const WasmTiledRun f = fit_wasm_tiled_run(net(), {run(56, 1), small, run(48, 2), run(56, 2), run(64, 2)});
  EXPECT_EQ(f.tile_bytes_per_voxel, 150u);
  EXPECT_NEAR(static_cast<double>(f.tile_fixed_bytes), 4e6, 1.0);
  EXPECT_EQ(f.tile_small[0].voxels, 40u * 40 * 40);
  EXPECT_NEAR(static_cast<double>(f.tile_small[0].bytes), 4e6 + 150.0 * 40 * 40 * 40 + 1.5e6, 1.0);
  EXPECT_EQ(f.tile_small[1].voxels, 48u * 48 * 48);  // the line's first patch, as natively
  EXPECT_EQ(f.tile_small[2].voxels, 0u);
  EXPECT_GE(predicted_tiled_rise(f, small), small.rise_bytes);
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

TEST(WasmTiledRunFit, CoresPaddedToOnePatchGiveOnePoint) {
  // QSMnet's divisor 16 pads cores 24 and 32 to 48³: one point there, the larger of the two.
  WasmTiledPoint again = run(48, 2, 2'000);
  again.core = 24;
  const WasmTiledRun f = fit_wasm_tiled_run(net(), {run(56, 1), again, run(48, 2), run(56, 2), run(64, 2)});
  EXPECT_EQ(f.tile_small[0].voxels, 48u * 48 * 48);
  EXPECT_EQ(f.tile_small[1].voxels, 0u);
  EXPECT_GE(predicted_tiled_rise(f, again), again.rise_bytes);
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
  rows["xqsm"].run = WasmTiledRun{.held_bytes = 123,
                                  .tile_fixed_bytes = 456,
                                  .tile_bytes_per_voxel = 789,
                                  .tile_small = {{{64000, 1011}, {110592, 1213}}}};
  rows["qsmnet"].bytes_per_voxel = 216;
  rows["qsmnet"].note = "qsmnet: a run without small points";
  rows["qsmnet"].run = WasmTiledRun{.held_bytes = 1, .tile_fixed_bytes = 2, .tile_bytes_per_voxel = 3};
  rows["xqsm"].run_note = "tiled runs on a 64³ head: 40/1: 1.00/0.99";
  rows["ir2qsm"].bytes_per_voxel = 166;
  rows["ir2qsm"].note = "ir2qsm: patches 48³ 64³ 80³, check 72³ +3.19 %, 2 thread(s)";
  const std::map<std::string, WasmTileRow> back = wasm_tile_rows(measured_wasm_tiles_header(rows));
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back.at("qsmnet").run, rows["qsmnet"].run);
  EXPECT_EQ(back.at("xqsm").bytes_per_voxel, 429u);
  EXPECT_EQ(back.at("xqsm").run, rows["xqsm"].run);
  EXPECT_EQ(back.at("xqsm").note, rows["xqsm"].note);
  EXPECT_EQ(back.at("xqsm").run_note, rows["xqsm"].run_note);
  EXPECT_EQ(back.at("ir2qsm").bytes_per_voxel, 166u);
  EXPECT_EQ(back.at("ir2qsm").run, WasmTiledRun{});
  EXPECT_EQ(back.at("ir2qsm").note, rows["ir2qsm"].note);
  EXPECT_EQ(back.at("ir2qsm").run_note, "");
}
