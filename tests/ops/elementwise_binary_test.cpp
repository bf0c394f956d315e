// Unary, softmax, Cast and broadcasting binary operators against hand-computed values.
#include <cmath>
#include <limits>

#include "graph/ops/half.h"
#include "op_test_util.h"

namespace opstest {
namespace {

TEST(Unary, Activations) {
  const Tensor x = F({4}, {-2, -0.5f, 0, 3});
  expect_near(run1({"Relu"}, {x}), {0, 0, 0, 3});
  expect_near(run1({"LeakyRelu", {af("alpha", 0.1f)}}, {x}), {-0.2f, -0.05f, 0, 3});
  expect_near(run1({"Elu"}, {x}), {std::expm1(-2.0f), std::expm1(-0.5f), 0, 3});
  expect_near(run1({"Sigmoid"}, {F({3}, {0, -100, 100})}), {0.5f, 0, 1});
  expect_near(run1({"Abs"}, {x}), {2, 0.5f, 0, 3});
  expect_near(run1({"Neg"}, {x}), {2, 0.5f, 0, -3});
  expect_near(run1({"Sqrt"}, {F({2}, {4, 9})}), {2, 3});
  expect_near(run1({"Erf"}, {F({1}, {0})}), {0});
}

TEST(Unary, ClipAttributeAndInputForms) {
  const Tensor x = F({4}, {-3, -1, 1, 3});
  expect_near(run1({"Clip", {af("min", -2), af("max", 2)}, 6}, {x}), {-2, -1, 1, 2});
  expect_near(run1({"Clip"}, {x, F({}, {0}), F({}, {2})}), {0, 0, 1, 2});
  expect_near(run1({"Clip"}, {x, Tensor(), F({}, {0})}), {-3, -1, 0, 0});  // max only
}

TEST(Softmax, Opset13IsSingleAxisOpset12Coerces) {
  const Tensor x = F({2, 2}, {0, 0, 0, std::log(3.0f)}).reshaped({1, 2, 2});
  // opset 13, axis 1: normalise over dim 1 only.
  expect_near(run1({"Softmax", {ai("axis", 1)}, 13}, {x}), {0.5f, 0.25f, 0.5f, 0.75f});
  // opset 11, axis 1: the whole [2, 2] block is one row.
  expect_near(run1({"Softmax", {ai("axis", 1)}, 11}, {x}), {1 / 6.0f, 1 / 6.0f, 1 / 6.0f, 0.5f});
  const Tensor l = run1({"LogSoftmax", {}, 13}, {F({2}, {1000, 1000})});
  expect_near(l, {-std::log(2.0f), -std::log(2.0f)});
}

TEST(Cast, TruncatesBoolAndHalf) {
  const Tensor x = F({4}, {-1.7f, 0, 2.9f, 65504});
  EXPECT_EQ(values<std::int32_t>(run1({"Cast", {ai("to", 6)}}, {x})), (std::vector<std::int32_t>{-1, 0, 2, 65504}));
  EXPECT_EQ(values<std::uint8_t>(run1({"Cast", {ai("to", 9)}}, {x})), (std::vector<std::uint8_t>{1, 0, 1, 1}));
  const Tensor h = run1({"Cast", {ai("to", 10)}}, {x});
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(qsmcore::graph::ops::half_to_float(h.data<std::uint16_t>()[3]), 65504.0f);
  expect_near(run1({"Cast", {ai("to", 1)}}, {h}), {-1.7f, 0, 2.9f, 65504}, 2e-3f);
  error_of({"Cast", {ai("to", 8)}}, {x}, qsmcore::ErrorKind::Unsupported);  // string
}

TEST(Binary, BroadcastsBothWays) {
  const Tensor a = iota({2, 3}), row = F({3}, {10, 20, 30}), col = F({2, 1}, {100, 200});
  expect_near(run1({"Add"}, {a, row}), {10, 21, 32, 13, 24, 35});
  const Tensor o = run1({"Mul"}, {col, row});  // [2,1] x [3] -> [2,3]
  EXPECT_EQ(o.shape(), (Shape{2, 3}));
  expect_near(o, {1000, 2000, 3000, 2000, 4000, 6000});
  expect_near(run1({"Sub"}, {F({}, {1}), a}), {1, 0, -1, -2, -3, -4});
  expect_near(run1({"Div"}, {a, F({1}, {2})}), {0, 0.5f, 1, 1.5f, 2, 2.5f});
}

TEST(Binary, IncompatibleShapesNameBoth) {
  const std::string msg = error_of({"Add"}, {iota({2, 3}), iota({2})});
  EXPECT_NE(msg.find("[2,3] and [2]"), std::string::npos) << msg;
}

TEST(Binary, IntegerOpsComparisonsAndWhere) {
  const Tensor a = I({3}, {7, -7, 4}), b = I({3}, {2, 2, 0});
  EXPECT_EQ(values<std::int64_t>(run1({"Div"}, {a, b})), (std::vector<std::int64_t>{3, -3, 0}));
  EXPECT_EQ(values<std::int64_t>(run1({"Pow"}, {a, I({1}, {2})})), (std::vector<std::int64_t>{49, 49, 16}));
  EXPECT_EQ(values<std::uint8_t>(run1({"Greater"}, {a, b})), (std::vector<std::uint8_t>{1, 0, 1}));
  EXPECT_EQ(values<std::uint8_t>(run1({"Equal"}, {a, I({}, {4})})), (std::vector<std::uint8_t>{0, 0, 1}));
  EXPECT_EQ(values<std::uint8_t>(run1({"Not"}, {B({2}, {true, false})})), (std::vector<std::uint8_t>{0, 1}));
  const Tensor w = run1({"Where"}, {B({2, 1}, {true, false}), F({3}, {1, 2, 3}), F({}, {-1})});
  expect_near(w, {1, 2, 3, -1, -1, -1});
}

TEST(Binary, VariadicMaxMinAndPRelu) {
  expect_near(run1({"Max"}, {F({3}, {1, 5, 3}), F({1}, {2}), F({2, 1}, {0, 4})}), {2, 5, 3, 4, 5, 4});
  expect_near(run1({"Min"}, {F({2}, {1, 5})}), {1, 5});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(run1({"Max"}, {F({1}, {nan}), F({1}, {1})}).data<float>()[0]));
  expect_near(run1({"PRelu"}, {F({2, 2}, {-1, 1, -2, 2}), F({2, 1}, {0.5f, 0.25f})}), {-0.5f, 1, -0.5f, 2});
}

}  // namespace
}  // namespace opstest
