// Normalisations, reductions, MatMul/Gemm and Resize/Upsample against hand-computed values.
#include <cmath>

#include "op_test_util.h"

namespace opstest {
namespace {

TEST(Norm, BatchNormInference) {
  // y = scale * (x - mean) / sqrt(var + eps) + B per channel.
  const Tensor x = F({1, 2, 2}, {1, 3, 10, 20});
  const Tensor y = run1({"BatchNormalization", {af("epsilon", 0)}},
                        {x, F({2}, {2, 1}), F({2}, {0, 1}), F({2}, {2, 10}), F({2}, {1, 4})});
  expect_near(y, {-2, 2, 1, 6});
}

TEST(Norm, InstanceAndLayerNorm) {
  const Tensor x = F({1, 1, 4}, {1, 2, 3, 4});  // mean 2.5, var 1.25
  const float s = 1 / std::sqrt(1.25f);
  expect_near(run1({"InstanceNormalization", {af("epsilon", 0)}}, {x, F({1}, {1}), F({1}, {0})}), {-1.5f * s, -0.5f * s, 0.5f * s, 1.5f * s});
  const auto ln = run({"LayerNormalization", {af("epsilon", 0)}, 17, 3}, {x, F({4}, {1, 1, 2, 2}), F({1}, {1})});
  expect_near(ln[0], {1 - 1.5f * s, 1 - 0.5f * s, 1 + s, 1 + 3 * s});
  expect_near(ln[1], {2.5f});
  expect_near(ln[2], {s});
}

TEST(Reduce, SumAndMeanAxesForms) {
  const Tensor x = iota({2, 3});
  expect_near(run1({"ReduceSum", {}, 13}, {x, I({1}, {1})}), {3, 12});
  EXPECT_EQ(run1({"ReduceSum", {ai("keepdims", 0)}, 13}, {x, I({1}, {0})}).shape(), (Shape{3}));
  expect_near(run1({"ReduceSum", {}, 13}, {x}), {15});
  expect_near(run1({"ReduceSum", {ai("noop_with_empty_axes", 1)}, 13}, {x, I({0}, {})}), {0, 1, 2, 3, 4, 5});
  expect_near(run1({"ReduceMean", {ais("axes", {-1})}}, {x}), {1, 4});
  EXPECT_EQ(values<std::int64_t>(run1({"ReduceSum", {ais("axes", {0})}, 11}, {I({2}, {4, 5})})), (std::vector<std::int64_t>{9}));
}

TEST(MatMul, BatchedBroadcastAndVectors) {
  const Tensor a = iota({2, 2, 3}), b = F({3, 1}, {1, 1, 1});
  const Tensor y = run1({"MatMul"}, {a, b});
  EXPECT_EQ(y.shape(), (Shape{2, 2, 1}));
  expect_near(y, {3, 12, 21, 30});
  const Tensor v = run1({"MatMul"}, {F({3}, {1, 2, 3}), iota({3, 2})});  // [3] x [3,2] -> [2]
  EXPECT_EQ(v.shape(), (Shape{2}));
  expect_near(v, {16, 22});
  error_of({"MatMul"}, {iota({2, 3}), iota({2, 3})});
}

TEST(MatMul, GemmTransposesAlphaBetaBias) {
  const Tensor a = iota({3, 2});  // A^T is 2x3
  const Tensor b = F({2, 3}, {1, 0, 0, 0, 1, 0});  // B^T is 3x2
  const Tensor y = run1({"Gemm", {ai("transA", 1), ai("transB", 1), af("alpha", 2), af("beta", 0.5f)}}, {a, b, F({2}, {10, 20})});
  // A^T B^T = [[0,2],[1,3]]... rows of A^T: [0,2,4], [1,3,5]; B^T cols: e0, e1.
  expect_near(y, {0 + 5, 4 + 10, 2 + 5, 6 + 10});
  error_of({"Gemm"}, {iota({2, 3}), iota({2, 3})});
}

TEST(Resize, NearestAndLinearUpsample) {
  const Tensor x = F({1, 1, 2}, {1, 3});
  // half_pixel linear x2 on [1, 3]: coords -0.25, 0.25, 0.75, 1.25 -> 1, 1.5, 2.5, 3.
  expect_near(run1({"Resize", {as("mode", "linear")}, 13}, {x, Tensor(), F({3}, {1, 1, 2})}), {1, 1.5f, 2.5f, 3});
  expect_near(run1({"Resize", {as("mode", "linear"), as("coordinate_transformation_mode", "align_corners")}, 13},
                   {x, Tensor(), Tensor(), I({3}, {1, 1, 3})}),
              {1, 2, 3});
  expect_near(run1({"Resize", {as("mode", "nearest")}, 13}, {x, Tensor(), F({3}, {1, 1, 2})}), {1, 1, 3, 3});
  // Upsample-7 attribute form, Upsample-9 input form.
  expect_near(run1({"Upsample", {afs("scales", {1, 1, 2})}, 7}, {x}), {1, 1, 3, 3});
  expect_near(run1({"Upsample", {}, 9}, {x, F({3}, {1, 1, 2})}), {1, 1, 3, 3});
}

TEST(Resize, TrilinearIsSeparable) {
  // Linear data stays linear under trilinear resize with align_corners.
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>((i >> 2) + 2 * ((i >> 1) & 1) + 4 * (i & 1));
  const Tensor y = run1({"Resize", {as("mode", "linear"), as("coordinate_transformation_mode", "align_corners")}, 13},
                        {F({1, 1, 2, 2, 2}, v), Tensor(), Tensor(), I({5}, {1, 1, 3, 3, 3})});
  EXPECT_NEAR(y.data<float>()[13], 3.5f, 1e-5f);  // centre: mean of all corners
  EXPECT_NEAR(y.data<float>()[26], 7.0f, 1e-5f);
}

TEST(Resize, BadModeIsUnsupported) {
  error_of({"Resize", {as("mode", "area")}, 13}, {F({1, 1, 2}, {1, 3}), Tensor(), F({3}, {1, 1, 2})},
           qsmcore::ErrorKind::Unsupported);
}

}  // namespace
}  // namespace opstest
