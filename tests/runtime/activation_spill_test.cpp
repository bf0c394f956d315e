// Activation residency (issue #16) on the engine: every reduced architecture twin, run under a
// cap that forces its activations to spill, gives outputs bitwise identical to the unbudgeted
// run, moves bytes through the spill file, and stays within the cap by the accounting layer's
// own high-water. The cap is the unbudgeted peak's half, then the least the planner says the
// network can run in; one below that is refused before anything is allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "../support/test_data.h"
#include "../support/twin_cases.h"
#include "onnx/onnx_writer.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/residency.h"
#include "runtime/model_budget.h"
#include "runtime/model_internals.h"
#include "runtime/plan.h"

namespace {

using nlohmann::json;

using Case = qsmtest::TwinCase;

std::vector<qsmcore::Shape> shapes_of(const Case& c) {
  std::vector<qsmcore::Shape> s;
  for (const auto& [name, shape] : c.inputs) s.push_back(shape);
  return s;
}

qsmcore::ModelOptions options() {
  qsmcore::ModelOptions o;
  o.threads = 2;
  o.mem_budget = 0;
  return o;
}

// Poolings, deconvolutions and strided convolutions run in depth slabs where activations are
// channels-last: wherever oneDNN's convolutions run channels-last on a jit kernel (AVX-512 and
// AVX2: kernels/onednn/common.h, activation_block). With blocked layouts (a CPU below AVX2)
// they keep their operands whole and set the least (xQSM's up-samplings), and the VJP's
// elementwise steps do not stream: tests of what finer slabs and streamed elementwise steps
// gain skip there. `kind`: part of the slab kernels' impl names.
bool has_depth_slab_steps(const qsmcore::Plan& p, const std::string& kind = "_slabs") {
  return std::any_of(p.steps().begin(), p.steps().end(),
                     [&](const qsmcore::Plan::Step& st) { return st.impl.find(kind) != std::string::npos; });
}

class ActivationSpill : public testing::TestWithParam<Case> {};

TEST_P(ActivationSpill, SpilledRunsAreBitwiseTheUnbudgetedRunWithinTheCap) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const Case& c = GetParam();
  const auto in = qsmtest::twin_inputs(c, 11);
  auto m = qsmcore::OnnxModel::load(dir + "/" + c.file, options());
  const auto ref = m.run(in);
  const qsmcore::PlanMemory full = m.plan_memory(shapes_of(c));
  const std::int64_t least = m.min_run_bytes(shapes_of(c));
  ASSERT_LE(least, full.run_peak_bytes());
  if (least == full.run_peak_bytes()) GTEST_SKIP() << c.file << ": no activation lives across a gap it could spill";
  const std::int64_t half = full.io_bytes + full.weight_window_bytes + full.arena_bytes / 2;
  std::uint64_t planned_written = 0, planned_read = 0;  // over the runs below (the first spilled nothing)
  for (const std::int64_t cap : {std::max(half, least), least}) {
    const qsmcore::PlanMemory pm = m.plan_memory(shapes_of(c), cap);
    EXPECT_LE(pm.run_peak_bytes(), cap);
    EXPECT_GT(pm.spill_read_bytes, 0);
    qsmcore::ModelBudget::limit_run_bytes(m, cap);
    const std::int64_t before = qsmcore::memory_current();
    qsmcore::reset_memory_peak();
    const auto out = m.run(in);
    const std::int64_t peak = qsmcore::memory_peak() - before;
    const std::string what = c.file + " within " + std::to_string(cap) + " bytes";
    qsmtest::expect_bitwise(out, ref, what);
    EXPECT_LE(peak, cap) << what << ": the accounted high-water passed the cap";
    const qsmcore::SpillReport rep = m.last_spill();
    EXPECT_EQ(rep.written, static_cast<std::uint64_t>(pm.spill_write_bytes)) << what;
    EXPECT_EQ(rep.read, static_cast<std::uint64_t>(pm.spill_read_bytes)) << what;
    EXPECT_GT(rep.read, 0u) << what;
    planned_written += static_cast<std::uint64_t>(pm.spill_write_bytes);
    planned_read += static_cast<std::uint64_t>(pm.spill_read_bytes);
  }
  // A wrapper running the graph many times (NeXtQSM's six VJPs) reports every run's transfers.
  const qsmcore::SpillReport since_load = qsmcore::ModelBudget::spill_since_load(m);
  EXPECT_EQ(since_load.written, planned_written);
  EXPECT_EQ(since_load.read, planned_read);
  // Below the least there is nothing to try: refused before the run allocates.
  qsmcore::ModelBudget::limit_run_bytes(
      m, least - std::min<std::int64_t>(64 * 1024, least / 2));  // LPCNN's least is 52 KiB
  const std::int64_t before = qsmcore::memory_current();
  qsmcore::reset_memory_peak();
  EXPECT_THROW(m.run(in), qsmcore::Error);
  EXPECT_EQ(qsmcore::memory_peak(), before) << "a refused run allocated";
}

