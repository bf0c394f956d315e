// Plans built from small in-memory models: memory figures known before running, in-place
// reuse, budget refusal with nothing allocated, plan caching, and clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include "onnx/onnx_writer.h"
#include "qsmcore/error.h"
#include "qsmcore/onnx_model.h"
#include "runtime/model_internals.h"
#include "runtime/plan.h"

using namespace qsmtest::onnxw;
using qsmcore::Backend;
using qsmcore::DType;
using qsmcore::OnnxModel;
using qsmcore::Tensor;

namespace {

OnnxModel load(const Proto& m, Backend b = Backend::Reference, std::int64_t budget = 0) {
  qsmcore::ModelOptions o;
  o.backend = b;
  o.threads = 1;
  o.mem_budget = budget;
  return OnnxModel::load(m.bytes, o, "test.onnx");
}

Tensor ramp(const qsmcore::Shape& s) {
  Tensor t = Tensor::empty(DType::F32, s);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::sin(0.37f * static_cast<float>(i));
  return t;
}

// x -> Relu -> Sigmoid -> Tanh -> y on [1, 4, 8, 8, 8].
Proto eltwise_chain() {
  GraphParts p;
  p.nodes.push_back(node("Relu", {"x"}, {"a"}, "relu"));
  p.nodes.push_back(node("Sigmoid", {"a"}, {"b"}, "sig"));
  p.nodes.push_back(node("Tanh", {"b"}, {"y"}, "tanh"));
  p.inputs.push_back(value_info("x", 1, {1, 4, -1, -1, -1}));
  p.outputs.push_back(value_info("y", 1, {1, 4, -1, -1, -1}));
  return model(graph(p));
}

}  // namespace

TEST(Plan, ElementwiseChainRunsInPlaceInOneBuffer) {
  OnnxModel m = load(eltwise_chain());
  const auto pm = m.plan_memory({{1, 4, 8, 8, 8}});
  // Relu writes a new buffer (the caller's input is never overwritten); Sigmoid reuses it;
  // Tanh writes the caller's output tensor.
  EXPECT_EQ(pm.arena_bytes, 4 * 8 * 8 * 8 * 4);
  EXPECT_EQ(pm.io_bytes, 4 * 8 * 8 * 8 * 4);
  Tensor x = ramp({1, 4, 8, 8, 8});
  auto y = m.run(std::vector<Tensor>{x});
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.data<float>()[i];
    ASSERT_NEAR(y[0].data<float>()[i], std::tanh(1.0f / (1.0f + std::exp(-std::max(v, 0.0f)))), 1e-6f);
  }
}

TEST(Plan, RunAllocatesExactlyThePlannedArena) {
  OnnxModel m = load(eltwise_chain());
  Tensor x = ramp({1, 4, 16, 8, 8});
  const auto pm = m.plan_memory({x.shape()});
  qsmcore::reset_memory_peak();
  const auto before = qsmcore::memory_counters();
  m.run(std::vector<Tensor>{x});
  const auto after = qsmcore::memory_counters();
  const int arena = static_cast<int>(qsmcore::MemCategory::Arena);
  const int io = static_cast<int>(qsmcore::MemCategory::IO);
  EXPECT_EQ(after.peak[arena] - before.current[arena], pm.arena_bytes);
  EXPECT_EQ(after.peak[io] - before.current[io], pm.io_bytes);
  EXPECT_EQ(after.current[arena], before.current[arena]) << "the arena is released after the run";
}

TEST(Plan, BudgetRefusalAllocatesNothing) {
  OnnxModel m = load(eltwise_chain(), Backend::Reference, /*budget=*/1024);
  Tensor x = ramp({1, 4, 8, 8, 8});
  m.plan_memory({x.shape()});  // planning itself is allowed; the run is refused
  qsmcore::reset_memory_peak();
  const auto before = qsmcore::memory_counters();
  try {
    m.run(std::vector<Tensor>{x});
    FAIL() << "a run above the budget must be refused";
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
    EXPECT_NE(std::string(e.what()).find("above the budget of 1024 bytes"), std::string::npos) << e.what();
  }
  const auto after = qsmcore::memory_counters();
  EXPECT_EQ(after.total_peak, before.total_current) << "not one byte allocated before refusing";
}

TEST(Plan, PlansAreCachedByShape) {
  OnnxModel m = load(eltwise_chain());
  const qsmcore::Plan* a = &qsmcore::plan_for(m, {{1, 4, 8, 8, 8}});
  const qsmcore::Plan* b = &qsmcore::plan_for(m, {{1, 4, 8, 8, 8}});
  const qsmcore::Plan* c = &qsmcore::plan_for(m, {{1, 4, 8, 8, 16}});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Plan, WrongInputsAreNamed) {
  OnnxModel m = load(eltwise_chain());
  try {
    m.run(std::vector<Tensor>{ramp({1, 3, 8, 8, 8})});
    FAIL();
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::InvalidInput);
    EXPECT_NE(std::string(e.what()).find("test.onnx: input 'x': shape [1,3,8,8,8] does not match the model's [1,4,d2,d3,d4]"),
              std::string::npos) << e.what();
  }
  try {
    m.run(std::vector<Tensor>{ramp({1, 4, 8, 8, 8}), ramp({1, 4, 8, 8, 8})});
    FAIL();
  } catch (const qsmcore::Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes 1 input(s), 2 given"), std::string::npos) << e.what();
  }
}

