// r2star_map and t2star_from_r2star on noise-free data, against analytic decays
// S0·exp(−R2*·TE) (both methods exact to 1e-9), the published ARLO's own analytic value, the
// head phantom's tissue table, and the rules for non-positive echoes, the mask, clamping, thread
// counts, progress, memory and the refusals of bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/phantom.h"
#include "qsmcore/relaxometry.h"
#include "relaxometry/decay.h"

namespace qsmcore {
namespace {

using testing::decay_volume;

const std::vector<double> kTe4{0.004, 0.012, 0.020, 0.028};  // the head phantom's echoes

R2starOptions with(R2starMethod m, LogLinearWeighting w = LogLinearWeighting::SignalSquared) {
  R2starOptions o;
  o.method = m;
  o.weighting = w;
  return o;
}

// Voxel i of a 16×8×4 volume: R2* cycles through the task's four values and a spread between
// 1 and 300 Hz; S0 between 0.5 and 2000 (scaled magnitudes must not matter).
double r2_of(std::int64_t i) {
  static const double fixed[] = {5.0, 20.0, 50.0, 150.0};
  return i % 8 < 4 ? fixed[i % 4] : 1.0 + 299.0 * static_cast<double>((i * 37) % 101) / 100.0;
}
double s0_of(std::int64_t i) {
  return 0.5 + static_cast<double>((i * 53) % 97) * 20.0;
}

void expect_exact(const Volume& r2, double rel) {
  for (std::int64_t i = 0; i < r2.voxels(); ++i) {
    const double want = r2_of(i), got = r2.data()[i];
    ASSERT_TRUE(std::abs(got - want) <= rel * want) << "voxel " << i << ": R2* " << got << " Hz, truth " << want;
  }
}

TEST(R2star, BothMethodsAreExactOnNoiseFreeDecays) {
  const Dims3 d{16, 8, 4};
  // Four echoes (the phantom's), three closely spaced short ones, eight long ones.
  const std::vector<std::vector<double>> te_sets{
      kTe4, {0.002, 0.005, 0.008}, {0.003, 0.008, 0.013, 0.018, 0.023, 0.028, 0.033, 0.038}};
  for (const auto& te : te_sets) {
    const Volume mag = decay_volume(d, te, r2_of, s0_of);
    for (const auto w : {LogLinearWeighting::SignalSquared, LogLinearWeighting::Unweighted}) {
      SCOPED_TRACE(std::to_string(te.size()) + " echoes, log-linear");
      expect_exact(r2star_map(mag, te, nullptr, with(R2starMethod::LogLinear, w)), 1e-9);
    }
    SCOPED_TRACE(std::to_string(te.size()) + " echoes, ARLO");
    expect_exact(r2star_map(mag, te, nullptr, with(R2starMethod::Arlo)), 1e-9);
  }
}

TEST(R2star, PublishedArloMatchesItsSimpsonValueAndIsBiased) {
  // Oracle: for S_i = S0·q^i, the published closed form returns exactly R = x/Δ with
  // x = 3(1 − q²)/(1 + 4q + q²) (every δ_i/s_i is that ratio). Its relative bias ≈ (R2*Δ)⁴/180
  // is what the Simpson correction removes.
  const Dims3 d{16, 8, 4};
  const Volume mag = decay_volume(d, kTe4, r2_of, s0_of);
  R2starOptions o = with(R2starMethod::Arlo);
  o.arlo_simpson_correction = false;
  const Volume r2 = r2star_map(mag, kTe4, nullptr, o);
  const double delta = 0.008;
  for (std::int64_t i = 0; i < r2.voxels(); ++i) {
    const double q = std::exp(-r2_of(i) * delta);
    const double want = 3.0 * (1.0 - q * q) / (1.0 + 4.0 * q + q * q) / delta;
    ASSERT_NEAR(r2.data()[i], want, 1e-9 * want) << "voxel " << i;
  }
  // At 150 Hz (R2*Δ = 1.2) the published estimate is off by ≈ 1.2⁴/180 ≈ 1 %.
  const double at150 = r2.data()[3];
  EXPECT_GT(std::abs(at150 - 150.0) / 150.0, 5e-3);
}

TEST(R2star, ArloAcceptsNearlyEqualSpacingAndRefusesUnequal) {
  const Dims3 d{4, 4, 2};
  const std::vector<double> nearly{0.004, 0.012, 0.02005, 0.028};  // a gap 0.6 % off the mean
  const std::vector<double> unequal{0.004, 0.012, 0.021, 0.028};   // 12 % off
  const Volume a = decay_volume(d, nearly, r2_of, s0_of);
  EXPECT_NO_THROW(r2star_map(a, nearly, nullptr, with(R2starMethod::Arlo)));
  const Volume b = decay_volume(d, unequal, r2_of, s0_of);
  try {
    r2star_map(b, unequal, nullptr, with(R2starMethod::Arlo));
    FAIL() << "ARLO accepted unequal echo spacing";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(std::string(e.what()).find("equally spaced"), std::string::npos) << e.what();
  }
  // The log-linear fit takes any increasing TEs, exactly.
  expect_exact(r2star_map(b, unequal, nullptr, with(R2starMethod::LogLinear)), 1e-9);
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

TEST(R2star, RefusesBadInput) {
  const Dims3 d{4, 4, 2};
  const Volume two = decay_volume(d, {0.004, 0.012}, r2_of, s0_of);
  const Volume one = decay_volume(d, {0.004}, r2_of, s0_of);
  const Volume four = decay_volume(d, kTe4, r2_of, s0_of);
  expect_invalid([&] { r2star_map(one, {0.004}, nullptr, with(R2starMethod::LogLinear)); }, "at least 2 echoes");
  expect_invalid([&] { r2star_map(two, {0.004, 0.012}, nullptr, with(R2starMethod::Arlo)); }, "at least 3 echoes");
  expect_invalid([&] { r2star_map(four, {0.004, 0.012, 0.02}); }, "3 echo time(s) for 4");
  expect_invalid([&] { r2star_map(four, {0.004, 0.012, 0.012, 0.028}); }, "must increase");
  expect_invalid([&] { r2star_map(four, {4.0, 12.0, 20.0, 28.0}); }, "in ms");
  expect_invalid([&] { r2star_map(four, {-0.004, 0.012, 0.02, 0.028}); }, "not a positive");
  expect_invalid([&] { r2star_map(Volume(), kTe4); }, "empty");
  const Volume small_mask = Volume::zeros({4, 4, 1}, Geometry::isotropic(1.0));
  expect_invalid([&] { r2star_map(four, kTe4, &small_mask); }, "not on the magnitude's grid");
  R2starOptions bad_max;
  bad_max.max_r2star_hz = 0.0;
  expect_invalid([&] { r2star_map(four, kTe4, nullptr, bad_max); }, "largest R2*");
  // NaN inside the mask is refused; outside it, it is never read.
  Volume nan = four.clone();
  nan.frame(2)[5] = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { r2star_map(nan, kTe4); }, "NaN or Inf");
  Volume mask = Volume::zeros(d, Geometry::isotropic(1.0));
  for (double& m : mask.values()) m = 1.0;
  mask.data()[5] = 0.0;
  const Volume r2 = r2star_map(nan, kTe4, &mask);
  EXPECT_EQ(r2.data()[5], 0.0);
  EXPECT_NEAR(r2.data()[6], r2_of(6), 1e-9 * r2_of(6));
}

TEST(R2star, MaskIsRespected) {
  const Dims3 d{8, 8, 4};
  const Volume mag = decay_volume(d, kTe4, r2_of, s0_of);
  Volume mask = Volume::zeros(d, Geometry::isotropic(1.0));
  for (std::int64_t i = 0; i < mask.voxels(); ++i) mask.data()[i] = i % 3 == 0 ? 1.0 : (i % 3 == 1 ? 0.4 : 0.0);
  for (const auto m : {R2starMethod::LogLinear, R2starMethod::Arlo}) {
    const Volume r2 = r2star_map(mag, kTe4, &mask, with(m));
    for (std::int64_t i = 0; i < r2.voxels(); ++i) {
      if (i % 3 == 0)
        ASSERT_NEAR(r2.data()[i], r2_of(i), 1e-9 * r2_of(i)) << i;
      else
        ASSERT_EQ(r2.data()[i], 0.0) << "voxel " << i << " is outside the mask (value " << mask.data()[i] << ")";
    }
  }
}

TEST(R2star, NonPositiveEchoesEndTheFit) {
  // Rule: a voxel is fitted on the echoes before its first non-positive magnitude, and is 0 when
  // fewer than the method's minimum remain.
  const std::vector<double> te{0.004, 0.008, 0.012, 0.016, 0.020};
  const Dims3 d{6, 1, 1};
  const auto r2 = [](std::int64_t) { return 40.0; };
  Volume mag = decay_volume(d, te, r2, [](std::int64_t) { return 1.0; });
  mag.at(0, 0, 0, 4) = 0.0;    // 4 good echoes
  mag.at(1, 0, 0, 3) = -0.01;  // 3 good echoes (echo 5 positive again, but after the gap)
  mag.at(2, 0, 0, 2) = 0.0;    // 2 good: log-linear fits, ARLO cannot
  mag.at(3, 0, 0, 1) = 0.0;    // 1 good: neither fits
  mag.at(4, 0, 0, 0) = 0.0;    // none
  // voxel 5 untouched; a wrong echo 5 on voxel 1 would show if it were used:
  mag.at(1, 0, 0, 4) = 5.0;
  const Volume ll = r2star_map(mag, te, nullptr, with(R2starMethod::LogLinear));
  const Volume ar = r2star_map(mag, te, nullptr, with(R2starMethod::Arlo));
  for (const std::int64_t i : {0, 1, 2, 5}) EXPECT_NEAR(ll.data()[i], 40.0, 40e-9) << "log-linear voxel " << i;
  for (const std::int64_t i : {3, 4}) EXPECT_EQ(ll.data()[i], 0.0) << "log-linear voxel " << i;
  for (const std::int64_t i : {0, 1, 5}) EXPECT_NEAR(ar.data()[i], 40.0, 40e-9) << "ARLO voxel " << i;
  for (const std::int64_t i : {2, 3, 4}) EXPECT_EQ(ar.data()[i], 0.0) << "ARLO voxel " << i;
}

TEST(R2star, EstimatesAreClampedToTheRange) {
  const Dims3 d{3, 1, 1};
  // 800 Hz (above the default 500), a growing signal (R2* = −30 Hz), a flat one (0 Hz).
  const double rates[] = {800.0, -30.0, 0.0};
  const Volume mag = decay_volume(
      d, kTe4, [&](std::int64_t i) { return rates[i]; }, [](std::int64_t) { return 1.0; });
  for (const auto m : {R2starMethod::LogLinear, R2starMethod::Arlo}) {
    const Volume r2 = r2star_map(mag, kTe4, nullptr, with(m));
    EXPECT_EQ(r2.data()[0], 500.0);
    EXPECT_EQ(r2.data()[1], 0.0);
    EXPECT_NEAR(r2.data()[2], 0.0, 1e-9);
    R2starOptions o = with(m);
    o.max_r2star_hz = 1000.0;
    EXPECT_NEAR(r2star_map(mag, kTe4, nullptr, o).data()[0], 800.0, 800e-9);
  }
}

TEST(R2star, T2starIsTheReciprocal) {
  Volume r2 = Volume::zeros({6, 1, 1}, Geometry::isotropic(1.0));
  const double in[] = {5.0, 150.0, 0.0, -3.0, std::numeric_limits<double>::quiet_NaN(), 1e-320};
  for (int i = 0; i < 6; ++i) r2.data()[i] = in[i];
  const Volume t2 = t2star_from_r2star(r2);
  EXPECT_DOUBLE_EQ(t2.data()[0], 0.2);
  EXPECT_DOUBLE_EQ(t2.data()[1], 1.0 / 150.0);
  for (int i = 2; i < 6; ++i) EXPECT_EQ(t2.data()[i], 0.0) << "R2* " << in[i];
  // And from a fitted map: T2* = 1/R2* voxel by voxel.
  const Volume mag = decay_volume({16, 8, 4}, kTe4, r2_of, s0_of);
  const Volume t2map = t2star_from_r2star(r2star_map(mag, kTe4));
  for (std::int64_t i = 0; i < t2map.voxels(); ++i) ASSERT_NEAR(t2map.data()[i], 1.0 / r2_of(i), 1e-9 / r2_of(i)) << i;
}

TEST(R2star, RecoversThePhantomsTissueValues) {
  // Oracle: the head phantom's magnitude decays with its tissue table's R2* in every brain voxel
  // (noise-free), so every estimate inside the mask is one of the table's values.
  PhantomOptions po;
  po.dims = {64, 64, 64};
  po.voxel_mm = {3.0, 3.0, 3.0};
  const Phantom p = make_head_phantom(po);
  std::set<double> table;
  for (const Tissue& t : head_phantom_tissues(std::nullopt)) table.insert(t.r2s_hz);
  for (const auto m : {R2starMethod::LogLinear, R2starMethod::Arlo}) {
    const Volume r2 = r2star_map(p.magnitude, po.te_s, &p.mask, with(m));
    std::set<double> seen;
    for (std::int64_t i = 0; i < r2.voxels(); ++i) {
      if (!mask_inside(p.mask.data()[i])) {
        ASSERT_EQ(r2.data()[i], 0.0);
        continue;
      }
      const double x = r2.data()[i];
      const auto it = std::min_element(table.begin(), table.end(),
                                       [&](double a, double b) { return std::abs(a - x) < std::abs(b - x); });
      ASSERT_NEAR(x, *it, 1e-9 * *it) << "voxel " << i << " is no tissue's R2*";
      seen.insert(*it);
    }
    EXPECT_GE(seen.size(), 6u);  // the brain, WM, CSF and deep grey matter at 3 mm
  }
}

TEST(R2star, DoesNotDependOnTheThreadCount) {
  Volume mag = decay_volume({24, 20, 12}, kTe4, r2_of, s0_of);
  testing::add_noise(mag, 20.0, testing::Noise::Rician, 5);
  for (const auto m : {R2starMethod::LogLinear, R2starMethod::Arlo}) {
    Volume one, two;
    {
      ScopedThreads t(1);
      one = r2star_map(mag, kTe4, nullptr, with(m));
    }
    {
      ScopedThreads t(2);
      two = r2star_map(mag, kTe4, nullptr, with(m));
    }
    for (std::int64_t i = 0; i < one.voxels(); ++i) ASSERT_EQ(one.data()[i], two.data()[i]) << i;
  }
}

TEST(R2star, ReportsProgressAndHoldsOnlyItsResult) {
  const Volume mag = decay_volume({32, 32, 32}, kTe4, r2_of, s0_of);
  for (const auto m : {R2starMethod::LogLinear, R2starMethod::Arlo}) {
    std::vector<double> seen;
    R2starOptions o = with(m);
    o.progress = [&](double f) { seen.push_back(f); };
    reset_memory_peak();
    const std::int64_t base = memory_current();
    const Volume r2 = r2star_map(mag, kTe4, nullptr, o);
    const std::int64_t above = memory_peak() - base;
    // The result (8 B per voxel) and nothing volume-sized besides.
    EXPECT_GE(above, 8 * mag.voxels());
    EXPECT_LE(above, 8 * mag.voxels() + 4096);
    ASSERT_FALSE(seen.empty());
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    EXPECT_GT(seen.front(), 0.0);
    EXPECT_EQ(seen.back(), 1.0);
  }
}

}  // namespace
}  // namespace qsmcore