INSTANTIATE_TEST_SUITE_P(Twins, ActivationSpill, testing::ValuesIn(qsmtest::twin_cases()), qsmtest::twin_case_name);

// A conv chain streams its own inputs (first layer, residual, up-sampling source) and output
// through the spill file, a slab at a time: the least arena goes below the bytes any chain step
// reads and writes, which no spilling between steps can, and a run there is the unbudgeted run,
// bit for bit. QSMnet's and IR2QSM's least were set by a chain (session 9: QSMnet's full-size
// least was its unbudgeted peak), then by the max pooling after it, which streams too; AutoQSM's
// chains read one input twice (as the first layer's input and a later layer's residual). xQSM's
// single convolutions are chains of one, and its up-samplings and poolings stream in slabs too.
class StreamedConvChain : public testing::TestWithParam<std::string> {};

TEST_P(StreamedConvChain, TheLeastGoesBelowAChainsOwnOperandsAndTheRunIsBitForBit) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const auto cases = qsmtest::twin_cases();
  const auto it = std::find_if(cases.begin(), cases.end(), [&](const Case& x) { return x.file == GetParam(); });
  ASSERT_NE(it, cases.end()) << GetParam() << " is not in the twins' manifest";
  // At the manifest's test shapes (16³) the chains' windows and scratch outweigh their operands;
  // at 64³ the operands set the least, as at full size.
  Case big = *it;
  for (auto& [name, shape] : big.inputs)
    for (std::size_t i = 2; i < shape.size(); ++i) shape[i] = 64;
  const Case* c = &big;
  const auto in = qsmtest::twin_inputs(*c, 11);
  auto m = qsmcore::OnnxModel::load(dir + "/" + c->file, options());
  const auto ref = m.run(in);
  const qsmcore::Plan& plan = qsmcore::plan_for(m, shapes_of(*c));
  std::size_t chain_operands = 0;
  for (const auto& st : plan.steps()) {
    if (st.op_type != "qsm.ConvChain") continue;
    std::set<int> arena;
    for (const auto& vs : {st.in, st.out})
      for (int v : vs)
        if (v >= 0 && plan.values()[static_cast<std::size_t>(v)].storage == qsmcore::Plan::Storage::Arena)
          arena.insert(v);
    std::size_t bytes = 0;
    for (int v : arena) bytes += plan.values()[static_cast<std::size_t>(v)].bytes;
    chain_operands = std::max(chain_operands, bytes);
  }
  ASSERT_GT(chain_operands, 0u) << c->file << " has no conv chain with operands in the arena";
  const std::size_t least = plan.min_arena_bytes();
  EXPECT_LT(least, chain_operands);
  const auto layout = plan.layout_within(least);
  ASSERT_TRUE(layout->fits);
  std::size_t streamed_chains = 0, streamed_pools = 0, streamed_avg_pools = 0, streamed_ups = 0, slab_ups = 0;
  for (const auto& st : plan.steps()) slab_ups += st.impl.find("deconv_sublattice_slabs") != std::string::npos ? 1 : 0;
  for (std::size_t s = 0; s < plan.steps().size(); ++s) {
    if (layout->streamed[s].empty()) continue;
    const std::string& op = plan.steps()[s].op_type;
    streamed_chains += op == "qsm.ConvChain" ? 1 : 0;
    streamed_pools += op == "MaxPool" || op == "AveragePool" ? 1 : 0;
    streamed_avg_pools += op == "AveragePool" ? 1 : 0;
    streamed_ups += op == "ConvTranspose" ? 1 : 0;
    static const std::set<std::string> kStreaming = {"qsm.ConvChain", "MaxPool", "AveragePool", "ConvTranspose",
                                                     "Conv",          "Relu",    "LeakyRelu",   "Add",
                                                     "Mul",           "Where",   "Greater"};
    EXPECT_TRUE(kStreaming.count(op)) << op << ": only conv chains, strided convs, pooling, up-sampling and "
                                      << "elementwise steps stream";
    for (const auto& op : layout->streamed[s])
      EXPECT_EQ((op.output ? layout->out_offset : layout->in_offset)[s][op.slot], qsmcore::ArenaLayout::npos)
          << "a streamed operand has no place in the arena at its step";
  }
  EXPECT_GT(streamed_chains, 0u);
  if (GetParam() == "qsmnet.onnx") {
    EXPECT_GT(streamed_pools, 0u) << "QSMnet's first pooling reads a full-resolution skip";
  }
  // xQSM's largest steps: its full-resolution up-samplings and octave average poolings (in
  // slabs where the CPU's convolutions are channels-last: AVX-512, AVX2) and single convolutions
  // (chains of one).
  if (GetParam() == "xqsm.onnx" && slab_ups > 0) {
    EXPECT_GT(streamed_ups, 0u) << "no up-sampling streams its output";
    EXPECT_GT(streamed_avg_pools, 0u) << "no average pooling streams its full-resolution input";
  }
  const std::int64_t cap = m.min_run_bytes(shapes_of(*c));
  qsmcore::ModelBudget::limit_run_bytes(m, cap);
  const std::int64_t before = qsmcore::memory_current();
  qsmcore::reset_memory_peak();
  const auto out = m.run(in);
  EXPECT_LE(qsmcore::memory_peak() - before, cap);
  qsmtest::expect_bitwise(out, ref, c->file + " streamed");
  const qsmcore::PlanMemory pm = m.plan_memory(shapes_of(*c), cap);
  const qsmcore::SpillReport rep = m.last_spill();
  EXPECT_EQ(rep.written, static_cast<std::uint64_t>(pm.spill_write_bytes));
  EXPECT_EQ(rep.read, static_cast<std::uint64_t>(pm.spill_read_bytes));
}

