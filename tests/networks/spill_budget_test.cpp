// Whole-volume networks under a budget below their unbudgeted peak (issue #16): run_network
// spills the graphs' activations instead of refusing, and the χ is the unbudgeted χ bit for
// bit. The budget is the least the refusal of a smaller one names, so that figure is checked
// too: the run fits it exactly, by the accounting layer's own high-water. A U-Net (xQSM), a
// network with concatenations (iQSM), an unrolled one (NeXtQSM: two graphs, six iterations,
// the wrapper's full-volume buffers in the same budget).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "networks/unroll.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"
#include "qsmcore/residency.h"
#include "support/same_outputs.h"
#include "support/scoped_conv_algo.h"
#include "support/test_data.h"

using namespace qsmcore;

namespace {

const Phantom& phantom() {
  static const Phantom* p = [] {
    PhantomOptions o;
    o.dims = {32, 32, 32};
    o.voxel_mm = {1.0, 1.0, 1.0};
    o.b0_t = 3.0;
    o.te_s = {0.004, 0.012};
    return new Phantom(make_head_phantom(o));
  }();
  return *p;
}

NetworkInputs inputs_for(const ModelSpec& spec) {
  const Phantom& ph = phantom();
  const NetworkNeeds n = network_needs(spec);
  NetworkInputs in;
  if (n.field_kind == "total field") {
    in.field = &ph.total_field;
  } else if (n.field_kind == "wrapped phase") {
    in.field = &ph.phase;
    in.field_unit = FieldUnit::Rad;
    in.echo_times_s = {0.004, 0.012};
  } else {
    in.field = &ph.local_field;
  }
  in.magnitude = &ph.magnitude;
  in.mask = &ph.mask;
  in.b0_tesla = 3.0;
  return in;
}

std::vector<std::string> twin_paths(const std::string& dir, const ModelSpec& spec) {
  std::vector<std::string> p;
  for (const auto& f : spec.files) p.push_back(dir + "/" + std::string(f.name));
  return p;
}

// The figure a refusal names after `key`, or `missing`.
std::int64_t figure_after(const std::string& msg, const std::string& key, std::int64_t missing = -1) {
  const auto at = msg.find(key);
  return at == std::string::npos ? missing : std::stoll(msg.substr(at + key.size()));
}

// The least whole-run figure a refusal names ("... the whole run N"), or -1.
std::int64_t least_named(const std::string& msg) {
  return figure_after(msg, "the whole run ");
}

class SpillBudget : public testing::TestWithParam<std::string> {};

TEST_P(SpillBudget, WholeVolumeWithinTheLeastBudgetIsTheUnbudgetedRunBitForBit) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& spec = require_model(GetParam());
  const NetworkInputs in = inputs_for(spec);
  NetworkOptions o;
  o.model.threads = 2;
  o.park_buffers = false;  // the activations' spill alone (parking: parking_test.cpp)
  o.model.mem_budget = 0;
  const NetworkRun whole = run_network(spec, twin_paths(dir, spec), in, o);
  EXPECT_EQ(whole.spill_written_bytes + whole.spill_read_bytes, 0);

  // Half the unbudgeted peak does not fit even spilled (the largest steps' operands stay): the
  // refusal names the least that does (with tiling off: xQSM would run as tiles, below).
  const std::int64_t held = memory_current();
  o.model.mem_budget = held + whole.predicted_peak_bytes / 2;
  o.auto_tile = false;
  std::int64_t least = -1;
  try {
    run_network(spec, twin_paths(dir, spec), in, o);
    FAIL() << spec.id << ": half the peak fit";
  } catch (const Error& e) {
    ASSERT_EQ(e.kind(), ErrorKind::OutOfBudget) << e.what();
    least = least_named(e.what());
    ASSERT_GT(least, 0) << "the refusal names no spilled figure: " << e.what();
  }
  EXPECT_EQ(memory_current(), held) << "a refusal leaks";
  ASSERT_LT(least, held + whole.predicted_peak_bytes) << "spilling saves nothing on " << spec.id;

