// Shapes and sizes taken from a file must be overflow-checked: dims whose product wraps an
// int64, ConstantOfShape/Expand/Reshape targets of terabytes, caller shapes of the same kind.
// Each must be an Error naming the file, the node or tensor and what is wrong, before anything
// is allocated (a wrapped size would allocate a small buffer and write past it).
#include <gtest/gtest.h>

#include "core/checked_size.h"
#include "onnx/onnx_writer.h"
#include "onnx/reader.h"
#include "onnx/test_util.h"
#include "qsmcore/onnx_model.h"

namespace qsmcore {
namespace {

namespace w = qsmtest::onnxw;
using qsmtest::error_of;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

constexpr std::int64_t k31 = std::int64_t{1} << 31;
constexpr std::int64_t k40 = std::int64_t{1} << 40;

OnnxModel load(const w::Proto& m) {
  ModelOptions o;
  o.backend = Backend::Reference;
  o.threads = 1;
  o.mem_budget = 0;
  return OnnxModel::load(m.bytes, o, "hostile.onnx");
}

/// x [1] -> op(x, s) -> y, with `s` an int64 initializer holding `target`.
w::Proto one_op(const std::string& op, const std::vector<std::int64_t>& target, bool x_is_input = true) {
  w::GraphParts p;
  std::vector<std::string> ins = x_is_input ? std::vector<std::string>{"x", "s"} : std::vector<std::string>{"s"};
  p.nodes.push_back(w::node(op, ins, {"y"}, "big"));
  p.initializers.push_back(
      w::tensor_header("s", 7, {static_cast<std::int64_t>(target.size())}).packed_varints(7, target));
  p.inputs.push_back(w::value_info("x", 1, {1}));
  p.outputs.push_back(w::value_info("y", 1, {}));
  return w::model(w::graph(p));
}

std::string plan_error(const w::Proto& m, const Shape& x = {1}) {
  return error_of([&] {
    OnnxModel model = load(m);
    model.plan_memory({x});
  });
}

TEST(HostileShapes, CheckedNumelRejectsWrapsAndNegativesButCountsZeros) {
  EXPECT_EQ(checked_numel({2, 3, 4}).value(), 24);
  EXPECT_EQ(checked_numel({0, 5}).value(), 0);
  EXPECT_FALSE(checked_numel({k31, k31, k31}).has_value());
  EXPECT_FALSE(checked_numel({0, k40, k40}).has_value());  // Flatten would still multiply 2^40 × 2^40
  EXPECT_FALSE(checked_numel({3, -1}).has_value());
  EXPECT_EQ(shape_size_problem({1 << 20, 1 << 20}, 1), "");  // exactly 1 TiB
  EXPECT_TRUE(contains(shape_size_problem({1 << 20, 1 << 20}, 2), "more than the largest tensor"));
}

TEST(HostileShapes, ConstantOfShapeOfTwoToTheFortyElementsIsRefused) {
  const std::string err = plan_error(one_op("ConstantOfShape", {1 << 20, 1 << 20}, false));
  EXPECT_TRUE(contains(err, "hostile.onnx: ")) << err;
  EXPECT_TRUE(contains(err, "'big'")) << err;
  EXPECT_TRUE(contains(err, "[1048576,1048576] holds 1099511627776 elements of 4 bytes")) << err;
}

TEST(HostileShapes, ConstantOfShapeWhoseProductWrapsIsRefused) {
  const std::string err = plan_error(one_op("ConstantOfShape", {std::int64_t{1} << 62, 4}, false));
  EXPECT_TRUE(contains(err, "'big'") && contains(err, "more elements than an int64 can count")) << err;
}

TEST(HostileShapes, ExpandToAWrappingShapeIsRefused) {
  const std::string err = plan_error(one_op("Expand", {k31, k31, k31}));
  EXPECT_TRUE(contains(err, "hostile.onnx: ") && contains(err, "'big'")) << err;
  EXPECT_TRUE(contains(err, "[2147483648,2147483648,2147483648] has more elements than an int64 can count")) << err;
}

TEST(HostileShapes, ReshapeTargetWhoseProductWrapsIsRefused) {
  const std::string err = plan_error(one_op("Reshape", {std::int64_t{1} << 62, 4, -1}));
  EXPECT_TRUE(contains(err, "'big'") && contains(err, "more elements than an int64 can count")) << err;
}

TEST(HostileShapes, ReshapeOfAHugeInputToAHugeShapeIsRefusedBeforePlanning) {
  // x declared dynamic: the caller's shape itself is terabytes.
  w::Proto m = one_op("Reshape", {-1});
  const std::string err = error_of(
      [&] {
        OnnxModel model = load(m);
        model.plan_memory({{k40}});
      },
      ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(err, "hostile.onnx: input 'x'")) << err;
}

TEST(HostileShapes, CallerShapeWhoseProductWrapsIsRefused) {
  w::GraphParts p;
  p.nodes.push_back(w::node("Relu", {"x"}, {"y"}, "r"));
  p.inputs.push_back(w::value_info("x", 1, {-1, -1, -1}));
  p.outputs.push_back(w::value_info("y", 1, {-1, -1, -1}));
  const w::Proto m = w::model(w::graph(p));
  const std::string err = error_of(
      [&] {
        OnnxModel model = load(m);
        model.plan_memory({{k31, k31, k31}});
      },
      ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(err, "input 'x'") && contains(err, "more elements than an int64 can count")) << err;
}

TEST(HostileShapes, InitializerWithZeroDimHidingAWrapIsRefusedByTheReader) {
  w::GraphParts p;
  p.nodes.push_back(w::node("Identity", {"x"}, {"y"}, "id"));
  p.initializers.push_back(w::tensor_header("w", 1, {0, k40, k40}));
  p.inputs.push_back(w::value_info("x", 1, {1}));
  p.outputs.push_back(w::value_info("y", 1, {1}));
  const auto bytes = w::model(w::graph(p)).bytes;
  const std::string err = error_of([&] { onnx::read_model(bytes, "hostile.onnx"); });
  EXPECT_TRUE(contains(err, "hostile.onnx: ") && contains(err, "initializer 'w'")) << err;
  EXPECT_TRUE(contains(err, "more elements than an int64 can count")) << err;
}

TEST(HostileShapes, TensorEmptyRefusesWrappingShapes) {
  const std::string err = error_of([] { Tensor::empty(DType::F32, {k31, k31, k31}); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(err, "cannot allocate a tensor") && contains(err, "more elements than an int64")) << err;
}

// Found by the graph_plan fuzz target: kernels offset a null data pointer when a tensor is empty
// (a zero dim from the file). Each op here must run on an empty input and give an empty output.
TEST(HostileShapes, EmptyTensorsRunThroughReferenceKernels) {
  for (const char* op : {"Softmax", "LogSoftmax", "Relu", "Sigmoid", "Exp"}) {
    w::GraphParts p;
    p.nodes.push_back(w::node(op, {"x"}, {"y"}, "op"));
    p.inputs.push_back(w::value_info("x", 1, {1, 0, 8}));
    p.outputs.push_back(w::value_info("y", 1, {1, 0, 8}));
    OnnxModel model = load(w::model(w::graph(p)));
    const auto out = model.run(std::vector<Tensor>{Tensor::zeros(DType::F32, {1, 0, 8})});
    ASSERT_EQ(out.size(), 1u) << op;
    EXPECT_EQ(out[0].shape(), (Shape{1, 0, 8})) << op;
  }
}

TEST(HostileShapes, ResizingAnEmptyAxisToANonEmptyOneIsRefused) {
  w::GraphParts p;
  p.nodes.push_back(w::node("Resize", {"x", "", "", "sizes"}, {"y"}, "resize"));
  p.initializers.push_back(w::tensor_header("sizes", 7, {3}).packed_varints(7, {1, 4, 8}));
  p.inputs.push_back(w::value_info("x", 1, {1, 0, 8}));
  p.outputs.push_back(w::value_info("y", 1, {1, 4, 8}));
  const std::string err = plan_error(w::model(w::graph(p)), {1, 0, 8});
  EXPECT_TRUE(contains(err, "'resize'") && contains(err, "resize the empty axis 1 of [1,0,8]")) << err;
}

// Found by the graph_plan fuzz target: a roi of 1e30 put the sampling coordinate beyond int64
// (an undefined conversion). Coordinates are clamped near the axis, which keeps the taps; the
// points outside the crop take the extrapolation value.
TEST(HostileShapes, ResizeWithAHugeRoiExtrapolates) {
  w::GraphParts p;
  p.nodes.push_back(
      w::node("Resize", {"x", "roi", "", "sizes"}, {"y"}, "resize",
              {w::attr_string("mode", "linear"), w::attr_string("coordinate_transformation_mode", "tf_crop_and_resize"),
               w::attr_float("extrapolation_value", 7.5f)}));
  p.initializers.push_back(w::float_tensor("roi", {8}, {0, 0, 0, 0, 1, 1, 1e30f, 1e30f}));
  p.initializers.push_back(w::tensor_header("sizes", 7, {4}).packed_varints(7, {1, 1, 3, 3}));
  p.inputs.push_back(w::value_info("x", 1, {1, 1, 4, 4}));
  p.outputs.push_back(w::value_info("y", 1, {1, 1, 3, 3}));
  OnnxModel model = load(w::model(w::graph(p)));
  std::vector<float> x(16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  const auto out = model.run(std::vector<Tensor>{Tensor::from_vector<float>({1, 1, 4, 4}, x)});
  ASSERT_EQ(out[0].shape(), (Shape{1, 1, 3, 3}));
  const float* y = out[0].data<float>();
  EXPECT_EQ(y[0], 1.0f);
  for (int i = 1; i < 9; ++i) EXPECT_EQ(y[i], 7.5f) << i;
}

// Found by the graph_plan fuzz target: axis 0 of a scalar was accepted, and Split (Concat,
// Gather, Squeeze, ReduceSum...) then indexed its empty shape.
TEST(HostileShapes, AnAxisOfAScalarIsRefused) {
  for (const char* op : {"Split", "Concat", "Softmax", "Gather"}) {
    w::GraphParts p;
    const bool gather = std::string(op) == "Gather";
    p.nodes.push_back(w::node(op, gather ? std::vector<std::string>{"x", "i"} : std::vector<std::string>{"x"}, {"y"},
                              "op", {w::attr_int("axis", 0)}));
    if (gather) p.initializers.push_back(w::tensor_header("i", 7, {1}).packed_varints(7, {0}));
    p.inputs.push_back(w::value_info("x", 1, {}));
    p.outputs.push_back(w::value_info("y", 1, {}));
    const std::string err = plan_error(w::model(w::graph(p)), {});
    EXPECT_TRUE(contains(err, "'op'") && contains(err, "axis 0 is out of range for rank 0")) << op << ": " << err;
  }
}

}  // namespace
}  // namespace qsmcore