INSTANTIATE_TEST_SUITE_P(Twins, StreamedConvChain,
                         testing::Values("qsmnet.onnx", "ir2qsm.onnx", "autoqsm.onnx", "xqsm.onnx"),
                         [](const testing::TestParamInfo<std::string>& i) {
                           return i.param.substr(0, i.param.find('.'));
                         });

// A budget below what the default conv-chain slabs can run in takes finer slabs (windows of a
// 12th or a 24th of an intermediate, poolings and up-samplings in 16 or 32 depth slabs): the
// least falls, and the run there is the unbudgeted run, bit for bit, within the cap. The reduced
// xQSM twin at 96x64x64 has chains at every share.
TEST(FinerSlabs, ABudgetBelowTheDefaultSlabsLeastRunsOnFinerSlabsBitForBit) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const std::vector<qsmcore::Shape> shapes{{1, 1, 96, 64, 64}};
  const std::vector<qsmcore::Tensor> in = {qsmtest::random_tensor(shapes[0], 5)};
  auto m = qsmcore::OnnxModel::load(dir + "/xqsm.onnx", options());
  const auto ref = m.run(in);
  EXPECT_EQ(m.last_spill().chain_window_share, 6);
  const qsmcore::Plan& coarse = qsmcore::plan_for(m, shapes);
  if (!has_depth_slab_steps(coarse, "deconv_sublattice_slabs"))
    GTEST_SKIP() << "no up-sampling runs in depth slabs on this CPU";
  const qsmcore::PlanMemory& pm = coarse.memory();
  const std::int64_t coarse_least =
      static_cast<std::int64_t>(coarse.min_arena_bytes()) + pm.io_bytes + pm.weight_window_bytes;
  const std::int64_t least = m.min_run_bytes(shapes);
  EXPECT_LT(least, coarse_least) << "finer slabs did not lower the least";
  for (const std::int64_t share : {12, 24}) {
    const qsmcore::Plan& fine = qsmcore::plan_for(m, shapes, share);
    EXPECT_LT(fine.min_arena_bytes(), coarse.min_arena_bytes()) << "share " << share;
  }
  qsmcore::ModelBudget::limit_run_bytes(m, least);
  const std::int64_t before = qsmcore::memory_current();
  qsmcore::reset_memory_peak();
  const auto out = m.run(in);
  EXPECT_LE(qsmcore::memory_peak() - before, least);
  qsmtest::expect_bitwise(out, ref, "xqsm on finer slabs");
  EXPECT_GT(m.last_spill().chain_window_share, 6);
  EXPECT_GT(m.last_spill().read, 0u);
  // At the default slabs' least the run is the same bits, on whichever slabs (finer ones
  // streaming directly are preferred to the default ones through the page cache).
  qsmcore::ModelBudget::limit_run_bytes(m, coarse_least);
  qsmtest::expect_bitwise(m.run(in), ref, "xqsm at the default slabs' least");
  EXPECT_GE(m.last_spill().chain_window_share, 6);
  // Where the default slabs fit streaming directly, they serve, and a run there plans no finer
  // slabs: each plan's primitives hold generated code the accounting does not see (a spilled qsm
  // run's RSS passed its budget when it planned all three).
  const std::int64_t direct_least = static_cast<std::int64_t>(coarse.min_arena_bytes(qsmcore::Plan::Streams::Direct)) +
                                    pm.io_bytes + pm.weight_window_bytes;
  EXPECT_GT(direct_least, coarse_least) << "direct streaming holds no io blocks";
  auto fresh = qsmcore::OnnxModel::load(dir + "/xqsm.onnx", options());
  qsmcore::ModelBudget::limit_run_bytes(fresh, direct_least);
  EXPECT_EQ(fresh.min_run_bytes(shapes, direct_least), coarse_least);
  qsmtest::expect_bitwise(fresh.run(in), ref, "xqsm at the default slabs' direct least, fresh");
  EXPECT_EQ(fresh.last_spill().chain_window_share, 6);
  EXPECT_GT(fresh.last_spill().read, 0u);
  EXPECT_GT(fresh.last_spill().direct, 0u) << "the run streamed nothing directly";
  EXPECT_EQ(qsmcore::ModelInternals::cached_plans(fresh), 1u);
}

