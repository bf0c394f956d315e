// The native 3-D Winograd conv F(2³, 3³) (src/kernels/winograd/) against the reference Conv of
// src/graph/ops (direct sums, the test oracle of every kernel): seeded random inputs and weights,
// odd spatial sizes (tiles past the faces), 1 to 48 channels, with and without bias, ReLU,
// LeakyReLU and a residual addend, the post-ops applied to the reference here by hand. Max |Δ|
// must stay within 1e-5 of the reference output's range, and any NaN/Inf fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "kernels/winograd/conv3d_winograd.h"
#include "ops/op_test_util.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"

namespace {

using qsmcore::graph::PostOp;
using qsmcore::kernels::winograd::Conv3dShape;
using qsmcore::kernels::winograd::WinogradConv3d;

std::vector<float> random_values(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// [n][ch][d][h][w] → [n][d][h][w][ch] (back = false), or the reverse.
std::vector<float> permute(const std::vector<float>& a, const Conv3dShape& s, int ch, bool back) {
  std::vector<float> b(a.size());
  const std::size_t vox = static_cast<std::size_t>(s.d) * s.h * s.w;
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < ch; ++c)
      for (std::size_t i = 0; i < vox; ++i) {
        const std::size_t first = (static_cast<std::size_t>(n) * ch + c) * vox + i;
        const std::size_t last = (static_cast<std::size_t>(n) * vox + i) * ch + c;
        if (back)
          b[first] = a[last];
        else
          b[last] = a[first];
      }
  return b;
}

struct Case {
  Conv3dShape s;
  bool bias = false;
  std::vector<PostOp> post;
  unsigned seed = 1;
};

/// The reference conv (NCDHW), then the post-ops in order, `add` the Sum addend (NCDHW).
std::vector<float> reference(const Case& k, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& b, const std::vector<float>& add) {
  using namespace opstest;
  const auto& s = k.s;
  std::vector<Tensor> in{F({s.n, s.c, s.d, s.h, s.w}, x), F({s.m, s.c, 3, 3, 3}, w)};
  if (k.bias) in.push_back(F({s.m}, b));
  const Tensor y = run1({"Conv", {ais("kernel_shape", {3, 3, 3}), ais("pads", {1, 1, 1, 1, 1, 1})}}, in);
  std::vector<float> r = values(y);
  for (const auto& p : k.post)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (p.kind == PostOp::Kind::Relu) r[i] = std::max(r[i], 0.0f);
      if (p.kind == PostOp::Kind::LeakyRelu) r[i] = r[i] >= 0.0f ? r[i] : p.alpha * r[i];
      if (p.kind == PostOp::Kind::Sum) r[i] += add[i];
    }
  return r;
}

/// Max |Δ| over the reference's range; +inf where either side holds a NaN or Inf.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0, lo = want.at(0), hi = want.at(0);
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) return INFINITY;
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
    lo = std::min(lo, static_cast<double>(want[i]));
    hi = std::max(hi, static_cast<double>(want[i]));
  }
  return hi > lo ? err / (hi - lo) : err;
}

/// Runs the Winograd conv on the case (threads 2, the addend in place in y when `in_place`) and
/// returns its error relative to the reference.
double winograd_error(const Case& k, bool in_place = false) {
  const auto& s = k.s;
  const std::size_t vin = static_cast<std::size_t>(s.n) * s.c * s.d * s.h * s.w;
  const std::size_t vout = static_cast<std::size_t>(s.n) * s.m * s.d * s.h * s.w;
  const auto x = random_values(vin, k.seed);
  const auto w = random_values(static_cast<std::size_t>(s.m) * s.c * 27, k.seed + 1, 1.0f / std::sqrt(27.0f * s.c));
  const auto b = random_values(static_cast<std::size_t>(s.m), k.seed + 2, 0.5f);
  const auto add = random_values(vout, k.seed + 3);
  const auto want = reference(k, x, w, b, add);

  const WinogradConv3d conv(s, w.data(), k.bias ? b.data() : nullptr, k.post);
  const auto xl = permute(x, s, s.c, false);
  std::vector<float> y(vout, NAN), addl = permute(add, s, s.m, false);
  if (in_place) y = addl;
  qsmcore::ScopedThreads two(2);
  conv.run(xl.data(), in_place ? y.data() : addl.data(), y.data());
  const double e = relative_error(permute(y, s, s.m, true), want);
  std::printf("  winograd %d→%d at %d×%d×%d (n %d, %zu post-ops): max|Δ| / range = %.2e\n", s.c, s.m, s.d, s.h, s.w,
              s.n, k.post.size(), e);
  return e;
}