  o.model.mem_budget = least;
  const NetworkRun spilled = run_network(spec, twin_paths(dir, spec), in, o);
  EXPECT_GT(spilled.spill_written_bytes, 0) << spec.id;
  EXPECT_GT(spilled.spill_read_bytes, 0) << spec.id;
  EXPECT_LE(held + spilled.predicted_peak_bytes, o.model.mem_budget);
  EXPECT_LE(held + spilled.measured_peak_bytes, o.model.mem_budget) << "the accounted high-water passed the budget";
  EXPECT_EQ(spilled.tiles, 1);
  // The slabs each ran on, as the report names them: the default unbudgeted, as fine or finer
  // under the budget.
  EXPECT_GT(whole.chain_window_share, 0);
  EXPECT_GE(spilled.chain_window_share, whole.chain_window_share);
  qsmtest::expect_same_outputs(spilled, whole, std::string(spec.id));

  // Without spilling the same budget is refused, before anything is allocated.
  o.model.spill_activations = false;
  const std::int64_t before = memory_current();
  EXPECT_THROW(run_network(spec, twin_paths(dir, spec), in, o), Error);
  EXPECT_EQ(memory_current(), before);
}

// When even the spilled whole volume does not fit, a tileable network runs as the largest tiles
// that do, saying so; asked for the whole volume (--tile 0), it is refused naming that tile.
TEST(SpillBudgetTiles, BelowTheLeastATileableNetworkRunsAsTilesThatFit) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& spec = require_model("xqsm");
  const NetworkInputs in = inputs_for(spec);
  NetworkOptions o;
  o.model.threads = 2;
  o.model.mem_budget = 0;
  // Without conv chains, whose streamed operands let the whole 32³ volume run spilled within
  // less than an 8³ tile with its halo of 8 needs.
  o.model.stream_conv_chains = false;
  const NetworkRun whole = run_network(spec, twin_paths(dir, spec), in, o);
  const std::int64_t held = memory_current();
  // The least the spilled whole volume needs, from a refusal of it: the model and wrapper
  // buffers outweigh one spilled run at this size, so a fraction of the unbudgeted peak would
  // either fit whole or leave no room for any tile. An eighth of a spilled run below that least,
  // the whole volume does not fit and smaller tiles do (not much further below: tiles hold the
  // output volume beside their runs, which the whole run makes only once its graph has run).
  std::int64_t whole_least = 0, run_least = 0;
  {
    NetworkOptions probe = o;
    probe.tile = TileRequest{{0, 0, 0}, -1};
    probe.model.mem_budget = held + whole.predicted_peak_bytes / 3;  // above what loading alone checks
    try {
      run_network(spec, twin_paths(dir, spec), in, probe);
    } catch (const Error& e) {
      const std::string m = e.what();
      const auto number_after = [&](const std::string& key) { return figure_after(m, key, 0); };
      run_least = number_after("one run needs at least ");
      whole_least = number_after("bytes, the whole run ");
    }
  }
  ASSERT_GT(run_least, 0) << "the refusal names no spilled least";
  ASSERT_GT(whole_least, held + run_least);
  o.model.mem_budget = whole_least - run_least / 8;
  {
    // Scoped: the refusal below must see the same baseline (`held`) as this run did, not this
    // run's output volumes as well.
    const NetworkRun tiled = run_network(spec, twin_paths(dir, spec), in, o);
    EXPECT_GT(tiled.tiles, 1);
    EXPECT_LE(held + tiled.measured_peak_bytes, o.model.mem_budget);
    ASSERT_FALSE(tiled.warnings.empty());
    EXPECT_NE(tiled.warnings.front().find("ran as tiles of core"), std::string::npos) << tiled.warnings.front();
    EXPECT_NE(tiled.warnings.front().find("even with its activations spilled"), std::string::npos);
  }
  {
    // With spilling off the warning does not claim the whole volume was tried spilled.
    NetworkOptions no_spill = o;
    no_spill.model.spill_activations = false;
    const NetworkRun tiled = run_network(spec, twin_paths(dir, spec), in, no_spill);
    ASSERT_FALSE(tiled.warnings.empty());
    EXPECT_NE(tiled.warnings.front().find("in memory (spilling is off)"), std::string::npos) << tiled.warnings.front();
  }
  o.tile = TileRequest{{0, 0, 0}, -1};  // the whole volume, as --tile 0 asks
  try {
    run_network(spec, twin_paths(dir, spec), in, o);
    FAIL() << "the whole volume was not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfBudget);
    EXPECT_NE(std::string(e.what()).find("a tile with core"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, SpillBudget, testing::Values("xqsm", "iqsm", "nextqsm"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace

// Auto-tiling runs the tile a refusal names, and when that tile's own plan is refused naming a
// smaller one, that one, and so on: over a sweep of budgets with streamed weights (whose window a
// named tile once left out: QSMnet's full-size twin at a quarter of its peak, spilling off, was
// refused naming 96³ cores after its 112³ patches were predicted 66 MB over), a run is refused
// only when no tile is named, and each run that goes ahead stays within its budget. Under
// Winograd too, whose scratch costs a small patch more a voxel than the whole volume it is sized
// from (the 48³ patch named at 5/10 of the peak came 0.55 MB over; it then stopped there).
TEST(SpillBudgetTiles, AutoTilingNeverRefusesNamingATileThatFits) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& spec = require_model("qsmnet");
  PhantomOptions po;
  po.dims = {96, 96, 64};
  po.b0_t = 3.0;
  const Phantom ph = make_head_phantom(po);
  NetworkInputs in;
  in.field = &ph.local_field;
  in.mask = &ph.mask;
  in.b0_tesla = 3.0;
  for (const char* algo : {"direct", "auto"}) {
    SCOPED_TRACE(algo);
    const qsmtest::ScopedConvAlgo scoped(algo);
    NetworkOptions o;
    o.model.threads = 2;
    o.model.mem_budget = 0;
    o.model.spill_activations = false;  // tiles are then the only way under the whole volume's peak
    o.model.residency = parse_residency("stream:host=0");
    const NetworkRun whole = run_network(spec, twin_paths(dir, spec), in, o);
    const std::int64_t held = memory_current();
    int tiled = 0;
    for (int i = 1; i <= 8; ++i) {
      o.model.mem_budget = held + whole.predicted_peak_bytes * i / 10;
      try {
        const NetworkRun r = run_network(spec, twin_paths(dir, spec), in, o);
        tiled += r.tiles > 1 ? 1 : 0;
        EXPECT_LE(held + r.measured_peak_bytes, o.model.mem_budget) << "at " << i << "/10 of the peak";
      } catch (const Error& e) {
        ASSERT_EQ(e.kind(), ErrorKind::OutOfBudget) << e.what();
        EXPECT_EQ(std::string(e.what()).find(") fits"), std::string::npos)
            << "at " << i << "/10 of the peak, refused naming a tile that fits: " << e.what();
      }
    }
    EXPECT_GT(tiled, 0) << "no budget of the sweep ran as tiles";
  }
}

// A refusal's figures add up to the peak it predicts, the streamed weight window included (it
// was left out of both the figures and the room a named tile was sized for: QSMnet's full-size
// twin with streamed weights named 112³ patches that its own plan then refused, 66 MB over).
TEST(SpillBudgetTiles, ARefusalsFiguresAddUpToItsPredictedPeakWithStreamedWeights) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& spec = require_model("qsmnet");
  const NetworkInputs in = inputs_for(spec);
  NetworkOptions o;
  o.model.threads = 2;
  o.model.mem_budget = 0;
  o.model.residency = parse_residency("stream:host=0");
  o.model.spill_activations = false;
  o.auto_tile = false;
  const NetworkRun whole = run_network(spec, twin_paths(dir, spec), in, o);
  o.model.mem_budget = memory_current() + whole.predicted_peak_bytes / 2;
  try {
    run_network(spec, twin_paths(dir, spec), in, o);
    FAIL() << "half the peak fit in memory";
  } catch (const Error& e) {
    const std::string m = e.what();
    const auto number_after = [&](const std::string& key) { return figure_after(m, key); };
    const std::int64_t peak = number_after("predicted peak ");
    const std::int64_t window = number_after(" + weight window ");
    ASSERT_GT(window, 0) << "no weight window named: " << m;
    std::int64_t sum = window;
    for (const char* part : {"already allocated ", " + model and plans ", " + one run ", " + wrapper buffers "}) {
      const std::int64_t v = number_after(part);
      ASSERT_GE(v, 0) << part << "missing: " << m;
      sum += v;
    }
    sum += std::max<std::int64_t>(0, number_after("the process outside the engine "));
    EXPECT_EQ(sum, peak) << m;
  }
}

// NeXtQSM's wrapper holds its FFT buffers only between its graph runs (each step's, released
// before the next run): in a budget they take the place of a run's spilled activations instead
// of room beside them. At 32³ (a 64³ frame) the FFT's 4.3 MB are more than the least spilled
// run, so the least whole-run budget the refusal names is below what the two side by side take;
// the run fits it by the accounting layer's own high-water (it would not, were the buffers held
// during a run) and is the unbudgeted χ bit for bit.
TEST(SpillBudgetTiles, AnUnrolledNetworksFftBuffersTakeTheRunsPlaceNotRoomBesideIt) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& spec = require_model("nextqsm");
  const NetworkInputs in = inputs_for(spec);
  NetworkOptions o;
  o.model.threads = 2;
  o.park_buffers = false;  // the activations' spill alone (parking: parking_test.cpp)
  o.model.mem_budget = 0;
  const NetworkRun whole = run_network(spec, twin_paths(dir, spec), in, o);
  const std::int64_t held = memory_current();
  o.model.mem_budget = held + whole.predicted_peak_bytes / 2;
  std::string m;
  try {
    run_network(spec, twin_paths(dir, spec), in, o);
    FAIL() << "half the peak fit";
  } catch (const Error& e) {
    m = e.what();
  }
  const auto number_after = [&](const std::string& key) { return figure_after(m, key); };
  const std::int64_t least_run = number_after("one run needs at least ");
  const std::int64_t least = least_named(m);
  ASSERT_GT(least_run, 0) << m;
  ASSERT_GT(least, 0) << m;
  const std::int64_t fft = networks::DipoleOp::fft_bytes({64, 64, 64});
  ASSERT_GT(fft, least_run) << "the case no longer shows the phases: " << m;
  std::int64_t side_by_side = least_run + fft;
  for (const char* part : {"already allocated ", " + model and plans ", " + wrapper buffers "})
    side_by_side += std::max<std::int64_t>(0, number_after(part));
  side_by_side += std::max<std::int64_t>(0, number_after("the process outside the engine "));
  EXPECT_LT(least, side_by_side) << m;

  o.model.mem_budget = least;
  const NetworkRun spilled = run_network(spec, twin_paths(dir, spec), in, o);
  EXPECT_LE(held + spilled.measured_peak_bytes, o.model.mem_budget) << "the accounted high-water passed the budget";
  ASSERT_EQ(spilled.outputs.size(), 1u);
  const Volume& a = spilled.outputs[0].volume;
  const Volume& b = whole.outputs[0].volume;
  ASSERT_EQ(a.voxels(), b.voxels());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.voxels()) * sizeof(double)), 0);
}

