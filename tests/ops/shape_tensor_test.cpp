// Shape and data-movement operators: Reshape, Flatten, Squeeze/Unsqueeze, Shape, Expand,
// ConstantOfShape, Constant, Concat, Split, Slice, Pad, Tile, Gather, Transpose.
#include "op_test_util.h"

namespace opstest {
namespace {

TEST(Reshape, ZeroCopiesAndMinusOneInfers) {
  const Tensor x = iota({2, 3, 4});
  EXPECT_EQ(run1({"Reshape"}, {x, I({2}, {0, -1})}).shape(), (Shape{2, 12}));
  EXPECT_EQ(run1({"Reshape"}, {x, I({3}, {4, 0, 2})}).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(values(run1({"Reshape"}, {x, I({1}, {-1})})), values(x));
  // allowzero: a 0 is a real zero-size dim.
  EXPECT_EQ(run1({"Reshape", {ai("allowzero", 1)}}, {Tensor::zeros(DType::F32, {0, 3}), I({2}, {3, 0})}).shape(), (Shape{3, 0}));
  // Opset 1-4 attribute form.
  EXPECT_EQ(run1({"Reshape", {ais("shape", {4, 6})}, 4}, {x}).shape(), (Shape{4, 6}));
}

TEST(Reshape, MismatchNamesBothShapes) {
  const std::string msg = error_of({"Reshape"}, {iota({2, 3}), I({2}, {4, 2})});
  EXPECT_NE(msg.find("node 'n' (Reshape): cannot reshape [2,3] into [4,2]"), std::string::npos) << msg;
  error_of({"Reshape"}, {iota({2, 3}), I({2}, {-1, -1})});
}

TEST(ShapeOps, FlattenSqueezeUnsqueezeShapeExpand) {
  const Tensor x = iota({2, 1, 3, 1});
  EXPECT_EQ(run1({"Flatten", {ai("axis", 2)}}, {x}).shape(), (Shape{2, 3}));
  EXPECT_EQ(run1({"Flatten", {ai("axis", 0)}}, {x}).shape(), (Shape{1, 6}));
  EXPECT_EQ(run1({"Squeeze"}, {x}).shape(), (Shape{2, 3}));
  EXPECT_EQ(run1({"Squeeze"}, {x, I({1}, {-1})}).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(run1({"Squeeze", {ais("axes", {1})}, 11}, {x}).shape(), (Shape{2, 3, 1}));
  error_of({"Squeeze"}, {x, I({1}, {0})});  // size 2 cannot be squeezed
  EXPECT_EQ(run1({"Unsqueeze"}, {iota({3}), I({2}, {0, -1})}).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(values<std::int64_t>(run1({"Shape", {ai("start", 1), ai("end", -1)}}, {x})), (std::vector<std::int64_t>{1, 3}));
  const Tensor e = run1({"Expand"}, {F({3, 1}, {1, 2, 3}), I({3}, {2, 1, 2})});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 2}));
  expect_near(e, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
}

TEST(ShapeOps, ConstantsAndConstantOfShape) {
  const Tensor c = run1({"ConstantOfShape", {at("value", I({1}, {7}))}}, {I({2}, {2, 2})});
  EXPECT_EQ(values<std::int64_t>(c), (std::vector<std::int64_t>{7, 7, 7, 7}));
  EXPECT_EQ(run1({"ConstantOfShape"}, {I({1}, {3})}).dtype(), DType::F32);
  expect_near(run1({"Constant", {afs("value_floats", {1, 2})}}, {}), {1, 2});
  EXPECT_EQ(values<std::int64_t>(run1({"Constant", {ai("value_int", 5)}}, {})), (std::vector<std::int64_t>{5}));
  error_of({"Constant"}, {});
}

TEST(TensorOps, ConcatAndSplit) {
  const Tensor c = run1({"Concat", {ai("axis", -1)}}, {iota({2, 1}), F({2, 2}, {9, 9, 8, 8})});
  expect_near(c, {0, 9, 9, 1, 8, 8});
  error_of({"Concat", {ai("axis", 0)}}, {iota({2, 1}), iota({2, 2})});
  const auto parts = run({"Split", {ai("axis", 1)}, 17, 2}, {iota({2, 4}), I({2}, {1, 3})});
  expect_near(parts[0], {0, 4});
  expect_near(parts[1], {1, 2, 3, 5, 6, 7});
  const auto equal = run({"Split", {}, 11, 2}, {iota({4})});
  expect_near(equal[1], {2, 3});
}

TEST(TensorOps, SliceWithNegativeStepsAndClamping) {
  const Tensor x = iota({3, 4});
  // rows 2..0 backwards, cols from 1 to the end.
  const Tensor s = run1({"Slice"}, {x, I({2}, {-1, 1}), I({2}, {INT64_MIN, 100}), I({2}, {0, 1}), I({2}, {-1, 1})});
  EXPECT_EQ(s.shape(), (Shape{3, 3}));
  expect_near(s, {9, 10, 11, 5, 6, 7, 1, 2, 3});
  // opset 1 attributes.
  expect_near(run1({"Slice", {ais("starts", {1}), ais("ends", {3}), ais("axes", {1})}, 1}, {x}), {1, 2, 5, 6, 9, 10});
  error_of({"Slice"}, {x, I({1}, {0}), I({1}, {1}), I({1}, {0}), I({1}, {0})});  // step 0
}

TEST(TensorOps, PadModes) {
  const Tensor x = F({3}, {1, 2, 3});
  expect_near(run1({"Pad"}, {x, I({2}, {2, 1}), F({}, {9})}), {9, 9, 1, 2, 3, 9});
  expect_near(run1({"Pad", {as("mode", "reflect")}}, {x, I({2}, {2, 2})}), {3, 2, 1, 2, 3, 2, 1});
  expect_near(run1({"Pad", {as("mode", "edge")}}, {x, I({2}, {1, 2})}), {1, 1, 2, 3, 3, 3});
  expect_near(run1({"Pad", {ais("pads", {0, -1}), af("value", 0)}, 2}, {x}), {1, 2});  // opset 2, negative crops
  error_of({"Pad", {as("mode", "wrap")}}, {x, I({2}, {1, 1})}, qsmcore::ErrorKind::Unsupported);
}

TEST(TensorOps, TileGatherTranspose) {
  expect_near(run1({"Tile"}, {F({2}, {1, 2}), I({1}, {3})}), {1, 2, 1, 2, 1, 2});
  const Tensor g = run1({"Gather", {ai("axis", 1)}}, {iota({2, 3}), I({2, 1}, {-1, 0})});
  EXPECT_EQ(g.shape(), (Shape{2, 2, 1}));
  expect_near(g, {2, 0, 5, 3});
  error_of({"Gather"}, {iota({2}), I({1}, {2})}, qsmcore::ErrorKind::InvalidInput);
  const Tensor t = run1({"Transpose", {ais("perm", {1, 2, 0})}}, {iota({2, 1, 3})});
  EXPECT_EQ(t.shape(), (Shape{1, 3, 2}));
  expect_near(t, {0, 3, 1, 4, 2, 5});
  expect_near(run1({"Transpose"}, {iota({2, 2})}), {0, 2, 1, 3});
  error_of({"Transpose", {ais("perm", {0, 0})}}, {iota({2, 2})});
}

}  // namespace
}  // namespace opstest