PostOp relu() {
  return PostOp{PostOp::Kind::Relu, 0.0f, 0.0f, -1};
}
PostOp leaky(float a) {
  return PostOp{PostOp::Kind::LeakyRelu, a, 0.0f, -1};
}
PostOp sum() {
  return PostOp{PostOp::Kind::Sum, 0.0f, 0.0f, 2};
}

constexpr double kTol = 1e-5;

TEST(WinogradConv3d, MatchesReferenceAcrossChannelCountsAndOddSizes) {
  const int pairs[][2] = {{1, 16}, {3, 16}, {16, 16}, {32, 32}, {48, 32}, {16, 48}, {32, 3}, {48, 1}};
  const int sizes[][3] = {{7, 9, 11}, {10, 8, 13}, {1, 5, 6}};
  unsigned seed = 10;
  for (const auto& cm : pairs)
    for (const auto& sz : sizes) {
      const Case k{{1, cm[0], cm[1], sz[0], sz[1], sz[2]}, false, {}, seed += 4};
      EXPECT_LE(winograd_error(k), kTol) << cm[0] << "→" << cm[1] << " at " << sz[0] << "×" << sz[1] << "×" << sz[2];
    }
}

TEST(WinogradConv3d, FusedBiasAndActivations) {
  EXPECT_LE(winograd_error({{1, 16, 32, 9, 11, 7}, true, {relu()}, 3}), kTol);
  EXPECT_LE(winograd_error({{1, 32, 16, 8, 7, 9}, true, {leaky(0.1f)}, 5}), kTol);
  EXPECT_LE(winograd_error({{1, 3, 16, 13, 6, 5}, true, {}, 7}), kTol);
}

TEST(WinogradConv3d, ResidualAddBeforeActivationAndInPlace) {
  EXPECT_LE(winograd_error({{1, 32, 32, 9, 9, 9}, true, {sum(), relu()}, 11}), kTol);
  EXPECT_LE(winograd_error({{1, 48, 48, 7, 6, 5}, false, {leaky(0.2f), sum()}, 13}, true), kTol);
}

TEST(WinogradConv3d, BatchOfTwo) {
  EXPECT_LE(winograd_error({{2, 16, 32, 7, 8, 9}, true, {relu()}, 17}), kTol);
}

TEST(WinogradConv3d, SameBitsOnOneAndTwoThreads) {
  const Conv3dShape s{1, 32, 32, 17, 15, 13};
  const std::size_t vox = static_cast<std::size_t>(s.d) * s.h * s.w;
  const auto x = random_values(vox * s.c, 21);
  const auto w = random_values(static_cast<std::size_t>(s.m) * s.c * 27, 22, 0.1f);
  const WinogradConv3d conv(s, w.data(), nullptr, {relu()}, 8);  // small blocks: many per thread
  std::vector<float> y1(vox * s.m, NAN), y2(vox * s.m, NAN);
  {
    qsmcore::ScopedThreads one(1);
    conv.run(x.data(), nullptr, y1.data());
  }
  {
    qsmcore::ScopedThreads two(2);
    conv.run(x.data(), nullptr, y2.data());
  }
  for (std::size_t i = 0; i < y1.size(); ++i) {
    ASSERT_TRUE(std::isfinite(y1[i])) << i;
    ASSERT_EQ(y1[i], y2[i]) << i;
  }
}

