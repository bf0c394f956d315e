// swi on a synthetic field: a paramagnetic vein along B0 (an infinite cylinder parallel to the
// field: +Δχ/3 inside, 0 outside — the analytic dipole field) in a smooth background field with
// some noise. Oracles: that analytic geometry (the vein darkens, its surroundings do not), the
// normalised convolution's exactness on constant and linear fields (the high-pass removes the
// background), the phase-mask formulas evaluated by hand with no high-pass, root-sum-of-squares
// by hand, and the minimum-intensity projection by brute force. Plus refusals, thread counts,
// progress and memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "physics/pcg.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/physics.h"
#include "qsmcore/relaxometry.h"
#include "relaxometry/relaxometry_internal.h"
#include "relaxometry/vein.h"

namespace qsmcore {
namespace {

using namespace testing::vein;

TEST(Swi, TheVeinDarkensAndItsSurroundingsDoNot) {
  const Volume mask = cylinder_mask(), mag = magnitude();
  for (const bool background : {false, true})
    for (const auto s : {SwiPhaseScaling::Tanh, SwiPhaseScaling::Classic}) {
      SCOPED_TRACE(std::string(s == SwiPhaseScaling::Tanh ? "tanh" : "classic") + (background ? ", background" : ""));
      const SwiResult r = swi(mag, field({true, background}), mask, kTe, scaled(s));
      const double vein = mean_weight(r, mag, 0.0, kVeinRadius - 0.5);
      const double around = mean_weight(r, mag, 6.0, 10.0);
      EXPECT_LT(vein, 0.3 * around) << "vein " << vein << ", surroundings " << around;
      // Tissue keeps most of its signal: the classic mask is 1 at φ ≤ 0, the tanh mask ≥ 0.88.
      EXPECT_GT(around, s == SwiPhaseScaling::Tanh ? 0.8 : 0.9);
      EXPECT_LE(around, 1.0);
    }
}

TEST(Swi, HighPassRemovesConstantAndLinearFields) {
  // Normalised convolution reproduces a constant exactly (Σ g·c·m / Σ g·m = c) at every mask
  // voxel, and a linear field wherever the window is whole (a symmetric window's centroid is
  // the voxel): σ_z = 0 leaves each slice alone, so any per-slice offset and any in-plane
  // gradient varying with z count as smooth.
  const Volume mask = cylinder_mask();
  Volume offsets = Volume::zeros(kDims, Geometry::isotropic(1.0)), linear = offsets.clone();
  for (std::int64_t k = 0; k < kDims[2]; ++k)
    for (std::int64_t j = 0; j < kDims[1]; ++j)
      for (std::int64_t i = 0; i < kDims[0]; ++i) {
        offsets.at(i, j, k) = 40.0 * std::sin(k / 5.0) + 3.0;
        linear.at(i, j, k) = offsets.at(i, j, k) + (15.0 + 0.5 * k) * (i - 31.5) / 32.0 - 10.0 * (j - 31.5) / 32.0;
      }
  const auto hp_const = relaxometry::highpass_in_mask(offsets, mask, {4.0, 4.0, 0.0}, nullptr);
  const auto hp_lin = relaxometry::highpass_in_mask(linear, mask, {4.0, 4.0, 0.0}, nullptr);
  int checked = 0;
  for (std::int64_t k = 0; k < kDims[2]; ++k)
    for (std::int64_t j = 0; j < kDims[1]; ++j)
      for (std::int64_t i = 0; i < kDims[0]; ++i) {
        const auto v = static_cast<std::size_t>(mask.index(i, j, k));
        if (!mask_inside(mask.data()[v])) {
          ASSERT_EQ(hp_const[v], 0.0f);
          continue;
        }
        ASSERT_LE(std::abs(hp_const[v]), 1e-4f) << i << "," << j << "," << k;
        if (interior(i, j)) {
          ASSERT_LE(std::abs(hp_lin[v]), 1e-4f) << i << "," << j << "," << k;
          ++checked;
        }
      }
  EXPECT_GT(checked, 1000);
}

TEST(Swi, TheSmoothBackgroundLeavesTheImageNearlyUnchanged) {
  const Volume mask = cylinder_mask(), mag = magnitude();
  const Volume plain = field({true, false}), with_bg = field({true, true});
  // Classic scaling is voxel-wise: in the interior only the curvature's offset (≈ σ²·f''/2 ≈
  // 0.03 Hz) remains, well under 1 % of the image.
  SwiOptions classic = scaled(SwiPhaseScaling::Classic);
  EXPECT_LT(interior_change(swi(mag, plain, mask, kTe, classic), swi(mag, with_bg, mask, kTe, classic), mag), 0.01);
  // tanh's scale m is a median over the whole mask, whose rim keeps part of a gradient (the
  // window is cut there), so the interior changes with m: measured 6 % at a quarter of this
  // gradient (0.1–0.2 Hz per voxel), 22 % at the full one (figures_test.cpp). Bound the first.
  SwiOptions tanh_o = scaled(SwiPhaseScaling::Tanh);
  const Volume gentle = field({true, true, 0.5, 0.25});
  EXPECT_LT(interior_change(swi(mag, plain, mask, kTe, tanh_o), swi(mag, gentle, mask, kTe, tanh_o), mag), 0.1);
  // Without the high-pass the same background changes the image by far more (the test has
  // the power to see a missing high-pass).
  classic.highpass_sigma_voxels = {0.0, 0.0, 0.0};
  EXPECT_GT(interior_change(swi(mag, plain, mask, kTe, classic), swi(mag, with_bg, mask, kTe, classic), mag), 0.5);
}

// Without a high-pass the phase mask is a function of each voxel's field alone: evaluate the
// recipes by hand.
TEST(Swi, PhaseMasksFollowTheirFormulas) {
  const Volume mask = cylinder_mask(), mag = magnitude();
  Volume f = field({true, false, 2.0});
  std::vector<double> positive;
  for (std::int64_t i = 0; i < f.voxels(); ++i)
    if (mask_inside(mask.data()[i]) && static_cast<float>(f.data()[i]) > 0.0f)
      positive.push_back(static_cast<float>(f.data()[i]));
  std::sort(positive.begin(), positive.end());
  const std::size_t n = positive.size();
  const double median = n % 2 == 1 ? positive[n / 2] : 0.5 * (positive[n / 2 - 1] + positive[n / 2]);
  for (const double strength : {4.0, 2.5}) {
    SwiOptions o;
    o.highpass_sigma_voxels = {0.0, 0.0, 0.0};
    o.strength = strength;
    o.phase_echo = 1;
    const SwiResult t = swi(mag, f, mask, kTe, o);
    o.scaling = SwiPhaseScaling::Classic;
    const SwiResult c = swi(mag, f, mask, kTe, o);
    const double m = median * 10.0 / strength;
    for (std::int64_t i = 0; i < f.voxels(); ++i) {
      if (!mask_inside(mask.data()[i])) {
        ASSERT_EQ(t.swi.data()[i], 0.0);
        ASSERT_EQ(c.swi.data()[i], 0.0);
        continue;
      }
      const double hz = static_cast<float>(f.data()[i]);
      const double want_t = mag.data()[i] * (1.0 + std::tanh(1.0 - hz / m)) / 2.0;
      const double phi = 2.0 * std::numbers::pi * hz * kTe[1];
      const double want_c =
          mag.data()[i] * (phi <= 0.0 ? 1.0 : std::pow(std::max(0.0, 1.0 - phi / std::numbers::pi), strength));
      ASSERT_NEAR(t.swi.data()[i], want_t, 1e-9 * mag.data()[i]) << i;
      ASSERT_NEAR(c.swi.data()[i], want_c, 1e-9 * mag.data()[i]) << i;
    }
  }
}

TEST(Swi, TanhIsScaleFreeAndCombinesEchoesByRootSumOfSquares) {
  const Volume mask = cylinder_mask(), mag = magnitude();
  const Volume f = field({true, true});
  Volume f3 = f.clone();
  for (double& x : f3.values()) x *= 4.0;  // a power of two: the f32 arithmetic scales exactly
  SwiOptions last, first;
  first.phase_echo = 0;
  const SwiResult a = swi(mag, f, mask, kTe, last), b = swi(mag, f3, mask, kTe, first);
  for (std::int64_t i = 0; i < f.voxels(); ++i)
    ASSERT_NEAR(a.swi.data()[i], b.swi.data()[i], 1e-9 * mag.data()[i]) << i;
  // Four echoes' magnitudes: the image of their root-sum-of-squares.
  Volume echoes = Volume::zeros(kDims, Geometry::isotropic(1.0), 4),
         rss = Volume::zeros(kDims, Geometry::isotropic(1.0));
  for (std::int64_t i = 0; i < rss.voxels(); ++i) {
    double s = 0.0;
    for (std::int64_t e = 0; e < 4; ++e) {
      const double x = mag.data()[i] * std::exp(-30.0 * kTe[static_cast<std::size_t>(e)]);
      echoes.frame(e)[static_cast<std::size_t>(i)] = x;
      s += x * x;
    }
    rss.data()[i] = std::sqrt(s);
  }
  const SwiResult c = swi(echoes, f, mask, kTe), d = swi(rss, f, mask, kTe);
  for (std::int64_t i = 0; i < f.voxels(); ++i)
    ASSERT_NEAR(c.swi.data()[i], d.swi.data()[i], 1e-12 * rss.data()[i]) << i;
}

TEST(Swi, MinimumIntensityProjectionIsTheWindowMinimum) {
  const Volume mask = cylinder_mask(), mag = magnitude();
  const Volume f = field({true, true, 2.0});
  for (const int n : {7, 4, 1, 40}) {
    SCOPED_TRACE("window " + std::to_string(n));
    SwiOptions o;
    o.mip_slices = n;
    const SwiResult r = swi(mag, f, mask, kTe, o);
    ASSERT_TRUE(same_grid(r.mip, r.swi));
    for (std::int64_t k = 0; k < kDims[2]; ++k)
      for (std::int64_t j = 0; j < kDims[1]; ++j)
        for (std::int64_t i = 0; i < kDims[0]; ++i) {
          double want = std::numeric_limits<double>::infinity();
          for (std::int64_t kk = k - n / 2; kk < k - n / 2 + n; ++kk)
            if (kk >= 0 && kk < kDims[2]) want = std::min(want, r.swi.at(i, j, kk));
          ASSERT_EQ(r.mip.at(i, j, k), want) << i << "," << j << "," << k;
          ASSERT_LE(r.mip.at(i, j, k), r.swi.at(i, j, k));
        }
  }
}

void expect_invalid(const std::function<void()>& f, const std::string& words) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error mentioning '" << words << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Swi, RefusesBadInput) {
  const Volume mask = cylinder_mask(), mag = magnitude();
  const Volume f = field({true, false});
  const Volume other = Volume::zeros({64, 64, 23}, Geometry::isotropic(1.0));
  const Volume three = Volume::zeros(kDims, Geometry::isotropic(1.0), 3);
  const Volume nothing = Volume::zeros(kDims, Geometry::isotropic(1.0));
  expect_invalid([&] { swi(other, f, mask, kTe); }, "not on one grid");
  expect_invalid([&] { swi(three, f, mask, kTe); }, "3 frames for 4 echo time(s)");
  expect_invalid([&] { swi(mag, f, other, kTe); }, "not on the magnitude's grid");
  expect_invalid([&] { swi(mag, f, nothing, kTe); }, "selects no voxel");
  expect_invalid([&] { swi(mag, f, mask, {}); }, "no echo time");
  expect_invalid([&] { swi(mag, three, mask, kTe); }, "field map has 3 frames");
  SwiOptions o;
  o.strength = 0.0;
  expect_invalid([&] { swi(mag, f, mask, kTe, o); }, "strength");
  o = {};
  o.phase_echo = 4;
  expect_invalid([&] { swi(mag, f, mask, kTe, o); }, "phase echo 4");
  o = {};
  o.mip_slices = 0;
  expect_invalid([&] { swi(mag, f, mask, kTe, o); }, "at least one slice");
  o = {};
  o.highpass_sigma_voxels = {4.0, -1.0, 0.0};
  expect_invalid([&] { swi(mag, f, mask, kTe, o); }, "sigma");
  Volume bad = f.clone();
  bad.at(32, 32, 3) = std::numeric_limits<double>::infinity();
  expect_invalid([&] { swi(mag, bad, mask, kTe); }, "NaN or Inf");
  bad = f.clone();
  bad.at(0, 0, 3) = std::numeric_limits<double>::quiet_NaN();  // outside the mask: never read
  EXPECT_NO_THROW(swi(mag, bad, mask, kTe));
}

TEST(Swi, DoesNotDependOnTheThreadCount) {
  const Volume mask = cylinder_mask(), mag = magnitude();
  const Volume f = field({true, true});
  SwiResult one, two;
  {
    ScopedThreads t(1);
    one = swi(mag, f, mask, kTe);
  }
  {
    ScopedThreads t(2);
    two = swi(mag, f, mask, kTe);
  }
  for (std::int64_t i = 0; i < f.voxels(); ++i) {
    ASSERT_EQ(one.swi.data()[i], two.swi.data()[i]) << i;
    ASSERT_EQ(one.mip.data()[i], two.mip.data()[i]) << i;
  }
}

TEST(Swi, ReportsProgressAndHoldsLittleBesidesItsOutputs) {
  const Volume mask = cylinder_mask(), mag = magnitude();
  const Volume f = field({true, true});
  std::vector<double> seen;
  SwiOptions o;
  o.progress = [&](double x) { seen.push_back(x); };
  reset_memory_peak();
  const std::int64_t base = memory_current();
  const SwiResult r = swi(mag, f, mask, kTe, o);
  const std::int64_t above = memory_peak() - base, n = f.voxels();
  // The two f64 outputs (16 B per voxel); the f32 work arrays are gone before both exist.
  EXPECT_GE(above, 16 * n);
  EXPECT_LE(above, 16 * n + 4096);
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.back(), 1.0);
}

}  // namespace
}  // namespace qsmcore