// The least a refusal names is a budget that runs: each share's plan is weighed as it will run
// (the plans tried before it dropped), with weights resident or streamed from the file.
TEST(FinerSlabs, TheLeastARefusalNamesIsABudgetThatRuns) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const std::vector<qsmcore::Shape> shapes{{1, 1, 96, 64, 64}};
  const std::vector<qsmcore::Tensor> in = {qsmtest::random_tensor(shapes[0], 5)};
  std::vector<qsmcore::Tensor> ref;
  {
    auto m = qsmcore::OnnxModel::load(dir + "/xqsm.onnx", options());
    ref = m.run(in);
    if (!has_depth_slab_steps(qsmcore::plan_for(m, shapes), "deconv_sublattice_slabs"))
      GTEST_SKIP() << "no up-sampling runs in depth slabs on this CPU";
  }
  for (const std::string residency : {"full", "stream:host=0"}) {
    SCOPED_TRACE(residency);
    auto opts = [&](std::int64_t budget) {
      qsmcore::ModelOptions o = options();
      o.residency = qsmcore::parse_residency(residency);
      o.mem_budget = budget;
      return o;
    };
    std::int64_t named = 0;
    {
      auto m = qsmcore::OnnxModel::load(dir + "/xqsm.onnx", opts(qsmcore::memory_current() + (1 << 20)));
      try {
        m.run(in);
        FAIL() << "1 MiB above what is held ran";
      } catch (const qsmcore::Error& e) {
        const std::string what = e.what();
        const auto at = what.find("it would need ");
        ASSERT_NE(at, std::string::npos) << what;
        named = std::stoll(what.substr(at + 14));
      }
    }
    auto m = qsmcore::OnnxModel::load(dir + "/xqsm.onnx", opts(named));
    qsmcore::reset_memory_peak();
    qsmtest::expect_bitwise(m.run(in), ref, "xqsm at the least a refusal named, " + residency);
    EXPECT_LE(qsmcore::memory_peak(), named);
    EXPECT_GT(m.last_spill().chain_window_share, 6);
  }
}

// A model under a residency policy keeps one plan at a time. A least or the default plan's
// figures asked for again are known, and a run on the shapes and within the room of the last
// takes the plan and layout chosen then: none builds a plan (NeXtQSM's wrapper runs its VJP six
// times, and each run rebuilt the three shares' plans). Nor does a run allocate a spill file
// again: the last one's is kept (freeing a file trims its blocks on a disk mounted `discard`,
// seconds per run). A run that does not spill frees it, as does release_spill_file. The runs are the unbudgeted run,
// bit for bit, and each moves bytes through the file.
TEST(SpillChoice, ARunInTheRoomOfTheLastBuildsNoPlanNorSpillFile) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const std::vector<qsmcore::Shape> shapes{{1, 1, 96, 64, 64}};
  const std::vector<qsmcore::Tensor> in = {qsmtest::random_tensor(shapes[0], 5)};
  std::vector<qsmcore::Tensor> ref;
  {
    auto full = qsmcore::OnnxModel::load(dir + "/xqsm.onnx", options());
    ref = full.run(in);
    if (!has_depth_slab_steps(qsmcore::plan_for(full, shapes), "deconv_sublattice_slabs"))
      GTEST_SKIP() << "no up-sampling runs in depth slabs on this CPU";
  }
  qsmcore::ModelOptions o = options();
  o.residency = qsmcore::parse_residency("stream:host=0");
  auto m = qsmcore::OnnxModel::load(dir + "/xqsm.onnx", o);
  const qsmcore::PlanMemory unbudgeted = m.plan_memory(shapes);
  const std::int64_t least = m.min_run_bytes(shapes);
  const std::size_t weighed = qsmcore::ModelInternals::plans_built(m);
  EXPECT_GE(weighed, 2u) << "the least weighed one share only";
  EXPECT_EQ(m.min_run_bytes(shapes), least);
  const qsmcore::PlanMemory again = m.plan_memory(shapes);
  EXPECT_EQ(qsmcore::ModelInternals::plans_built(m), weighed) << "a least or default figures asked again built plans";
  EXPECT_EQ(again.run_peak_bytes(), unbudgeted.run_peak_bytes());
  EXPECT_EQ(again.weight_window_bytes, unbudgeted.weight_window_bytes);
  qsmcore::ModelBudget::limit_run_bytes(m, least);
  qsmtest::expect_bitwise(m.run(in), ref, "xqsm at its least, streamed weights");
  EXPECT_GT(m.last_spill().chain_window_share, 6);
  EXPECT_EQ(qsmcore::ModelInternals::spill_files_made(m), 1u);
  EXPECT_GE(qsmcore::ModelInternals::kept_spill_file_bytes(m), m.last_spill().file_bytes);
  const std::size_t first = qsmcore::ModelInternals::plans_built(m);
  for (int run = 0; run < 2; ++run) {
    qsmtest::expect_bitwise(m.run(in), ref, "the same run again");
    EXPECT_GT(m.last_spill().written, 0u);
    EXPECT_EQ(qsmcore::ModelInternals::plans_built(m), first) << "a run in the room of the last built plans";
    EXPECT_EQ(qsmcore::ModelInternals::spill_files_made(m), 1u) << "a run in the room of the last made a spill file";
  }
  qsmcore::ModelBudget::limit_run_bytes(m, 0);
  qsmtest::expect_bitwise(m.run(in), ref, "unbudgeted, streamed weights");
  EXPECT_EQ(m.last_spill().written, 0u);
  EXPECT_EQ(qsmcore::ModelInternals::kept_spill_file_bytes(m), 0u) << "a run that did not spill kept the file";
  qsmcore::ModelBudget::limit_run_bytes(m, least);
  qsmtest::expect_bitwise(m.run(in), ref, "at its least again");
  EXPECT_EQ(qsmcore::ModelInternals::spill_files_made(m), 2u);
  qsmcore::ModelBudget::release_spill_file(m);  // what a network's wrapper does once its graphs have run
  EXPECT_EQ(qsmcore::ModelInternals::kept_spill_file_bytes(m), 0u);
  qsmtest::expect_bitwise(m.run(in), ref, "at its least after the file was freed");
  EXPECT_EQ(qsmcore::ModelInternals::spill_files_made(m), 3u);
  // The figures kept depend on the threads: set_threads forgets them.
  const std::size_t before = qsmcore::ModelInternals::plans_built(m);
  m.set_threads(1);
  (void)m.plan_memory(shapes);
  EXPECT_GT(qsmcore::ModelInternals::plans_built(m), before) << "figures of two threads served one";
}