// A budget on the whole process leaves a share of it to what the process holds outside the
// engine's accounting; once the plans are built that is measured (resident set less what the
// engine accounts), and where it is more than the share, it is counted as it is: the refusal
// names the measured figure, and its figures still add up to the peak it predicts. (A share of
// 1 MiB here: this test process holds far more than that outside the engine.)
TEST(SpillBudgetTiles, WhatTheProcessHoldsOutsideTheEngineIsCountedAsMeasured) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  if (process_rss_bytes() < 0) GTEST_SKIP() << "no resident set to measure here";
#if defined(__SANITIZE_ADDRESS__) || defined(QSM_TESTS_UNDER_ASAN)
  GTEST_SKIP() << "under AddressSanitizer the outside share is not measured (its shadow memory is resident)";
#endif
  const ModelSpec& spec = require_model("xqsm");
  const NetworkInputs in = inputs_for(spec);
  NetworkOptions o;
  o.model.threads = 2;
  o.model.mem_budget = 0;
  o.auto_tile = false;
  const NetworkRun whole = run_network(spec, twin_paths(dir, spec), in, o);
  const std::int64_t share = std::int64_t{1} << 20;
  o.model.mem_budget_outside = share;
  o.model.mem_budget = memory_current() + whole.predicted_peak_bytes / 2;
  std::string m;
  try {
    run_network(spec, twin_paths(dir, spec), in, o);
    FAIL() << "half the peak fit";
  } catch (const Error& e) {
    ASSERT_EQ(e.kind(), ErrorKind::OutOfBudget) << e.what();
    m = e.what();
  }
  const auto number_after = [&](const std::string& key) { return figure_after(m, key); };
  const std::int64_t outside = number_after("the process outside the engine ");
  EXPECT_GT(outside, share) << m;
  std::int64_t sum = outside;
  for (const char* part : {"already allocated ", " + model and plans ", " + one run ", " + wrapper buffers "}) {
    const std::int64_t v = number_after(part);
    ASSERT_GE(v, 0) << part << "missing: " << m;
    sum += v;
  }
  EXPECT_EQ(sum, number_after("predicted peak ")) << m;
  // The budget named is still the one given: the measured excess came out of the engine's share.
  EXPECT_EQ(number_after("above the budget of "), o.model.mem_budget + share) << m;
}