// A conv chain's depth slabs (kernels/onednn/conv_chain.cpp): output planes [z0, z0 + n) from
// the input planes around them (the volume's pad at a face, the real neighbours inside), odd
// and even n, a Sum addend, into a buffer of n planes; together they must equal the reference
// conv of the whole volume plane for plane.
TEST(WinogradConv3d, DepthWindowsMatchTheWholeVolume) {
  const Case k{{1, 16, 24, 11, 7, 9}, true, {sum(), relu()}, 31};
  const auto& s = k.s;
  const std::size_t plane_in = static_cast<std::size_t>(s.h) * s.w * s.c,
                    plane_out = static_cast<std::size_t>(s.h) * s.w * s.m;
  const auto x = random_values(plane_in * s.d, k.seed);
  const auto w = random_values(static_cast<std::size_t>(s.m) * s.c * 27, k.seed + 1, 0.05f);
  const auto b = random_values(static_cast<std::size_t>(s.m), k.seed + 2, 0.5f);
  const auto add = random_values(plane_out * s.d, k.seed + 3);
  const auto want = reference(k, x, w, b, add);
  const WinogradConv3d conv(s, w.data(), b.data(), k.post);
  const auto xl = permute(x, s, s.c, false), addl = permute(add, s, s.m, false);
  std::vector<float> y(plane_out * s.d, NAN);
  std::vector<std::byte> scratch(conv.scratch_bytes(2) + 64);
  auto* aligned = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(scratch.data()) + 63) / 64 * 64);
  qsmcore::ScopedThreads two(2);
  for (const int z0 : {0, 3, 4, 9}) {  // slabs of 3, 1, 5, 2 planes: the first and the last at a face
    const int n = z0 == 0 ? 3 : z0 == 3 ? 1 : z0 == 4 ? 5 : 2;
    const int first = std::max(0, z0 - 1), last = std::min(s.d - 1, z0 + n);
    const qsmcore::kernels::winograd::DepthWindow win{n, last - first + 1, z0 == 0 ? 1 : 0};
    std::vector<float> out(addl.begin() + z0 * plane_out, addl.begin() + (z0 + n) * plane_out);
    conv.run_window(xl.data() + first * plane_in, out.data(), out.data(), win, aligned, conv.scratch_bytes(2), 2);
    std::copy(out.begin(), out.end(), y.begin() + z0 * plane_out);
  }
  const double e = relative_error(permute(y, s, s.m, true), want);
  std::printf("  depth windows of 16→24 at 11×7×9: max|Δ| / range = %.2e\n", e);
  EXPECT_LE(e, kTol);
  // A window whose input cannot be the outputs' planes and halo is refused.
  std::vector<float> out(plane_out * 2);
  EXPECT_THROW(conv.run_window(xl.data(), nullptr, out.data(), {2, 5, 0}, aligned, conv.scratch_bytes(2), 2),
               qsmcore::Error);
}

// A conv chain's layer over a split concat: the input channels in two buffers (16 + 8), read
// side by side into one transform, against the reference conv of the whole 24 channels.
TEST(WinogradConv3d, SplitInputsMatchTheirConcatenation) {
  const Case k{{1, 24, 16, 7, 6, 9}, true, {relu()}, 37};
  const auto& s = k.s;
  const std::size_t vox = static_cast<std::size_t>(s.d) * s.h * s.w;
  const auto x = random_values(vox * s.c, k.seed);
  const auto w = random_values(static_cast<std::size_t>(s.m) * s.c * 27, k.seed + 1, 0.05f);
  const auto b = random_values(static_cast<std::size_t>(s.m), k.seed + 2, 0.5f);
  const auto want = reference(k, x, w, b, {});
  const auto xl = permute(x, s, s.c, false);
  std::vector<float> x1(vox * 16), x2(vox * 8);  // channels [0, 16) and [16, 24) of each voxel
  for (std::size_t i = 0; i < vox; ++i) {
    std::copy(xl.begin() + i * 24, xl.begin() + i * 24 + 16, x1.begin() + i * 16);
    std::copy(xl.begin() + i * 24 + 16, xl.begin() + i * 24 + 24, x2.begin() + i * 8);
  }
  const WinogradConv3d conv(s, w.data(), b.data(), k.post);
  std::vector<float> y(vox * s.m, NAN);
  std::vector<std::byte> scratch(conv.scratch_bytes(2));
  const WinogradConv3d::Input in[] = {{x1.data(), 16}, {x2.data(), 8}};
  qsmcore::ScopedThreads two(2);
  conv.run_window(in, nullptr, y.data(), {s.d, s.d, 1}, scratch.data(), scratch.size(), 2);
  const double e = relative_error(permute(y, s, s.m, true), want);
  std::printf("  split inputs 16 + 8 → 16 at 7×6×9: max|Δ| / range = %.2e\n", e);
  EXPECT_LE(e, kTol);
  const WinogradConv3d::Input short_in[] = {{x1.data(), 16}};
  EXPECT_THROW(conv.run_window(short_in, nullptr, y.data(), {s.d, s.d, 1}, scratch.data(), scratch.size(), 2),
               qsmcore::Error);
}

