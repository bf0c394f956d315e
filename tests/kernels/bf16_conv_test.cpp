// --precision bf16 (issue #50): convolutions on bf16 source and weights, f32 sums and output, on
// the oneDNN backend. The oracle is the reference backend in f32 (direct sums in f32) on the
// U-Net-like graph of tests/support/unet_like_graph.h, as standalone convs and inside depth-slab
// conv chains, and a strided conv on the depth-slab path. Each case asserts the error is within
// what bf16's rounding allows AND above what f32 arithmetic gives, and that the plan's steps say
// bf16, so a plan that silently stayed f32 fails. Also: the rounding against an exact oracle, the
// memory prediction, the pack cache's key, and the refusals. Skipped where the CPU has no bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/onednn/common.h"
#include "kernels/pack_cache.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/onnx_model.h"
#include "runtime/model_internals.h"
#include "runtime/plan.h"
#include "support/scoped_conv_algo.h"
#include "support/unet_like_graph.h"

using qsmcore::Backend;
using qsmcore::OnnxModel;
using qsmcore::Precision;
using qsmcore::Shape;
using qsmcore::Tensor;
using qsmtest::error_over_range;
using qsmtest::uniform_values;

namespace {

#define SKIP_WITHOUT_BF16() \
  if (!qsmcore::kernels::onednn_runs_bf16()) GTEST_SKIP() << "this CPU has no native bf16 convolutions"

using qsmtest::ScopedConvAlgo;

OnnxModel load(const qsmtest::onnxw::GraphParts& g, Backend b, Precision p, bool chains) {
  qsmcore::ModelOptions o;
  o.backend = b;
  o.precision = p;
  o.threads = 2;
  o.stream_conv_chains = chains;
  return OnnxModel::load(qsmtest::onnxw::model(qsmtest::onnxw::graph(g), 17).bytes, o, "bf16_case.onnx");
}

struct Steps {
  int bf16 = 0;     // convs (standalone, or chain layers) on bf16
  int f32 = 0;      // convs on f32 (direct or Winograd)
  std::string all;  // the steps' implementations, for the failure message
};

Steps count_steps(const qsmcore::Plan& plan) {
  Steps s;
  for (const auto& st : plan.steps()) {
    const std::string impl = st.kernel ? st.kernel->impl_name() : st.impl;
    s.all += st.op_type + " " + impl + "\n";
    if (st.op_type == "Conv") (impl.find("onednn[bf16]") != std::string::npos ? s.bf16 : s.f32)++;
    if (st.op_type == "qsm.ConvChain") {
      const auto open = impl.find(")["), close = impl.find(']', open);
      if (open == std::string::npos || close == std::string::npos) continue;
      for (std::size_t i = open + 2; i < close; ++i) (impl[i] == 'b' ? s.bf16 : s.f32)++;  // b, or w / d
    }
  }
  return s;
}

// The bound. bf16 keeps 8 significant bits: rounding x and w each costs a relative 2^-9 at most,
// a product x·w a relative 2^-8. Summed over a conv's K = 27·C terms (f32 accumulation adds
// ~1e-7), the error of one output is ≤ 2^-8 Σ|x·w|; with independent rounding errors it is
// ~2^-9 √(Σ (x·w)²), i.e. ~2^-9 ≈ 2e-3 of the output's own scale per layer (the weights keep
// activations at their scale). Seven conv layers in sequence add errors of that size (√7 ≈ 2.6
// as random walks, 7 if aligned): ≤ 7 · 2e-3 ≈ 1.4e-2 of the output's scale at the very worst,
// measured as max |Δ| over the range (which is several times the scale): 1e-2 · range bounds it.
// The floor: f32 arithmetic (direct or Winograd) stays within 1e-5 · range of the reference
// (winograd_plan_test.cpp), so an error above 1e-4 · range shows the rounding really happened.
constexpr double kBf16Bound = 1e-2, kBf16Floor = 1e-4;

double unet_bf16_error(bool chains, const Shape& shape, Steps& steps) {
  const auto g = qsmtest::unet_like_graph(shape, 7);
  const std::vector<Tensor> in{Tensor::from_vector(shape, uniform_values(qsmcore::numel(shape), 99))};
  OnnxModel ref = load(g, Backend::Reference, Precision::F32, chains);
  OnnxModel bf = load(g, Backend::OneDnn, Precision::Bf16, chains);
  const auto want = ref.run(in);
  const auto got = bf.run(in);
  EXPECT_EQ(want.at(0).shape(), got.at(0).shape());
  steps = count_steps(qsmcore::plan_for(bf, {shape}));
  const double err = error_over_range(got.at(0), want.at(0));
  std::printf("  bf16, chains %s: max|Δ|/range %.2e, %d convs on bf16, %d on f32\n", chains ? "on" : "off", err,
              steps.bf16, steps.f32);
  return err;
}

TEST(Bf16Conv, RoundsToNearestEvenAsAnExactOracle) {
  // The oracle: of the two bf16 values around x (x's top 16 bits, and the next one up in
  // magnitude), the nearer in double arithmetic, the even one on a tie.
  std::vector<float> xs = uniform_values(20000, 3, -1e3f, 1e3f);
  for (float v : {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, 3.4e38f, 1e-40f, -2.5f}) xs.push_back(v);
  std::vector<std::uint16_t> got(xs.size());
  qsmcore::kernels::onednn::round_to_bf16(xs.data(), got.data(), xs.size());
  const auto widen = [](std::uint32_t bits16) {
    const std::uint32_t u = bits16 << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return static_cast<double>(f);
  };
  for (std::size_t i = 0; i < xs.size(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &xs[i], sizeof u);
    const std::uint32_t lo = u >> 16, hi = lo + 1;
    // Past the largest finite bf16 the next value up is 2^128 in magnitude (an IEEE overflow
    // rounds to infinity from the midpoint to it on), whose bit pattern is infinity's.
    const double up = (hi & 0x7fffu) == 0x7f80u ? std::copysign(std::ldexp(1.0, 128), xs[i]) : widen(hi);
    const double dl = std::abs(widen(lo) - xs[i]), dh = std::abs(up - xs[i]);
    const std::uint32_t want = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
    ASSERT_EQ(got[i], want) << "x = " << xs[i];
  }
  const float nan = std::nanf("");
  std::uint16_t q = 0;
  qsmcore::kernels::onednn::round_to_bf16(&nan, &q, 1);
  EXPECT_TRUE(std::isnan(widen(q)));
}

TEST(Bf16Conv, StandaloneConvsMatchTheReferenceWithinBf16Rounding) {
  SKIP_WITHOUT_BF16();
  const ScopedConvAlgo forced("winograd");  // even where Winograd is asked, bf16 runs direct
  Steps s;
  const double err = unet_bf16_error(false, {1, 1, 12, 14, 18}, s);
  EXPECT_LE(err, kBf16Bound);
  EXPECT_GE(err, kBf16Floor) << "as close as f32: did bf16 run?";
  EXPECT_GE(s.bf16, 7) << s.all;  // every conv, 1→16 … 16→1
  EXPECT_EQ(s.f32, 0) << s.all;
}

TEST(Bf16Conv, ConvChainLayersMatchTheReferenceWithinBf16Rounding) {
  SKIP_WITHOUT_BF16();
  const ScopedConvAlgo forced("winograd");
  Steps s;
  // Deep enough in z that the chains run in several slabs: windows inside and at both faces.
  const double err = unet_bf16_error(true, {1, 1, 36, 10, 14}, s);
  EXPECT_LE(err, kBf16Bound);
  EXPECT_GE(err, kBf16Floor) << "as close as f32: did bf16 run?";
  EXPECT_GE(s.bf16, 6) << s.all;
  EXPECT_EQ(s.f32, 0) << s.all;
  EXPECT_NE(s.all.find("qsm.ConvChain"), std::string::npos) << s.all;
}

// A 3³ stride-2 conv (NeXtQSM's down-sampling) runs in depth slabs, each slab's input planes
// rounded into scratch: against the reference, one layer's bound (2^-8 of Σ|x·w|, here with
// K = 27·8 uniform terms: well inside 1e-2 of the range) and above the f32 floor.
TEST(Bf16Conv, StridedConvInDepthSlabsMatchesTheReference) {
  SKIP_WITHOUT_BF16();
  const Shape shape{1, 8, 40, 10, 12};
  qsmtest::onnxw::GraphParts p;
  using namespace qsmtest::onnxw;
  p.inputs.push_back(value_info("x", 1, shape));
  p.outputs.push_back(value_info("y", 1, {}));
  const float scale = 1.5f / std::sqrt(27.0f * 8.0f);
  p.initializers.push_back(float_tensor("w", {16, 8, 3, 3, 3}, uniform_values(16 * 8 * 27, 11, -scale, scale)));
  p.initializers.push_back(float_tensor("b", {16}, uniform_values(16, 12, -0.1f, 0.1f)));
  p.nodes.push_back(node("Conv", {"x", "w", "b"}, {"y"}, "down",
                         {attr_ints("pads", {1, 1, 1, 1, 1, 1}), attr_ints("strides", {2, 2, 2})}));
  const std::vector<Tensor> in{Tensor::from_vector(shape, uniform_values(qsmcore::numel(shape), 13))};
  OnnxModel ref = load(p, Backend::Reference, Precision::F32, true);
  OnnxModel bf = load(p, Backend::OneDnn, Precision::Bf16, true);
  const double err = error_over_range(bf.run(in).at(0), ref.run(in).at(0));
  const Steps s = count_steps(qsmcore::plan_for(bf, {shape}));
  std::printf("  strided bf16 conv: max|Δ|/range %.2e\n", err);
  EXPECT_LE(err, kBf16Bound);
  EXPECT_GE(err, kBf16Floor);
  EXPECT_EQ(s.bf16, 1) << s.all;
  EXPECT_NE(s.all.find("qsm:conv_depth_slabs+onednn[bf16]"), std::string::npos) << s.all;
}

// The bf16 staging of the convs' inputs and the bf16 weights are plan memory: a run's accounted
// peak above what the model holds stays within the prediction (as for f32 plans), and the
// packed weights are about half the f32 plan's (2 bytes a weight instead of 4; the biases and
// the ConvTranspose stay f32).
TEST(Bf16Conv, PredictedMemoryCoversTheRunAndWeightsHalve) {
  SKIP_WITHOUT_BF16();
  const ScopedConvAlgo direct("direct");  // the f32 plan's weights as oneDNN packs them
  const Shape shape{1, 1, 36, 10, 14};
  const std::vector<Tensor> in{Tensor::from_vector(shape, uniform_values(qsmcore::numel(shape), 5))};
  for (bool chains : {false, true}) {
    SCOPED_TRACE(chains ? "chains" : "standalone");
    OnnxModel f32 = load(qsmtest::unet_like_graph(shape, 3), Backend::OneDnn, Precision::F32, chains);
    OnnxModel m = load(qsmtest::unet_like_graph(shape, 3), Backend::OneDnn, Precision::Bf16, chains);
    const qsmcore::PlanMemory pm = m.plan_memory({shape});
    const qsmcore::PlanMemory pf = f32.plan_memory({shape});
    const std::int64_t base = qsmcore::memory_current();
    qsmcore::reset_memory_peak();
    (void)m.run(in);
    const std::int64_t measured = qsmcore::memory_peak() - base;
    std::printf("  bf16, chains %s: run peak %lld B, predicted %lld B; packed weights %lld B (f32 %lld B)\n",
                chains ? "on" : "off", static_cast<long long>(measured), static_cast<long long>(pm.run_peak_bytes()),
                static_cast<long long>(pm.packed_weight_bytes), static_cast<long long>(pf.packed_weight_bytes));
    EXPECT_LE(measured, pm.run_peak_bytes());
    EXPECT_LE(static_cast<double>(pm.run_peak_bytes()), 1.05 * static_cast<double>(measured) + (4 << 20));
    EXPECT_LT(static_cast<double>(pm.packed_weight_bytes), 0.6 * static_cast<double>(pf.packed_weight_bytes));
    EXPECT_GT(static_cast<double>(pm.packed_weight_bytes), 0.45 * static_cast<double>(pf.packed_weight_bytes));
  }
}

// The pack cache shares a packed weight between plans only for the same bytes in the same
// layout: the bf16 packing of a weight is not its f32 packing (the layout names the type).
TEST(Bf16Conv, PackCacheKeepsF32AndBf16PackingsApart) {
  using namespace qsmcore::kernels;
  using dnnl::memory;
  auto cache = make_pack_cache();
  const PackCacheScope scope(cache.get());
  std::vector<float> w = uniform_values(16 * 16 * 27, 21);
  const Tensor plain = Tensor::view(qsmcore::DType::F32, {16, 16, 3, 3, 3}, w.data());
  const memory::desc plain_md({16, 16, 3, 3, 3}, memory::data_type::f32, memory::format_tag::oidhw);
  const memory::desc bf16_md({16, 16, 3, 3, 3}, memory::data_type::bf16, memory::format_tag::oidhw);
  std::vector<std::shared_ptr<qsmcore::Buffer>> owned;
  std::int64_t bytes = 0;
  const memory a = onednn::pack_constant(plain, plain_md, plain_md, owned, bytes);
  const memory b = onednn::pack_constant(plain, plain_md, bf16_md, owned, bytes);
  const memory c = onednn::pack_constant(plain, plain_md, bf16_md, owned, bytes);
  EXPECT_NE(a.get_data_handle(), b.get_data_handle());
  EXPECT_EQ(b.get_data_handle(), c.get_data_handle());  // the same packing is shared
  EXPECT_EQ(b.get_desc().get_size() * 2, a.get_desc().get_size());
  // The bf16 copy holds the weights rounded: the first one's top 16 bits, give or take one.
  std::uint32_t u;
  std::memcpy(&u, w.data(), sizeof u);
  const auto first = *static_cast<const std::uint16_t*>(b.get_data_handle());
  EXPECT_LE(std::abs(static_cast<int>(first) - static_cast<int>(u >> 16)), 1);
}

TEST(Bf16Conv, RefusedWhereItCannotRun) {
  const auto g = qsmtest::unet_like_graph({1, 1, 8, 8, 8}, 1);
  try {
    (void)load(g, Backend::Reference, Precision::Bf16, true);
    ADD_FAILURE() << "bf16 on the reference backend was not refused";
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("onednn"), std::string::npos) << e.what();
  }
  if (!qsmcore::kernels::onednn_runs_bf16()) {  // this CPU: refused on oneDNN as well, naming why
    EXPECT_THROW((void)load(g, Backend::OneDnn, Precision::Bf16, true), qsmcore::Error);
  }
  EXPECT_EQ(qsmcore::precision_from_string("bf16"), Precision::Bf16);
  EXPECT_EQ(qsmcore::precision_from_string("f32"), Precision::F32);
  EXPECT_THROW(qsmcore::precision_from_string("fp16"), qsmcore::Error);
  EXPECT_EQ(qsmcore::ModelOptions{}.precision, Precision::F32);  // opt-in only
}

}  // namespace
