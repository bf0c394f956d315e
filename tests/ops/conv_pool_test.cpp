// Conv, ConvTranspose and pooling reference kernels against hand-computed values and a naive
// direct implementation written independently here.
#include <cmath>
#include <random>

#include "op_test_util.h"

namespace opstest {
namespace {

Tensor random(Shape s, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(static_cast<std::size_t>(qsmcore::numel(s)));
  for (auto& x : v) x = d(g);
  return F(std::move(s), v);
}

TEST(Conv, IdentityKernel3dReturnsInput) {
  const Tensor x = iota({1, 1, 3, 4, 5});
  Tensor w = Tensor::zeros(DType::F32, {1, 1, 3, 3, 3});
  w.data<float>()[13] = 1.0f;  // centre tap
  const Tensor y = run1({"Conv", {ais("pads", {1, 1, 1, 1, 1, 1})}}, {x, w});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 4, 5}));
  EXPECT_EQ(values(y), values(x));
}

TEST(Conv, OnesKernelSumsNeighbourhoodWithBias) {
  // 3x3 input 1..9, 3x3 ones kernel, pads 1: corner = 1+2+4+5, centre = 45; bias 10.
  const Tensor x = F({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor w = F({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  const Tensor y = run1({"Conv", {ais("pads", {1, 1, 1, 1})}}, {x, w, F({1}, {10})});
  expect_near(y, {22, 31, 26, 37, 55, 43, 34, 49, 38});
  // Stride 2 keeps the corners only.
  const Tensor s = run1({"Conv", {ais("pads", {1, 1, 1, 1}), ais("strides", {2, 2})}}, {x, w});
  expect_near(s, {12, 16, 24, 28});
}

TEST(Conv, AutoPadSameUpperAndValid) {
  const Tensor x = iota({1, 1, 5});
  const Tensor w = F({1, 1, 2}, {1, 1});
  // SAME_UPPER, stride 2: out = ceil(5/2) = 3, total pad 1 at the end: [0+1, 2+3, 4+0].
  expect_near(run1({"Conv", {as("auto_pad", "SAME_UPPER"), ais("strides", {2})}}, {x, w}), {1, 5, 4});
  // SAME_LOWER puts it at the start: [0+0, 1+2, 3+4].
  expect_near(run1({"Conv", {as("auto_pad", "SAME_LOWER"), ais("strides", {2})}}, {x, w}), {0, 3, 7});
  expect_near(run1({"Conv", {as("auto_pad", "VALID")}}, {x, w}), {1, 3, 5, 7});
}

TEST(Conv, BadAutoPadNamesNodeAndValue) {
  const std::string msg = error_of({"Conv", {as("auto_pad", "FOO")}}, {iota({1, 1, 4, 4}), iota({1, 1, 3, 3})},
                                   qsmcore::ErrorKind::Unsupported);
  EXPECT_NE(msg.find("node 'n' (Conv)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("auto_pad value 'FOO'"), std::string::npos) << msg;
}

TEST(Conv, ChannelMismatchIsInvalidModel) {
  error_of({"Conv", {}}, {iota({1, 3, 4, 4}), iota({2, 2, 3, 3})});
}

/// Naive conv: y[n,m,o...] = b[m] + sum over c in group, k of x[n,c,o*s-p+k*d] * w[m,c,k].
std::vector<float> naive_conv2d(const Tensor& x, const Tensor& w, int group, int s, int p, int d) {
  const auto N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), M = w.dim(0), K = w.dim(2);
  const auto OH = (H + 2 * p - (K - 1) * d - 1) / s + 1, OW = (W + 2 * p - (K - 1) * d - 1) / s + 1;
  const auto cg = C / group, mg = M / group;
  std::vector<float> y(static_cast<std::size_t>(N * M * OH * OW), 0.0f);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t kh = 0; kh < K; ++kh)
              for (std::int64_t kw = 0; kw < K; ++kw) {
                const auto ih = oh * s - p + kh * d, iw = ow * s - p + kw * d;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x.data<float>()[((n * C + (m / mg) * cg + c) * H + ih) * W + iw] *
                       w.data<float>()[((m * cg + c) * K + kh) * K + kw];
              }
          y[static_cast<std::size_t>(((n * M + m) * OH + oh) * OW + ow)] = static_cast<float>(acc);
        }
  return y;
}

TEST(Conv, MatchesNaiveWithGroupsStridesDilations) {
  const Tensor x = random({2, 4, 9, 8}, 1);
  const Tensor w = random({6, 2, 3, 3}, 2);
  const Tensor y = run1({"Conv", {ai("group", 2), ais("strides", {2, 2}), ais("pads", {2, 2, 2, 2}), ais("dilations", {2, 2})}},
                        {x, w});
  expect_near(y, naive_conv2d(x, w, 2, 2, 2, 2), 1e-4f);
}

TEST(ConvTranspose, Stride2OnesKernelSpreadsEachInput) {
  // 1-D: x = [1, 2], k = [1, 1, 1], stride 2 -> [1, 1, 1+2, 2, 2].
  const Tensor y = run1({"ConvTranspose", {ais("strides", {2})}}, {F({1, 1, 2}, {1, 2}), F({1, 1, 3}, {1, 1, 1})});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 5}));
  expect_near(y, {1, 1, 3, 2, 2});
  // pads 1,1 crop one at each end; output_padding adds one at the end.
  expect_near(run1({"ConvTranspose", {ais("strides", {2}), ais("pads", {1, 1})}}, {F({1, 1, 2}, {1, 2}), F({1, 1, 3}, {1, 1, 1})}),
              {1, 3, 2});
  expect_near(run1({"ConvTranspose", {ais("strides", {2}), ais("output_padding", {1})}},
                   {F({1, 1, 2}, {1, 2}), F({1, 1, 3}, {1, 1, 1}), F({1}, {5})}),
              {6, 6, 8, 7, 7, 5});
}