TEST(WinogradConv3d, ScratchIsBoundedAndAccounted) {
  // The scratch depends on the channels alone, not on the volume.
  const std::vector<float> w(static_cast<std::size_t>(32) * 32 * 27, 0.01f);
  const WinogradConv3d small({1, 32, 32, 8, 8, 8}, w.data(), nullptr, {});
  const WinogradConv3d large({1, 32, 32, 160, 160, 160}, w.data(), nullptr, {});
  EXPECT_EQ(small.scratch_bytes(2), large.scratch_bytes(2));
  EXPECT_LT(small.scratch_bytes(1), std::size_t{4} << 20);
  // The transformed weights: 64 points per 27 taps, counted.
  EXPECT_GE(small.packed_bytes(), std::int64_t{64} * 32 * 32 * 4);
  const std::vector<float> x(static_cast<std::size_t>(24 * 24 * 24) * 32, 1.0f);
  std::vector<float> y(x.size());
  qsmcore::ScopedThreads two(2);
  const WinogradConv3d conv({1, 32, 32, 24, 24, 24}, w.data(), nullptr, {});
  qsmcore::reset_memory_peak();
  const auto base = qsmcore::memory_current();
  conv.run(x.data(), nullptr, y.data());
  const auto peak = qsmcore::memory_peak() - base;
  std::printf("  scratch of a 32→32 run on 2 threads: %lld B accounted (%.2f B/voxel at 24³)\n",
              static_cast<long long>(peak), static_cast<double>(peak) / (24 * 24 * 24));
  EXPECT_GE(peak, static_cast<std::int64_t>(conv.scratch_bytes(2)));
  EXPECT_LT(peak, static_cast<std::int64_t>(conv.scratch_bytes(2)) + (64 << 10));
}

TEST(WinogradConv3d, RefusesASumWithoutItsAddendAndBadSizes) {
  const std::vector<float> w(16 * 27, 0.1f), x(4 * 4 * 4 * 4, 1.0f);
  std::vector<float> y(4 * 4 * 4 * 4);
  const WinogradConv3d conv({1, 4, 4, 4, 4, 4}, w.data(), nullptr, {sum()});
  EXPECT_THROW(conv.run(x.data(), nullptr, y.data()), qsmcore::Error);
  EXPECT_THROW(WinogradConv3d({1, 0, 4, 4, 4, 4}, w.data(), nullptr, {}), qsmcore::Error);
}

TEST(WinogradConv3d, FitsOnlyThreeCubedStrideOnePadOne) {
  using qsmcore::kernels::winograd::winograd_fits;
  EXPECT_TRUE(winograd_fits({3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 1));
  EXPECT_FALSE(winograd_fits({3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 1));
  EXPECT_FALSE(winograd_fits({3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}, 1));
  EXPECT_FALSE(winograd_fits({3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, 1));
  EXPECT_FALSE(winograd_fits({3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 2));
  EXPECT_FALSE(winograd_fits({3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1));
}

}  // namespace