// Between the least and the unbudgeted peak, a spilled run takes, of the layouts it weighs
// (each share up to the first where direct streaming fits, streaming directly and through the
// page cache), the one of least transfer cost: direct streaming where its io blocks cost
// little room, the page cache where that room sends more whole values to the file. The sweep
// must meet both, and the runs at each are the unbudgeted run, bit for bit, moving what was
// planned. Both kinds of budget are met on the reduced AutoQSM twin.
TEST(SpillChoice, ARunTakesTheLayoutOfLeastTransferCostItWeighs) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  auto m = qsmcore::OnnxModel::load(dir + "/autoqsm.onnx", options());
  std::vector<qsmcore::Shape> shapes;
  std::vector<qsmcore::Tensor> in;
  for (const auto& input : m.inputs()) {
    shapes.push_back(input.dims);
    in.push_back(qsmtest::random_tensor(shapes.back(), static_cast<unsigned>(5 + shapes.size())));
  }
  const auto ref = m.run(in);
  const std::int64_t full = m.plan_memory(shapes).run_peak_bytes(), least = m.min_run_bytes(shapes);
  std::optional<std::int64_t> lean_cap, direct_cap;  // a budget taking each, where direct streaming fits
  constexpr int kSteps = 48;
  for (int i = 0; i < kSteps; ++i) {
    const std::int64_t cap = least + (full - least) * i / kSteps;
    SCOPED_TRACE("cap " + std::to_string(cap));
    const qsmcore::PlanMemory chosen = m.plan_memory(shapes, cap);
    ASSERT_GT(chosen.spill_write_bytes, 0);
    const double cost = static_cast<double>(chosen.spill_write_bytes + chosen.spill_read_bytes) -
                        (1.0 - qsmcore::ArenaLayout::kDirectWeight) * static_cast<double>(chosen.spill_direct_bytes);
    double cheapest = std::numeric_limits<double>::infinity();
    bool direct_weighed = false;
    for (const std::int64_t share : {6, 12, 24}) {
      const qsmcore::Plan& p = qsmcore::plan_for(m, shapes, share);
      const qsmcore::PlanMemory& pm = p.memory();
      const auto limit = static_cast<std::size_t>(cap - pm.weight_window_bytes - pm.io_bytes);
      for (const auto streams : {qsmcore::Plan::Streams::Lean, qsmcore::Plan::Streams::Direct}) {
        const auto l = p.layout_within(limit, streams);
        if (!l->fits) continue;
        EXPECT_TRUE(l->spills());
        cheapest = std::min(cheapest, l->transfer_cost());
        direct_weighed = direct_weighed || streams == qsmcore::Plan::Streams::Direct;
      }
      if (direct_weighed) break;
    }
    EXPECT_EQ(cost, cheapest);
    if (direct_weighed) (chosen.spill_direct_bytes > 0 ? direct_cap : lean_cap) = cap;
  }
  // Where oneDNN's convolutions are not channels-last (below AVX2: blocked layouts, fewer
  // steps stream) the sweep may not meet both kinds; the choice above was still checked at each.
  if (!lean_cap || !direct_cap)
    GTEST_SKIP() << "this CPU's layouts gave no budget "
                 << (lean_cap ? "taking direct streaming"
                              : "where direct streaming fits but the page cache is cheaper");
  for (const std::int64_t cap : {*lean_cap, *direct_cap}) {
    qsmcore::ModelBudget::limit_run_bytes(m, cap);
    const std::int64_t before = qsmcore::memory_current();
    qsmcore::reset_memory_peak();
    qsmtest::expect_bitwise(m.run(in), ref, "xqsm at " + std::to_string(cap));
    EXPECT_LE(qsmcore::memory_peak() - before, cap);
    const qsmcore::PlanMemory planned = m.plan_memory(shapes, cap);
    const qsmcore::SpillReport rep = m.last_spill();
    EXPECT_EQ(rep.written, static_cast<std::uint64_t>(planned.spill_write_bytes));
    EXPECT_EQ(rep.read, static_cast<std::uint64_t>(planned.spill_read_bytes));
    if (cap == *lean_cap) {
      EXPECT_EQ(rep.direct, 0u);
    }
    EXPECT_LE(rep.direct, static_cast<std::uint64_t>(planned.spill_direct_bytes));
  }
}

}  // namespace

