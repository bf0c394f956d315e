// The plan cache: bounded by ModelOptions::max_cached_plans (least recently used dropped
// first), and under FullyResident the plans of all shapes share one packed copy of each weight
// (a tiled run has interior and edge tiles of different shapes; each used to pack every weight
// again). Checked by the accounting's Weights category and against the outputs of fresh models.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "../support/scoped_conv_algo.h"
#include "onnx/onnx_writer.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/onnx_model.h"
#include "runtime/model_internals.h"

namespace {

using namespace qsmtest::onnxw;
using qsmcore::MemCategory;
using qsmcore::OnnxModel;
using qsmcore::Shape;
using qsmcore::Tensor;

// Three 3×3×3 convolutions of C channels: 3 × C² × 108 bytes of weights a plan packs.
std::vector<std::uint8_t> conv_net(std::int64_t c = 16) {
  GraphParts g;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::string x = "x";
  for (int l = 0; l < 3; ++l) {
    const std::string n = std::to_string(l);
    std::vector<float> w(static_cast<std::size_t>(c * c * 27));
    for (float& v : w) v = nd(rng);
    g.initializers.push_back(float_tensor("w" + n, {c, c, 3, 3, 3}, w));
    g.nodes.push_back(node("Conv", {x, "w" + n}, {"y" + n}, "c" + n, {attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
    x = "y" + n;
  }
  g.inputs.push_back(value_info("x", 1, {1, c, -1, -1, -1}));
  g.outputs.push_back(value_info(x, 1, {}));
  return model(graph(g)).bytes;
}

OnnxModel load(const std::vector<std::uint8_t>& bytes, int max_plans = 4) {
  qsmcore::ModelOptions o;
  o.threads = 2;
  o.mem_budget = 0;
  o.max_cached_plans = max_plans;
  return OnnxModel::load(bytes, o, "conv_net.onnx");
}

Tensor input(const Shape& s) {
  Tensor t = Tensor::empty(qsmcore::DType::F32, s);
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : t.span<float>()) v = nd(rng);
  return t;
}

std::int64_t weights_now() {
  return qsmcore::memory_counters().current[static_cast<int>(MemCategory::Weights)];
}

/// Two plans of one model share one packed copy; `packed`: what each plan counts.
void plans_of_two_shapes_share_weights(std::int64_t& packed) {
  const auto bytes = conv_net();
  OnnxModel m = load(bytes);
  const std::int64_t before = weights_now();
  const auto& a = qsmcore::plan_for(m, {{1, 16, 8, 8, 8}});
  const std::int64_t after_one = weights_now();
  const auto& b = qsmcore::plan_for(m, {{1, 16, 12, 10, 8}});
  const std::int64_t after_two = weights_now();
  packed = a.memory().packed_weight_bytes;
  ASSERT_GT(a.memory().packed_weight_bytes, 0) << "the plan packed no weights: nothing to share";
  // Each plan still counts what it holds; the process holds it once.
  EXPECT_EQ(b.memory().packed_weight_bytes, a.memory().packed_weight_bytes);
  EXPECT_EQ(after_two - after_one, 0) << "the second plan packed its own copy (first: " << after_one - before << ")";
  // Sharing changes nothing in what the plans compute: each output equals a fresh model's.
  for (const Shape& s : {Shape{1, 16, 8, 8, 8}, Shape{1, 16, 12, 10, 8}}) {
    OnnxModel fresh = load(bytes);
    const Tensor x = input(s);
    const Tensor got = m.run(std::vector<Tensor>{x}).front(), want = fresh.run(std::vector<Tensor>{x}).front();
    ASSERT_EQ(got.shape(), want.shape());
    const float* g = got.data<float>();
    const float* w = want.data<float>();
    for (std::int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(g[i], w[i]) << "element " << i;
  }
}

// Both algorithms' weights go through the pack cache: oneDNN's direct ones and the native
// Winograd's transformed ones (kernels/winograd: 64/27 of the bytes, derived before packing).
constexpr const char* kAlgos[] = {"direct", "winograd"};

TEST(PlanCache, PlansOfTwoShapesShareOnePackedCopyOfTheWeights) {
  std::int64_t direct_packed = 0;
  for (const char* algo : kAlgos) {
    SCOPED_TRACE(algo);
    const qsmtest::ScopedConvAlgo scoped(algo);
    std::int64_t packed = 0;
    plans_of_two_shapes_share_weights(packed);
    if (std::string(algo) == "direct")
      direct_packed = packed;
    else
      EXPECT_GT(packed, 2 * direct_packed) << "no Winograd weights packed";
  }
}

TEST(PlanCache, TheCacheKeepsTheMostRecentlyUsedPlansOnly) {
  OnnxModel m = load(conv_net(), 2);
  const std::int64_t before = weights_now();
  qsmcore::plan_for(m, {{1, 16, 8, 8, 8}});
  const std::int64_t one_copy = weights_now() - before;
  qsmcore::plan_for(m, {{1, 16, 9, 8, 8}});
  qsmcore::plan_for(m, {{1, 16, 8, 8, 8}});   // used again: now the most recent
  qsmcore::plan_for(m, {{1, 16, 10, 8, 8}});  // drops 9×8×8, the least recently used
  EXPECT_EQ(qsmcore::ModelInternals::cached_plans(m), 2u);
  EXPECT_EQ(weights_now() - before, one_copy);
  m.clear_plans();
  EXPECT_EQ(qsmcore::ModelInternals::cached_plans(m), 0u);
  EXPECT_EQ(weights_now(), before) << "packed weights outlived every plan that used them";
}

// A run whose new plan would pack more weights than the budget leaves is refused before a
// weight is packed: the model loaded from a file keeps its weights there until a plan needs
// them, and the refusal comes from a dry plan that only counts them. The run's peak stays
// below one layer's weights (the dry plan reads each once, to fold and size it).
void refused_before_packing() {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("qsm-plan-cache-" + std::to_string(::getpid()) + ".onnx")).string();
  write_file(path, conv_net(96));  // 3 × 0.95 MiB of weights
  qsmcore::ModelOptions o;
  o.threads = 2;
  o.mem_budget = 0;
  const Shape shape{1, 96, 6, 6, 6};
  std::int64_t packed = 0, run = 0;
  {
    OnnxModel probe = OnnxModel::load(path, o);
    const auto pm = probe.plan_memory({shape});
    packed = pm.packed_weight_bytes;
    run = pm.run_peak_bytes();
  }
  ASSERT_GT(packed, 2 << 20);
  o.mem_budget = qsmcore::memory_current() + run + packed / 2;  // the run fits; its weights do not
  OnnxModel m = OnnxModel::load(path, o);
  const Tensor x = input(shape);
  qsmcore::reset_memory_peak();
  const auto before = qsmcore::memory_counters();
  try {
    m.run(std::vector<Tensor>{x});
    FAIL() << "a run whose weights exceed the budget must be refused";
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
    EXPECT_NE(std::string(e.what()).find("above the budget"), std::string::npos) << e.what();
  }
  const auto after = qsmcore::memory_counters();
  const int w = static_cast<int>(MemCategory::Weights);
  EXPECT_LT(after.peak[w] - before.current[w], packed / 2) << "weights were packed before the refusal";
  EXPECT_EQ(after.current[w], before.current[w]);
  EXPECT_EQ(qsmcore::ModelInternals::cached_plans(m), 0u);
  std::filesystem::remove(path);
}

TEST(PlanCache, ARunThatCannotPackItsWeightsIsRefusedBeforePacking) {
  for (const char* algo : kAlgos) {
    SCOPED_TRACE(algo);
    const qsmtest::ScopedConvAlgo scoped(algo);
    refused_before_packing();
  }
}

}  // namespace
