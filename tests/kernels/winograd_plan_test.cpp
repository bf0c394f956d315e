// The Winograd F(2³, 3³) conv inside plans (issue #50): a small U-Net-like graph (two levels,
// max-pool, ConvTranspose up-sampling, skip concat, a residual add, odd sizes) planned with
// QSM_CONV_ALGO=winograd on the oneDNN backend, as standalone convs (chains off) and inside
// depth-slab conv chains (default), against the reference backend (direct sums, the oracle of
// every kernel): max |Δ| within 1e-5 of the reference output's range, NaN/Inf fail. Each case
// checks in the plan that Winograd really ran (else the comparison would test oneDNN's direct
// conv). Also: the per-layer choice on given shapes against the measured table it was fitted
// to (bench/conv_winograd.sh), the override, and the plan's memory prediction with Winograd.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <random>
#include <string>

#include "kernels/winograd/choice.h"
#include "onnx/onnx_writer.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/onnx_model.h"
#include "runtime/model_budget.h"
#include "runtime/model_internals.h"
#include "runtime/plan.h"
#include "support/scoped_conv_algo.h"
#include "support/test_data.h"
#include "support/unet_like_graph.h"

using namespace qsmtest::onnxw;
using qsmcore::Backend;
using qsmcore::OnnxModel;
using qsmcore::Shape;
using qsmcore::Tensor;
namespace wg = qsmcore::kernels::winograd;