TEST(ConvTranspose, IsAdjointOfConv) {
  // <conv(x), y> == <x, convT(y)> for the same weights and geometry.
  const Tensor x = random({1, 2, 7, 6}, 3), w = random({3, 2, 3, 3}, 4);
  const OpCall conv{"Conv", {ais("strides", {2, 2}), ais("pads", {1, 1, 1, 1})}};
  const Tensor cx = run1(conv, {x, w});
  const Tensor y = random(cx.shape(), 5);
  const Tensor ty = run1({"ConvTranspose", {ais("strides", {2, 2}), ais("pads", {1, 1, 1, 1}), ais("output_padding", {0, 1})}},
                         {y, w});
  ASSERT_EQ(ty.shape(), x.shape());
  double a = 0, b = 0;
  for (std::int64_t i = 0; i < cx.numel(); ++i) a += cx.data<float>()[i] * y.data<float>()[i];
  for (std::int64_t i = 0; i < x.numel(); ++i) b += x.data<float>()[i] * ty.data<float>()[i];
  EXPECT_NEAR(a, b, 1e-3);
}

TEST(Pool, MaxAndAverage2x2Stride2) {
  const Tensor x = iota({1, 1, 4, 4});
  const OpCall mp{"MaxPool", {ais("kernel_shape", {2, 2}), ais("strides", {2, 2})}, 17, 2};
  const auto outs = run(mp, {x});
  expect_near(outs[0], {5, 7, 13, 15});
  EXPECT_EQ(values<std::int64_t>(outs[1]), (std::vector<std::int64_t>{5, 7, 13, 15}));
  expect_near(run1({"AveragePool", {ais("kernel_shape", {2, 2}), ais("strides", {2, 2})}}, {x}), {2.5, 4.5, 10.5, 12.5});
}

TEST(Pool, CountIncludePadChangesTheDivisor) {
  const Tensor x = F({1, 1, 2}, {2, 4});
  const std::vector<Attribute> base{ais("kernel_shape", {2}), ais("pads", {1, 1})};
  expect_near(run1({"AveragePool", base}, {x}), {2, 3, 4});
  auto inc = base;
  inc.push_back(ai("count_include_pad", 1));
  expect_near(run1({"AveragePool", inc}, {x}), {1, 3, 2});
}

TEST(Pool, CeilModeAndGlobal) {
  const Tensor x = iota({1, 1, 5, 5});
  const Tensor y = run1({"MaxPool", {ais("kernel_shape", {2, 2}), ais("strides", {2, 2}), ai("ceil_mode", 1)}}, {x});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  expect_near(y, {6, 8, 9, 16, 18, 19, 21, 23, 24});
  expect_near(run1({"GlobalAveragePool", {}}, {x}), {12});
  expect_near(run1({"GlobalMaxPool", {}}, {x}), {24});
}

TEST(Pool, MissingKernelShapeIsInvalid) { error_of({"MaxPool", {}}, {iota({1, 1, 4, 4})}); }

}  // namespace
}  // namespace opstest