namespace {

// A model's unbudgeted figures at one shape, measured on a copy loaded and dropped here: what
// it holds resident, its plan, one run's peak and least, and the run's outputs.
struct Unbudgeted {
  std::vector<qsmcore::Tensor> outputs;
  std::int64_t full = 0, least = 0, plan_bytes = 0, resident = 0;
};
Unbudgeted unbudgeted(const std::string& path, const qsmcore::Shape& shape, const std::vector<qsmcore::Tensor>& in) {
  Unbudgeted u;
  const std::int64_t loaded = qsmcore::memory_current();
  auto m = qsmcore::OnnxModel::load(path, options());
  const std::int64_t before = qsmcore::memory_current();
  u.resident = before - loaded;
  u.full = m.plan_memory({shape}).run_peak_bytes();
  u.plan_bytes = qsmcore::memory_current() - before;
  u.least = m.min_run_bytes({shape});
  u.outputs = m.run(in);
  return u;
}

// The process budget (ModelOptions::mem_budget) spills the same way: between the least and
// the unbudgeted peak a run spills and fits; below the least the refusal names it; with
// spilling off the run is refused as before. The spill directory must exist.
TEST(ActivationSpillBudget, TheProcessBudgetSpillsRefusesBelowTheLeastAndNamesIt) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const std::string path = dir + "/xqsm.onnx";
  const qsmcore::Shape shape{1, 1, 16, 16, 16};
  const std::vector<qsmcore::Tensor> in = {qsmtest::random_tensor(shape, 3)};
  const Unbudgeted u = unbudgeted(path, shape, in);
  const std::vector<qsmcore::Tensor>& ref = u.outputs;
  const std::int64_t full = u.full, least = u.least, plan_bytes = u.plan_bytes, resident = u.resident;
  ASSERT_LT(least, full);
  auto load = [&](std::int64_t run_bytes, bool spill, const std::string& spill_dir = "") {
    qsmcore::ModelOptions o = options();
    o.spill_activations = spill;
    o.spill_dir = spill_dir;
    // What is held now, the model once loaded and its plan, plus the run's share.
    o.mem_budget = qsmcore::memory_current() + resident + plan_bytes + run_bytes;
    return qsmcore::OnnxModel::load(path, o);
  };
  {
    auto m = load((least + full) / 2, true);
    const std::int64_t budget = m.options().mem_budget;
    qsmcore::reset_memory_peak();
    const auto out = m.run(in);
    qsmtest::expect_bitwise(out, ref, "within the process budget");
    EXPECT_LE(qsmcore::memory_peak(), budget);
    EXPECT_GT(m.last_spill().read, 0u);
  }
  {
    auto m = load((least + full) / 2, false);
    try {
      m.run(in);
      FAIL() << "a run over the budget with spilling off was not refused";
    } catch (const qsmcore::Error& e) {
      EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
    }
  }
  {
    auto m = load(least / 2, true);
    try {
      m.run(in);
      FAIL() << "a run below its least was not refused";
    } catch (const qsmcore::Error& e) {
      EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
      EXPECT_NE(std::string(e.what()).find("with its activations spilled to disk it would need"), std::string::npos)
          << e.what();
    }
  }
  {
    auto m = load((least + full) / 2, true, "/nonexistent/spill-dir");
    try {
      m.run(in);
      FAIL() << "a missing spill directory was not reported";
    } catch (const qsmcore::Error& e) {
      EXPECT_EQ(e.kind(), qsmcore::ErrorKind::Io);
      EXPECT_NE(std::string(e.what()).find("/nonexistent/spill-dir"), std::string::npos) << e.what();
    }
  }
}

