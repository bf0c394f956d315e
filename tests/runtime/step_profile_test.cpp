// ModelOptions::profile_steps: the last run's kernel time by op type and implementation. Every
// step of the plan is counted once, under its own kernel's name; the times are finite, sorted,
// and within the run's wall time; profiling changes no output bit; without it nothing is kept.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "onnx/onnx_writer.h"
#include "qsmcore/onnx_model.h"
#include "runtime/model_internals.h"

namespace {

using namespace qsmtest::onnxw;
using qsmcore::OnnxModel;
using qsmcore::Shape;
using qsmcore::Tensor;

// Conv → Relu → Conv, a residual Add and a MaxPool: several op types and kernels in one plan.
std::vector<std::uint8_t> small_net() {
  GraphParts g;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.2f);
  auto weights = [&](const std::string& name, std::int64_t m, std::int64_t c) {
    std::vector<float> w(static_cast<std::size_t>(m * c * 27));
    for (float& v : w) v = nd(rng);
    g.initializers.push_back(float_tensor(name, {m, c, 3, 3, 3}, w));
  };
  weights("w0", 8, 1);
  weights("w1", 8, 8);
  const auto pads = attr_ints("pads", {1, 1, 1, 1, 1, 1});
  g.nodes.push_back(node("Conv", {"x", "w0"}, {"a"}, "conv0", {pads}));
  g.nodes.push_back(node("Relu", {"a"}, {"b"}, "relu0"));
  g.nodes.push_back(node("Conv", {"b", "w1"}, {"c"}, "conv1", {pads}));
  g.nodes.push_back(node("Add", {"c", "a"}, {"d"}, "add0"));
  g.nodes.push_back(
      node("MaxPool", {"d"}, {"y"}, "pool0", {attr_ints("kernel_shape", {2, 2, 2}), attr_ints("strides", {2, 2, 2})}));
  g.inputs.push_back(value_info("x", 1, {1, 1, -1, -1, -1}));
  g.outputs.push_back(value_info("y", 1, {}));
  return model(graph(g)).bytes;
}

OnnxModel load(bool profile) {
  qsmcore::ModelOptions o;
  o.threads = 2;
  o.mem_budget = 0;
  o.profile_steps = profile;
  return OnnxModel::load(small_net(), o, "small_net.onnx");
}

Tensor input(const Shape& s) {
  Tensor t = Tensor::empty(qsmcore::DType::F32, s);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : t.span<float>()) v = nd(rng);
  return t;
}

TEST(StepProfile, EveryStepIsCountedOnceUnderItsKernelWithinTheRunsWallTime) {
  const Shape shape{1, 1, 16, 24, 20};
  const Tensor x = input(shape);
  OnnxModel m = load(true);
  m.run({x});  // plans; the profile of the second run is checked
  const auto t0 = std::chrono::steady_clock::now();
  m.run({x});
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<qsmcore::StepTime> profile = m.last_profile();
  ASSERT_FALSE(profile.empty());

  // The plan's own steps, counted independently by (op type, implementation).
  const qsmcore::Plan& plan = qsmcore::plan_for(m, {shape});
  std::map<std::pair<std::string, std::string>, std::int64_t> expected;
  for (const auto& st : plan.steps()) ++expected[{st.op_type, st.kernel->impl_name()}];
  std::map<std::pair<std::string, std::string>, std::int64_t> seen;
  double total = 0;
  for (std::size_t i = 0; i < profile.size(); ++i) {
    const qsmcore::StepTime& t = profile[i];
    EXPECT_TRUE(std::isfinite(t.seconds) && t.seconds >= 0) << t.op_type << " " << t.impl << ": " << t.seconds;
    EXPECT_EQ(seen.count({t.op_type, t.impl}), 0u) << "listed twice: " << t.op_type << " " << t.impl;
    seen[{t.op_type, t.impl}] = t.steps;
    if (i > 0) {
      EXPECT_GE(profile[i - 1].seconds, t.seconds) << "not sorted, most first";
    }
    total += t.seconds;
  }
  EXPECT_EQ(seen, expected);
  EXPECT_GT(total, 0.0);
  EXPECT_LE(total, wall);
}

TEST(StepProfile, ProfilingChangesNoOutputBitAndIsKeptOnlyWhenAsked) {
  const Shape shape{1, 1, 16, 16, 16};
  const Tensor x = input(shape);
  OnnxModel plain = load(false), timed = load(true);
  const Tensor a = plain.run({x}).front(), b = timed.run({x}).front();
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<std::size_t>(a.numel()) * sizeof(float)), 0);
  EXPECT_TRUE(plain.last_profile().empty());
  EXPECT_FALSE(timed.last_profile().empty());
}

}  // namespace