TEST(Plan, AllUnknownOperatorsAreListedInOneError) {
  GraphParts p;
  p.nodes.push_back(node("FancyOp", {"x"}, {"a"}, "first"));
  p.nodes.push_back(node("OtherOp", {"a"}, {"y"}, "second"));
  p.inputs.push_back(value_info("x", 1, {1, 4}));
  p.outputs.push_back(value_info("y", 1, {1, 4}));
  OnnxModel m = load(model(graph(p)));
  try {
    m.run(std::vector<Tensor>{ramp({1, 4})});
    FAIL();
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::Unsupported);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("FancyOp in node 'first'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("OtherOp in node 'second'"), std::string::npos) << msg;
  }
}

TEST(Plan, ShapeSubgraphsAreFoldedAway) {
  // y = Reshape(x, Concat(Shape(x)[0:1], [-1])): the shape arithmetic folds at plan time and
  // only the Reshape remains to run.
  GraphParts p;
  p.nodes.push_back(node("Shape", {"x"}, {"s"}, "shape"));
  p.nodes.push_back(node("Slice", {"s", "st", "en"}, {"n"}, "slice"));
  p.nodes.push_back(node("Concat", {"n", "m1"}, {"newshape"}, "concat", {attr_int("axis", 0)}));
  p.nodes.push_back(node("Reshape", {"x", "newshape"}, {"y"}, "reshape"));
  p.initializers.push_back(tensor_header("st", 7, {1}).packed_varints(7, {0}));
  p.initializers.push_back(tensor_header("en", 7, {1}).packed_varints(7, {1}));
  p.initializers.push_back(tensor_header("m1", 7, {1}).packed_varints(7, {-1}));
  p.inputs.push_back(value_info("x", 1, {2, 3, 4}));
  p.outputs.push_back(value_info("y", 1, {2, 12}));
  OnnxModel m = load(model(graph(p)));
  const auto& plan = qsmcore::plan_for(m, {{2, 3, 4}});
  int runnable = 0;
  for (const auto& st : plan.steps()) runnable += st.op_type == "Reshape" ? 1 : 0;
  EXPECT_EQ(runnable, 1);
  EXPECT_EQ(plan.steps().size(), 1u);
  auto y = m.run(std::vector<Tensor>{ramp({2, 3, 4})});
  EXPECT_EQ(y[0].shape(), (qsmcore::Shape{2, 12}));
}

namespace {

// x -> Relu -> r; y = Conv(r + Conv(r)): the first conv's fused Sum adds its own input, so its
// output must not take r's buffer while the conv still reads r.
Proto self_residual() {
  GraphParts p;
  std::vector<float> w(4 * 4 * 27), w2(4 * 4 * 27);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.7f * static_cast<float>(i)) * 0.2f;
  for (std::size_t i = 0; i < w2.size(); ++i) w2[i] = std::cos(0.3f * static_cast<float>(i)) * 0.2f;
  p.initializers.push_back(float_tensor("w", {4, 4, 3, 3, 3}, w));
  p.initializers.push_back(float_tensor("w2", {4, 4, 3, 3, 3}, w2));
  p.nodes.push_back(node("Relu", {"x"}, {"r"}, "relu"));
  p.nodes.push_back(node("Conv", {"r", "w"}, {"c"}, "conv", {attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
  p.nodes.push_back(node("Add", {"r", "c"}, {"a"}, "add"));
  p.nodes.push_back(node("Conv", {"a", "w2"}, {"y"}, "conv2", {attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
  p.inputs.push_back(value_info("x", 1, {1, 4, 8, 9, 10}));
  p.outputs.push_back(value_info("y", 1, {1, 4, 8, 9, 10}));
  return model(graph(p));
}

}  // namespace

TEST(Plan, ASumOfAKernelsOwnInputDoesNotOverwriteIt) {
  const Tensor x = ramp({1, 4, 8, 9, 10});
  OnnxModel ref = load(self_residual());
  const auto want = ref.run(std::vector<Tensor>{x});
  OnnxModel fast = load(self_residual(), qsmcore::kDefaultBackend);
  const auto got = fast.run(std::vector<Tensor>{x});
  float range = 0.0f;
  for (std::int64_t i = 0; i < want[0].numel(); ++i) range = std::max(range, std::abs(want[0].data<float>()[i]));
  ASSERT_TRUE(std::isfinite(range) && range > 0.0f);
  for (std::int64_t i = 0; i < want[0].numel(); ++i)
    ASSERT_NEAR(got[0].data<float>()[i], want[0].data<float>()[i], 1e-5f * range) << "element " << i;
}