// A budget on the whole process (`qsm onnx run --mem-budget`) leaves a share to what the process
// holds outside the engine. Once the plan is built, what it holds beyond that share is measured
// and comes out of the engine's budget: a run that fits the engine's nominal share exactly runs in
// memory with no share given, and with a share smaller than what this process holds outside the
// engine (any process with oneDNN loaded holds more than 1 MiB) it no longer runs as if it fitted.
TEST(ActivationSpillBudget, WhatTheProcessHoldsOutsideTheEngineComesOutOfTheEnginesBudget) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  if (qsmcore::process_rss_bytes() < 0) GTEST_SKIP() << "no resident set to measure here";
#if defined(__SANITIZE_ADDRESS__) || defined(QSM_TESTS_UNDER_ASAN)
  GTEST_SKIP() << "under AddressSanitizer the outside share is not measured (its shadow memory is resident)";
#endif
  const std::string path = dir + "/xqsm.onnx";
  const qsmcore::Shape shape{1, 1, 16, 16, 16};
  const std::vector<qsmcore::Tensor> in = {qsmtest::random_tensor(shape, 3)};
  const Unbudgeted u = unbudgeted(path, shape, in);
  const std::vector<qsmcore::Tensor>& ref = u.outputs;
  const std::int64_t engine = qsmcore::memory_current() + u.resident + u.plan_bytes + u.full;
  {
    qsmcore::ModelOptions o = options();
    o.mem_budget = engine;
    auto m = qsmcore::OnnxModel::load(path, o);
    qsmtest::expect_bitwise(m.run(in), ref, "no share outside the engine");
    EXPECT_EQ(m.last_spill().read, 0u) << "the run did not fit as accounted";
    EXPECT_EQ(m.outside_share(), 0);
    EXPECT_EQ(m.engine_budget(), engine);
  }
  const std::int64_t share = std::int64_t{1} << 20;
  qsmcore::ModelOptions o = options();
  o.mem_budget = engine;
  o.mem_budget_outside = share;
  auto m = qsmcore::OnnxModel::load(path, o);
  qsmcore::reset_memory_peak();
  try {
    const auto out = m.run(in);
    qsmtest::expect_bitwise(out, ref, "the engine's budget less the measured excess");
    EXPECT_GT(m.last_spill().read, 0u) << "ran in memory as if the share outside the engine were what it holds";
    EXPECT_LE(qsmcore::memory_peak(), m.engine_budget());
  } catch (const qsmcore::Error& e) {
    ASSERT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget) << e.what();
    const std::string msg = e.what();
    const auto at = msg.find("the process outside the engine ");
    ASSERT_NE(at, std::string::npos) << msg;
    EXPECT_EQ(std::stoll(msg.substr(at + 31)), m.outside_share()) << msg;
  }
  EXPECT_GT(m.outside_share(), share);
  // The budget on the process is still the one given: the excess moved from the engine's share
  // (which keeps a byte: a budget of 0 would mean none).
  EXPECT_EQ(m.engine_budget(), std::max<std::int64_t>(engine + share - m.outside_share(), 1));
}

}  // namespace

namespace {

// Layer-major batches (OnnxModel::run_batch: tiles of a streamed run, `qsm onnx run --batch`)
// spill each set's arena into its own region of one file: both sets come back bit for bit.
TEST(ActivationSpillBatch, EachSetOfABatchSpillsIntoItsOwnRegion) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const qsmcore::Shape shape{1, 1, 16, 16, 16};
  auto m = qsmcore::OnnxModel::load(dir + "/xqsm.onnx", options());
  const std::vector<std::vector<qsmcore::Tensor>> batch = {{qsmtest::random_tensor(shape, 21)},
                                                           {qsmtest::random_tensor(shape, 22)}};
  const auto ref = m.run_batch(batch);
  const qsmcore::PlanMemory full = m.plan_memory({shape});
  const std::int64_t least = m.min_run_bytes({shape});
  const std::int64_t per_set = (least + full.run_peak_bytes()) / 2;
  const qsmcore::PlanMemory pm = m.plan_memory({shape}, per_set);
  ASSERT_GT(pm.spill_read_bytes, 0);
  qsmcore::ModelBudget::limit_run_bytes(m, 2 * per_set);
  const auto out = m.run_batch(batch);
  ASSERT_EQ(out.size(), 2u);
  qsmtest::expect_bitwise(out[0], ref[0], "batch set 0");
  qsmtest::expect_bitwise(out[1], ref[1], "batch set 1");
  const qsmcore::SpillReport rep = m.last_spill();
  EXPECT_EQ(rep.read, 2 * static_cast<std::uint64_t>(pm.spill_read_bytes));
  EXPECT_EQ(rep.file_bytes, 2 * static_cast<std::uint64_t>(pm.spill_file_bytes));
}

}  // namespace

