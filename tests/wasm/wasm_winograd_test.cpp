// The simd128 backend's Winograd convs (kernels/wasm/conv_winograd.cpp), F(4×4, 3×3) on outputs
// 16 wide or more and F(2×2, 3×3) on narrower ones, against the native reference kernel, the
// direct sums of the ONNX definition. One model holds every form they take: partial channel
// blocks and tiles (heights and widths that are no multiple of the tile, 6 and 5 output
// channels), a fused Relu, asymmetric pads, a strided and dilated depth window, a fused residual
// Add whose output overwrites its addend, a 64-channel input whose rows span several tile
// blocks, a 64 → 96 conv (24 channel blocks, each transformed by every job that needs it), a 2-D
// conv, and on a 12-wide input the same forms on F(2×2, 3×3).
// A stride-2 conv beside them stays on the direct kernel. Each output must agree with the
// reference to 1e-5 of its range (a non-finite value fails), the plan must put the Winograd
// kernel where it claims to, and runs on 1 and 2 threads must agree to the bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "onnx/onnx_writer.h"
#include "qsmcore/onnx_model.h"
#include "support/test_data.h"
#include "wasm/wasm_run.h"

namespace {

namespace w = qsmtest::onnxw;
using Dims = std::vector<std::int64_t>;

std::vector<float> values(const Dims& dims, unsigned seed) {
  const qsmcore::Tensor t = qsmtest::random_tensor(qsmcore::Shape(dims.begin(), dims.end()), seed);
  const float* p = t.data<float>();
  return {p, p + t.numel()};
}

struct ConvCase {
  std::string input, output;
  Dims weight;
  bool bias = true;
  std::vector<w::Proto> attrs;
};

/// Conv nodes on x1 [1,5,7,13,19], x2 [1,64,3,5,70], x3 [1,6,5,9,12] and x4 [1,6,9,33] with
/// these outputs.
w::Proto winograd_model() {
  const std::vector<ConvCase> convs = {
      {"x1", "c1", {6, 5, 3, 3, 3}, true, {w::attr_ints("pads", {1, 1, 1, 1, 1, 1})}},
      {"x1", "y2", {8, 5, 3, 3, 3}, false, {w::attr_ints("pads", {0, 1, 2, 1, 1, 0})}},
      {"x1",
       "y3",
       {4, 5, 3, 3, 3},
       true,
       {w::attr_ints("pads", {2, 1, 1, 2, 1, 1}), w::attr_ints("strides", {2, 1, 1}),
        w::attr_ints("dilations", {2, 1, 1})}},
      {"x1", "c4", {5, 5, 3, 3, 3}, true, {w::attr_ints("pads", {1, 1, 1, 1, 1, 1})}},
      {"x2", "y6", {8, 64, 3, 3, 3}, true, {w::attr_ints("pads", {1, 1, 1, 1, 1, 1})}},
      {"x2", "y9", {96, 64, 3, 3, 3}, true, {w::attr_ints("pads", {1, 1, 1, 1, 1, 1})}},
      {"x4", "y7", {4, 6, 3, 3}, true, {w::attr_ints("pads", {1, 1, 1, 1})}},
      {"x3", "y10", {7, 6, 3, 3, 3}, true, {w::attr_ints("pads", {1, 1, 1, 1, 1, 1})}},
      {"x3", "y11", {9, 6, 3, 3, 3}, false, {w::attr_ints("pads", {0, 2, 1, 1, 0, 1})}},
      {"x1",
       "y8",
       {4, 5, 3, 3, 3},
       true,
       {w::attr_ints("pads", {1, 1, 1, 1, 1, 1}), w::attr_ints("strides", {1, 1, 2})}},
  };
  w::GraphParts p;
  // The residual's addend comes first, so the Add can fuse into its conv as a Sum.
  p.nodes.push_back(w::node("Abs", {"x1"}, {"a4"}, "abs"));
  unsigned seed = 100;
  for (const auto& c : convs) {
    const std::string wn = "w_" + c.output, bn = "b_" + c.output;
    p.initializers.push_back(w::float_tensor(wn, c.weight, values(c.weight, ++seed)));
    std::vector<std::string> in = {c.input, wn};
    if (c.bias) {
      p.initializers.push_back(w::float_tensor(bn, {c.weight[0]}, values({c.weight[0]}, ++seed)));
      in.push_back(bn);
    }
    p.nodes.push_back(w::node("Conv", in, {c.output}, "conv_" + c.output, c.attrs));
  }
  p.nodes.push_back(w::node("Relu", {"c1"}, {"y1"}, "relu"));
  p.nodes.push_back(w::node("Add", {"c4", "a4"}, {"y4"}, "residual"));
  p.inputs = {w::value_info("x1", 1, {1, 5, 7, 13, 19}), w::value_info("x2", 1, {1, 64, 3, 5, 70}),
              w::value_info("x3", 1, {1, 6, 5, 9, 12}), w::value_info("x4", 1, {1, 6, 9, 33})};
  for (const auto& [name, dims] : std::vector<std::pair<std::string, Dims>>{{"y1", {1, 6, 7, 13, 19}},
                                                                            {"y2", {1, 8, 6, 13, 19}},
                                                                            {"y3", {1, 4, 4, 13, 19}},
                                                                            {"y4", {1, 5, 7, 13, 19}},
                                                                            {"y6", {1, 8, 3, 5, 70}},
                                                                            {"y9", {1, 96, 3, 5, 70}},
                                                                            {"y7", {1, 4, 9, 33}},
                                                                            {"y10", {1, 7, 5, 9, 12}},
                                                                            {"y11", {1, 9, 4, 9, 12}},
                                                                            {"y8", {1, 4, 7, 13, 10}}})
    p.outputs.push_back(w::value_info(name, 1, dims));
  return w::model(w::graph(p));
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(WasmWinograd, ConvsAgreeWithTheReferenceKernel) {
  QSM_REQUIRE_WASM("mt");
  const std::string work = testing::TempDir() + "/wasm_winograd";
  std::filesystem::create_directories(work);
  const std::string model = work + "/convs.onnx";
  w::write_file(model, winograd_model().bytes);

  // The plan: the seven 3×3 stride-1 convs of outputs 16 wide or more on F(4×4, 3×3), the two
  // 12 wide on F(2×2, 3×3), the stride-2 one on the direct kernel.
  const std::string plan_log = work + "/plan.log";
  const std::string plan = "QSM_WASM_DIR='" + qsmtest::wasm_dir() +
                           "/mt' node " QSM_SOURCE_DIR "/tools/wasm/qsm.js onnx plan '" + model +
                           "' --shape x1=1x5x7x13x19 --shape x2=1x64x3x5x70 --shape x3=1x6x5x9x12 --shape x4=1x6x9x33 "
                           "--steps > '" +
                           plan_log + "' 2>&1";
  ASSERT_EQ(std::system(plan.c_str()), 0) << plan;
  const std::string steps = read_text(plan_log);
  auto count = [&](const std::string& impl) {
    std::size_t n = 0;
    for (std::size_t at = steps.find(impl); at != std::string::npos; at = steps.find(impl, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("simd128:conv_winograd4 "), 7u) << steps;
  EXPECT_EQ(count("simd128:conv_winograd "), 2u) << steps;
  EXPECT_EQ(steps.find(" Add "), std::string::npos) << "the residual Add was not fused\n" << steps;
  EXPECT_EQ(steps.find(" Relu "), std::string::npos) << "the Relu was not fused\n" << steps;
  EXPECT_NE(steps.find("simd128:conv "), std::string::npos) << "the stride-2 conv left the direct kernel\n" << steps;

  const std::vector<std::string> names = {"x1", "x2", "x3", "x4"};
  const std::vector<qsmcore::Tensor> inputs = {
      qsmtest::random_tensor({1, 5, 7, 13, 19}, 1), qsmtest::random_tensor({1, 64, 3, 5, 70}, 2),
      qsmtest::random_tensor({1, 6, 5, 9, 12}, 4), qsmtest::random_tensor({1, 6, 9, 33}, 3)};
  qsmcore::ModelOptions o;
  o.backend = qsmcore::Backend::Reference;
  auto ref = qsmcore::OnnxModel::load(model, o);
  std::map<std::string, qsmcore::Tensor> in;
  for (std::size_t i = 0; i < names.size(); ++i) in.emplace(names[i], inputs[i]);
  const auto want = ref.run(in);

  const qsmtest::WasmRun two = qsmtest::run_wasm("mt", model, names, inputs, work + "/t2");
  const qsmtest::WasmRun one = qsmtest::run_wasm("mt", model, names, inputs, work + "/t1", "", "", 1);
  ASSERT_EQ(two.outputs.size(), want.size());
  for (const auto& [name, t] : want) {
    SCOPED_TRACE(name);
    const auto it = two.outputs.find(name);
    ASSERT_NE(it, two.outputs.end());
    EXPECT_LE(qsmtest::relative_max_error(it->second, t), 1e-5) << "max|Δ| / range against the reference";
    ASSERT_EQ(one.outputs.count(name), 1u);
    qsmtest::expect_bitwise({one.outputs.at(name)}, {it->second}, name + ": 1 thread against 2");
  }
}

}  // namespace