namespace {

using ScopedAlgo = qsmtest::ScopedConvAlgo;

// The U-Net-like graph (tests/support/unet_like_graph.h). In chains, its up-sampling and skip
// are the two parts of one layer (a split concat), which Winograd joins again; odd halves of h
// and w give tiles past the faces.
using qsmtest::error_over_range;
using qsmtest::unet_like_graph;
using qsmtest::uniform_values;

OnnxModel load(const GraphParts& g, Backend b, bool chains) {
  qsmcore::ModelOptions o;
  o.backend = b;
  o.threads = 2;
  o.stream_conv_chains = chains;
  return OnnxModel::load(model(graph(g), 17).bytes, o, "unet_like.onnx");
}

struct Steps {
  int winograd = 0;  // convs (standalone or chain layers) on Winograd
  int direct = 0;    // standalone Convs on oneDNN's direct conv
  int chains = 0;
};

Steps count_steps(const qsmcore::Plan& plan) {
  Steps s;
  for (const auto& st : plan.steps()) {
    const std::string impl = st.kernel ? st.kernel->impl_name() : st.impl;
    if (std::getenv("QSM_TEST_DUMP_PLAN")) std::printf("  %-16s %s\n", st.op_type.c_str(), impl.c_str());
    if (st.op_type == "Conv") (impl.find("winograd") != std::string::npos ? s.winograd : s.direct)++;
    if (st.op_type == "qsm.ConvChain") {
      ++s.chains;
      const auto open = impl.find(")["), close = impl.find(']', open);
      if (open != std::string::npos && close != std::string::npos)
        s.winograd += static_cast<int>(std::count(impl.begin() + open, impl.begin() + close, 'w'));
    }
  }
  return s;
}

/// The U-Net-like graph with QSM_CONV_ALGO=algo against the reference; the plan's steps.
Steps unet_parity(const char* algo, bool chains, const Shape& shape) {
  const ScopedAlgo scoped(algo);
  const GraphParts g = unet_like_graph(shape, 7);
  const std::vector<Tensor> in{Tensor::from_vector(shape, uniform_values(qsmcore::numel(shape), 99))};
  OnnxModel ref = load(g, Backend::Reference, chains);
  OnnxModel dnn = load(g, Backend::OneDnn, chains);
  const auto want = ref.run(in);
  const auto got = dnn.run(in);
  EXPECT_EQ(want.at(0).shape(), got.at(0).shape());
  const double err = error_over_range(got.at(0), want.at(0));
  std::printf("  %s, chains %s: max|Δ|/range %.2e\n", algo, chains ? "on" : "off", err);
  EXPECT_LE(err, 1e-5) << algo << (chains ? " in chains" : " standalone");
  return count_steps(qsmcore::plan_for(dnn, {shape}));
}

TEST(WinogradPlan, StandaloneConvsMatchTheReference) {
  const Steps s = unet_parity("winograd", false, {1, 1, 12, 14, 18});
  EXPECT_EQ(s.chains, 0);
  // Every 3×3×3 conv, 1 and 16 channels too (forced); the conv after the concat is two, one per
  // part of the concat, the second adding onto the first.
  EXPECT_GE(s.winograd, 6);
  EXPECT_EQ(s.direct, 0);
}

TEST(WinogradPlan, ConvChainLayersMatchTheReference) {
  // Deep enough in z that the chains run in several slabs: windows inside and at both faces.
  const Steps s = unet_parity("winograd", true, {1, 1, 36, 10, 14});
  EXPECT_GT(s.chains, 0);
  EXPECT_GE(s.winograd, 5);  // the conv after the concat: one layer of two parts, one Winograd conv
}

TEST(WinogradPlan, DirectOverrideKeepsEveryConvOnDirect) {
  const Steps a = unet_parity("direct", false, {1, 1, 12, 14, 18});
  EXPECT_EQ(a.winograd, 0);
  EXPECT_GE(a.direct, 6);
  const Steps b = unet_parity("direct", true, {1, 1, 36, 10, 14});
  EXPECT_EQ(b.winograd, 0);
}

// Three convs in one chain (16→32→32→16, the input added back before the last ReLU): the
// windows feed each other, interior windows have no depth pads, the residual is a Sum.
GraphParts three_layer_chain(const Shape& shape) {
  GraphParts p;
  p.inputs.push_back(value_info("x", 1, shape));
  p.outputs.push_back(value_info("y", 1, {}));
  unsigned seed = 40;
  auto conv = [&](const std::string& in, const std::string& out, std::int64_t c, std::int64_t m) {
    const float scale = 1.5f / std::sqrt(27.0f * static_cast<float>(c));
    p.initializers.push_back(
        float_tensor(out + "_w", {m, c, 3, 3, 3}, uniform_values(m * c * 27, seed++, -scale, scale)));
    p.initializers.push_back(float_tensor(out + "_b", {m}, uniform_values(m, seed++, -0.1f, 0.1f)));
    p.nodes.push_back(
        node("Conv", {in, out + "_w", out + "_b"}, {out}, out + "_conv", {attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
  };
  conv("x", "a", 16, 32);
  p.nodes.push_back(node("Relu", {"a"}, {"ar"}, "ar"));
  conv("ar", "b", 32, 32);
  p.nodes.push_back(node("Relu", {"b"}, {"br"}, "br"));
  conv("br", "c", 32, 16);
  p.nodes.push_back(node("Add", {"c", "x"}, {"s"}, "res"));
  p.nodes.push_back(node("Relu", {"s"}, {"y"}, "yr"));
  return p;
}

TEST(WinogradPlan, ThreeLayerChainMatchesTheReference) {
  const ScopedAlgo scoped("winograd");
  const Shape shape{1, 16, 40, 9, 7};
  const GraphParts p = three_layer_chain(shape);
  const std::vector<Tensor> in{Tensor::from_vector(shape, uniform_values(qsmcore::numel(shape), 41))};
  OnnxModel ref = load(p, Backend::Reference, true);
  OnnxModel dnn = load(p, Backend::OneDnn, true);
  const double err = error_over_range(dnn.run(in).at(0), ref.run(in).at(0));
  std::printf("  three-layer chain on Winograd: max|Δ|/range %.2e\n", err);
  EXPECT_LE(err, 1e-5);
  int longest = 0;
  for (const auto& st : qsmcore::plan_for(dnn, {shape}).steps()) {
    const std::string impl = st.kernel ? st.kernel->impl_name() : st.impl;
    if (std::getenv("QSM_TEST_DUMP_PLAN")) std::printf("  %-16s %s\n", st.op_type.c_str(), impl.c_str());
    if (impl.find("[www]") != std::string::npos) longest = 3;
  }
  EXPECT_EQ(longest, 3) << "no chain of three Winograd layers in the plan";
}

// A budget below the default slabs' least runs the chain on finer slabs (1-plane ones for the
// first layer at the finest share): Winograd's layers still start and end their slabs on even
// planes (conv_chain_schedule.h), so each 2×2×2 tile reads the same planes as in the unbudgeted
// run and the output is the same bits. Without even slabs the streamed run differed.
TEST(WinogradPlan, FinerSlabsUnderABudgetGiveTheSameBits) {
  const ScopedAlgo scoped("winograd");
  const Shape shape{1, 16, 96, 12, 10};
  const std::vector<Tensor> in{Tensor::from_vector(shape, uniform_values(qsmcore::numel(shape), 43))};
  qsmcore::ModelOptions o;
  o.threads = 2;
  o.mem_budget = 0;
  OnnxModel m = OnnxModel::load(model(graph(three_layer_chain(shape)), 17).bytes, o, "chain.onnx");
  const auto ref = m.run(in);
  EXPECT_EQ(m.last_spill().chain_window_share, 6);
  EXPECT_GT(count_steps(qsmcore::plan_for(m, {shape})).winograd, 0);
  const std::int64_t least = m.min_run_bytes({shape});
  qsmcore::ModelBudget::limit_run_bytes(m, least);
  const auto out = m.run(in);
  EXPECT_GT(m.last_spill().chain_window_share, 6) << "the budget did not take finer slabs";
  qsmtest::expect_bitwise(out, ref, "a Winograd chain on finer slabs");
}

bool avx512() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto want = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & want) == want;
}

// The oracle: the layers measured with bench/conv_winograd.sh on this project's AVX-512 machine
// (choice.cpp's table, best of 3 alternating runs): 64→64 at 64³ Winograd/direct 0.44–0.62,
// 32→32 at 128³ 0.68–0.69, 128→128 at 32³ 0.50; 4→4 3.7–4.0, 1→32 4.8, 16→16 at 64³
// 0.92–1.06. 256→256 (0.625 at 16³) and 512→512 stay direct by the channel cap (choice.h).
TEST(WinogradChoice, TakesWinogradWhereMeasuredFasterOnly) {
  using wg::ConvAlgo;
  using wg::ConvAlgoMode;
  if (!avx512()) GTEST_SKIP() << "the table was measured at AVX-512; below it auto keeps direct";
  EXPECT_EQ(wg::choose_conv_algo(64, 64, ConvAlgoMode::Auto), ConvAlgo::Winograd);
  EXPECT_EQ(wg::choose_conv_algo(32, 32, ConvAlgoMode::Auto), ConvAlgo::Winograd);
  EXPECT_EQ(wg::choose_conv_algo(128, 128, ConvAlgoMode::Auto), ConvAlgo::Winograd);
  EXPECT_EQ(wg::choose_conv_algo(4, 4, ConvAlgoMode::Auto), ConvAlgo::Direct);
  EXPECT_EQ(wg::choose_conv_algo(1, 32, ConvAlgoMode::Auto), ConvAlgo::Direct);
  EXPECT_EQ(wg::choose_conv_algo(16, 16, ConvAlgoMode::Auto), ConvAlgo::Direct);
  EXPECT_EQ(wg::choose_conv_algo(256, 256, ConvAlgoMode::Auto), ConvAlgo::Direct);
  EXPECT_EQ(wg::choose_conv_algo(512, 512, ConvAlgoMode::Auto), ConvAlgo::Direct);
  // Between measured shapes, the nearest: 48→48 (between 32→32 and 64→64).
  EXPECT_EQ(wg::choose_conv_algo(48, 48, ConvAlgoMode::Auto), ConvAlgo::Winograd);
}

// Why the choice ignores the volume (choice.h): a plan's packed weights, Winograd's included,
// are the same at every volume, so the registry's fixed + per-voxel line, fitted at 32³–64³,
// holds at 128³ and above. The U-Net-like graph has layers auto takes (16→32, 32→32, 32→16) and
// leaves (1→16, 16→16), standalone and in chains (at the registry's sizes, where chains form: at 16³
// the concat's conv stays two direct 16→16 parts, fewer weights, on the line's safe side).
TEST(WinogradChoice, AutoPacksTheSameWeightsAtEveryVolume) {
  if (!avx512()) GTEST_SKIP() << "below AVX-512 auto keeps direct";
  for (bool chains : {false, true}) {
    SCOPED_TRACE(chains ? "chains" : "standalone");
    std::int64_t direct = 0;
    {
      const ScopedAlgo scoped("direct");
      direct = load(unet_like_graph({1, 1, 8, 8, 8}, 3), Backend::OneDnn, chains)
                   .plan_memory({{1, 1, 8, 8, 8}})
                   .packed_weight_bytes;
    }
    const ScopedAlgo scoped("auto");
    std::vector<std::int64_t> packed;
    for (std::int64_t side : {32, 64, 128}) {
      const qsmcore::Shape shape{1, 1, side, side, side};
      OnnxModel m = load(unet_like_graph(shape, 3), Backend::OneDnn, chains);
      packed.push_back(m.plan_memory({shape}).packed_weight_bytes);
      EXPECT_GT(count_steps(qsmcore::plan_for(m, {shape})).winograd, 0) << side << "³";
    }
    EXPECT_GT(packed[0], direct) << "auto took no Winograd layer";
    EXPECT_EQ(packed[1], packed[0]);
    EXPECT_EQ(packed[2], packed[0]);
  }
}

TEST(WinogradChoice, OverrideAndItsErrors) {
  using wg::ConvAlgo;
  using wg::ConvAlgoMode;
  EXPECT_EQ(wg::choose_conv_algo(1, 1, ConvAlgoMode::Winograd), ConvAlgo::Winograd);
  EXPECT_EQ(wg::choose_conv_algo(64, 64, ConvAlgoMode::Direct), ConvAlgo::Direct);
  {
    const ScopedAlgo a("winograd");
    EXPECT_EQ(wg::conv_algo_mode(), ConvAlgoMode::Winograd);
  }
  {
    const ScopedAlgo a("auto");
    EXPECT_EQ(wg::conv_algo_mode(), ConvAlgoMode::Auto);
  }
  {
    const ScopedAlgo a("");  // unset: direct until auto's last gaps are closed (choice.h)
    EXPECT_EQ(wg::conv_algo_mode(), ConvAlgoMode::Direct);
  }
  {
    const ScopedAlgo a("direct");
    EXPECT_EQ(wg::conv_algo_mode(), ConvAlgoMode::Direct);
  }
  const ScopedAlgo bad("fastest");
  EXPECT_THROW(wg::conv_algo_mode(), qsmcore::Error);
}

// Winograd's transformed weights and per-thread scratch go through the plan: a run's accounted
// peak above what the model holds stays within the plan's prediction, as for direct plans.
TEST(WinogradPlan, PredictedMemoryCoversTheRun) {
  const Shape shape{1, 1, 36, 10, 14};
  const std::vector<Tensor> in{Tensor::from_vector(shape, uniform_values(qsmcore::numel(shape), 5))};
  for (const char* algo : {"direct", "winograd"})
    for (bool chains : {false, true}) {
      SCOPED_TRACE(std::string(algo) + (chains ? " chains" : " standalone"));
      const ScopedAlgo scoped(algo);
      OnnxModel m = load(unet_like_graph(shape, 3), Backend::OneDnn, chains);
      const qsmcore::PlanMemory pm = m.plan_memory({shape});
      const std::int64_t base = qsmcore::memory_current();
      qsmcore::reset_memory_peak();
      (void)m.run(in);
      const std::int64_t measured = qsmcore::memory_peak() - base;
      std::printf("  %s, chains %s: run peak %lld B, predicted %lld B\n", algo, chains ? "on" : "off",
                  static_cast<long long>(measured), static_cast<long long>(pm.run_peak_bytes()));
      EXPECT_LE(measured, pm.run_peak_bytes());
      EXPECT_LE(static_cast<double>(pm.run_peak_bytes()), 1.05 * static_cast<double>(measured) + (4 << 20));
      if (std::string(algo) == "winograd") {
        EXPECT_GT(count_steps(qsmcore::plan_for(m, {shape})).winograd, 0);
      }
    }
}

}  // namespace