// Elementwise steps stream too (kernels/element_chunks.h): NeXtQSM's VJP masks its gradient with
// Greater and Where on full-resolution tensors, each of which a budget below them could
// otherwise not hold. In the least layout every one of them that is large enough runs on chunks
// through the spill file, and the run there is the unbudgeted run, bit for bit. (Its Relus are
// post-ops of their convolutions: the comparisons read their outputs, graph/passes.)
TEST(StreamedElementwise, ReluGreaterAndWhereStreamAndTheRunIsBitForBit) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const auto cases = qsmtest::twin_cases();
  const auto it = std::find_if(cases.begin(), cases.end(), [](const Case& x) { return x.file == "nextqsm-vjp.onnx"; });
  ASSERT_NE(it, cases.end()) << "nextqsm-vjp.onnx is not in the twins' manifest";
  Case c = *it;  // at 64³ its full-resolution tensors are several chunks long
  for (auto& [name, shape] : c.inputs)
    for (std::size_t i = 2; i < shape.size(); ++i) shape[i] = 64;
  const auto in = qsmtest::twin_inputs(c, 5);
  auto m = qsmcore::OnnxModel::load(dir + "/" + c.file, options());
  const auto ref = m.run(in);
  const qsmcore::Plan& plan = qsmcore::plan_for(m, shapes_of(c));
  if (!has_depth_slab_steps(plan)) GTEST_SKIP() << "no step runs in depth slabs on this CPU";
  const auto layout = plan.layout_within(plan.min_arena_bytes());
  ASSERT_TRUE(layout->fits);
  std::map<std::string, int> streamed;
  for (std::size_t s = 0; s < plan.steps().size(); ++s) {
    if (layout->streamed[s].empty()) continue;
    streamed[plan.steps()[s].op_type] += 1;
    for (const auto& op : layout->streamed[s])
      EXPECT_EQ((op.output ? layout->out_offset : layout->in_offset)[s][op.slot], qsmcore::ArenaLayout::npos)
          << "a streamed operand has no place in the arena at its step";
  }
  for (const char* op : {"Greater", "Where"}) EXPECT_GT(streamed[op], 0) << "no " << op << " streams";
  // The Wheres between two convolutions are inside their chains, which read the masks a slab at
  // a time as their layers write (graph/passes/stream_conv_chains.cpp).
  int streamed_masks = 0;
  for (std::size_t s = 0; s < plan.steps().size(); ++s)
    for (const auto& op : layout->streamed[s])
      if (!op.output && plan.steps()[s].op_type == "qsm.ConvChain" &&
          plan.values()[static_cast<std::size_t>(plan.steps()[s].in[op.slot])].dtype == qsmcore::DType::Bool)
        ++streamed_masks;
  EXPECT_GT(streamed_masks, 0) << "no chain streams its mask";
  for (const auto& st : plan.steps()) EXPECT_NE(st.op_type, "Relu") << "a Relu did not fuse into its convolution";
  const std::int64_t cap = m.min_run_bytes(shapes_of(c));
  qsmcore::ModelBudget::limit_run_bytes(m, cap);
  const std::int64_t before = qsmcore::memory_current();
  qsmcore::reset_memory_peak();
  const auto out = m.run(in);
  EXPECT_LE(qsmcore::memory_peak() - before, cap);
  qsmtest::expect_bitwise(out, ref, "nextqsm-vjp streamed");
  const qsmcore::PlanMemory pm = m.plan_memory(shapes_of(c), cap);
  EXPECT_GT(m.last_spill().written, 0u);
  EXPECT_EQ(m.last_spill().written, static_cast<std::uint64_t>(pm.spill_write_bytes));
  EXPECT_EQ(m.last_spill().read, static_cast<std::uint64_t>(pm.spill_read_bytes));
}

// A Relu that has no convolution to fuse into (here on the model's input, then Abs) streams its
// chunks too, through oneDNN's eltwise kernel, bit for bit.
TEST(StreamedElementwise, AReluOfItsOwnStreams) {
  using namespace qsmtest::onnxw;
  GraphParts p;
  p.nodes.push_back(node("Relu", {"x"}, {"a"}, "relu"));
  p.nodes.push_back(node("Abs", {"a"}, {"y"}, "abs"));
  const qsmcore::Shape shape{1, 8, 64, 32, 32};
  p.inputs.push_back(value_info("x", 1, shape));
  p.outputs.push_back(value_info("y", 1, shape));
  auto m = qsmcore::OnnxModel::load(model(graph(p)).bytes, options(), "relu.onnx");
  const std::vector<qsmcore::Tensor> in{qsmtest::random_tensor(shape, 3)};
  const auto ref = m.run(in);
  const qsmcore::Plan& plan = qsmcore::plan_for(m, {shape});
  const auto layout = plan.least_layout();
  int relus = 0;
  for (std::size_t s = 0; s < plan.steps().size(); ++s)
    relus += plan.steps()[s].op_type == "Relu" && !layout->streamed[s].empty();
  EXPECT_EQ(relus, 1);
  const std::int64_t cap = m.min_run_bytes({shape});
  qsmcore::ModelBudget::limit_run_bytes(m, cap);
  qsmtest::expect_bitwise(m.run(in), ref, "relu streamed");
  EXPECT_GT(m.last_spill().written, 0u);
}
