// ROMEO spatial unwrapping (romeo_unwrap) and its voxel quality. Oracles: analytic residue-free
// fields (the unwrapped phase must equal the truth up to one multiple of 2π per connected region),
// the definition of congruence (output − input ∈ 2πℤ in every voxel, whatever the input), the
// weight formulas of methods.md §4.1 evaluated by hand on a ramp and a constant phase, and the
// memory target of the task (≤ 24 bytes per voxel above the inputs, ≤ 12 for the quality).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/unwrap.h"
#include "unwrap/romeo_weights.h"
#include "unwrap/unwrap_test_util.h"

namespace qsmcore {
namespace {

using namespace unwrap_test;

Volume smooth_magnitude(const Dims3& dims, const Vec3& voxel) {
  return filled(dims, voxel, [](double x, double y, double z) {
    return 0.2 + std::exp(-(x * x + 0.5 * y * y + z * z) / 1500.0) + 0.1 * std::cos(0.2 * x);
  });
}

TEST(RomeoUnwrap, SmoothFieldIsExactPhaseOnly) {
  const Dims3 dims{64, 64, 64};
  const Volume truth = smooth_field(dims, {1, 1, 1}, 25.0);
  ASSERT_LT(max_step(truth), 0.5 * std::numbers::pi);  // residue-free: every step is below π
  const Volume phase = wrapped(truth);
  RomeoInput in;
  in.phase = &phase;
  const Volume u = romeo_unwrap(in);
  expect_one_multiple(u, 0, truth, 0, everywhere());
  expect_congruent(u, phase, everywhere());
}

TEST(RomeoUnwrap, SmoothFieldIsExactWithMagnitudeMaskAndSecondEcho) {
  const Dims3 dims{56, 60, 52};
  const Vec3 voxel{1, 1, 1};
  const Volume truth = smooth_field(dims, voxel, 30.0);
  const double te1 = 0.01, te2 = 0.015;
  Volume truth2 = truth.clone();
  for (double& x : truth2.values()) x *= te2 / te1;
  ASSERT_LT(max_step(truth2), std::numbers::pi);
  const Volume phase = wrapped(truth), phase2 = wrapped(truth2);
  const Volume mag = smooth_magnitude(dims, voxel);
  const Volume mask = ellipsoid_mask(dims, voxel, {2, -1, 0}, {24, 26, 22});
  RomeoInput in;
  in.phase = &phase;
  in.magnitude = &mag;
  in.mask = &mask;
  in.second_phase = &phase2;
  in.second_echo = 0;
  in.te_ratio = te1 / te2;
  const Volume u = romeo_unwrap(in);
  expect_one_multiple(u, 0, truth, 0, inside(mask), 1e-9, "masked");
  for (std::int64_t v = 0; v < u.voxels(); ++v)
    if (mask.data()[v] < 0.5) {
      ASSERT_EQ(u.data()[v], 0.0) << "voxel " << v << " outside the mask";
    }
  // Without the mask too, and with the magnitude alone.
  in.mask = nullptr;
  expect_one_multiple(romeo_unwrap(in), 0, truth, 0, everywhere(), 1e-9, "no mask");
  in.second_phase = nullptr;
  expect_one_multiple(romeo_unwrap(in), 0, truth, 0, everywhere(), 1e-9, "magnitude only");
}

// The seed correction puts an offset-free phase into its absolute 2π class (φ₁/TE₁ ≈ φ₂/TE₂).
TEST(RomeoUnwrap, SecondEchoSeedCorrectionFindsTheAbsoluteClass) {
  const Dims3 dims{40, 40, 40};
  Volume truth = smooth_field(dims, {1, 1, 1}, 6.0);
  for (double& x : truth.values()) x += 7.0;  // the seed's true value lies outside (−π, π]
  Volume truth2 = truth.clone();
  for (double& x : truth2.values()) x *= 1.5;
  const Volume phase = wrapped(truth), phase2 = wrapped(truth2);
  RomeoInput in;
  in.phase = &phase;
  in.second_phase = &phase2;
  in.second_echo = 0;
  in.te_ratio = 1.0 / 1.5;
  EXPECT_EQ(expect_one_multiple(romeo_unwrap(in), 0, truth, 0, everywhere()), 0.0);
}

TEST(RomeoUnwrap, AnisotropicGridIsExact) {
  const Dims3 dims{80, 48, 36};
  const Vec3 voxel{0.7, 1.2, 2.0};
  const Volume truth = smooth_field(dims, voxel, 20.0);
  ASSERT_LT(max_step(truth), std::numbers::pi);
  const Volume phase = wrapped(truth);
  const Volume mag = smooth_magnitude(dims, voxel);
  RomeoInput in;
  in.phase = &phase;
  in.magnitude = &mag;
  const Volume u = romeo_unwrap(in);
  expect_one_multiple(u, 0, truth, 0, everywhere());
  EXPECT_EQ(u.voxel_mm(), phase.voxel_mm());
}

// Two blobs that touch nowhere: each is grown from its own seed, exact up to its own constant.
TEST(RomeoUnwrap, DisconnectedBlobsAreEachExact) {
  const Dims3 dims{64, 48, 48};
  const Vec3 voxel{1, 1, 1};
  const Volume truth = smooth_field(dims, voxel, 25.0);
  const Volume phase = wrapped(truth);
  const Volume a = ellipsoid_mask(dims, voxel, {-16, 0, 0}, {13, 18, 18});
  const Volume b = ellipsoid_mask(dims, voxel, {17, 2, -3}, {12, 15, 16});
  Volume mask = a.clone();
  for (std::int64_t v = 0; v < mask.voxels(); ++v) mask.data()[v] = std::max(a.data()[v], b.data()[v]);
  RomeoInput in;
  in.phase = &phase;
  in.mask = &mask;
  const Volume u = romeo_unwrap(in);
  expect_one_multiple(u, 0, truth, 0, inside(a), 1e-9, "blob a");
  expect_one_multiple(u, 0, truth, 0, inside(b), 1e-9, "blob b");
}

TEST(RomeoUnwrap, AnythingIsCongruent) {
  const Dims3 dims{40, 36, 32};
  const Volume phase = noise_phase(dims, 7);
  // Noise on a smooth field: residues everywhere, some regions off by 2π; congruence still holds.
  Volume mixed = smooth_field(dims, {1, 1, 1}, 20.0);
  const Volume noise = noise_phase(dims, 8);
  for (std::int64_t v = 0; v < mixed.voxels(); ++v)
    mixed.data()[v] = wrap_phase(mixed.data()[v] + 0.6 * noise.data()[v]);
  const Volume mag = noise_phase(dims, 9);  // signed values: |·| is used
  const Volume mask = ellipsoid_mask(dims, {1, 1, 1}, {0, 0, 0}, {17, 15, 13});
  for (const Volume* p : {&phase, static_cast<const Volume*>(&mixed)}) {
    RomeoInput in;
    in.phase = p;
    expect_congruent(romeo_unwrap(in), *p, everywhere());
    in.magnitude = &mag;
    in.mask = &mask;
    in.second_phase = &mixed;
    in.second_echo = 0;
    in.te_ratio = 0.5;
    RomeoOptions o;
    o.max_seeds = 20;
    const Volume u = romeo_unwrap(in, o);
    expect_congruent(u, *p, inside(mask));
  }
}

TEST(RomeoUnwrap, NonFiniteVoxelsAreLeftOutAndTheRestIsExact) {
  const Dims3 dims{40, 40, 40};
  const Volume truth = smooth_field(dims, {1, 1, 1}, 20.0);
  Volume phase = wrapped(truth);
  phase.at(20, 20, 20) = NAN;
  phase.at(3, 30, 10) = INFINITY;
  RomeoInput in;
  in.phase = &phase;
  const Volume u = romeo_unwrap(in);
  EXPECT_EQ(u.at(20, 20, 20), 0.0);
  EXPECT_EQ(u.at(3, 30, 10), 0.0);
  expect_one_multiple(u, 0, truth, 0, [&](std::int64_t v) { return std::isfinite(phase.data()[v]); });
}

TEST(RomeoUnwrap, SameResultOnAnyThreadCount) {
  const Dims3 dims{36, 40, 30};
  Volume phase = smooth_field(dims, {1, 1, 1}, 20.0);
  const Volume noise = noise_phase(dims, 3);
  for (std::int64_t v = 0; v < phase.voxels(); ++v) phase.data()[v] = wrap_phase(phase.data()[v] + noise.data()[v]);
  RomeoInput in;
  in.phase = &phase;
  Volume one, two;
  {
    ScopedThreads t(1);
    one = romeo_unwrap(in);
  }
  {
    ScopedThreads t(2);
    two = romeo_unwrap(in);
  }
  for (std::int64_t v = 0; v < one.voxels(); ++v) ASSERT_EQ(one.data()[v], two.data()[v]) << "voxel " << v;
}

TEST(RomeoUnwrap, ProgressRisesToOne) {
  const Volume truth = smooth_field({32, 32, 32}, {1, 1, 1}, 10.0);
  const Volume phase = wrapped(truth);
  RomeoInput in;
  in.phase = &phase;
  std::vector<double> seen;
  RomeoOptions o;
  o.progress = [&](double f) { seen.push_back(f); };
  (void)romeo_unwrap(in, o);
  ASSERT_GE(seen.size(), 3u);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i], seen[i - 1]);
  EXPECT_EQ(seen.back(), 1.0);
}

// The task's target: ≤ 24 bytes per voxel above the inputs, the f64 output included.
TEST(RomeoUnwrap, MemoryStaysWithin24BytesPerVoxel) {
  const Dims3 dims{64, 64, 64};
  const Volume truth = smooth_field(dims, {1, 1, 1}, 25.0);
  const Volume phase = wrapped(truth);
  const Volume mag = smooth_magnitude(dims, {1, 1, 1});
  RomeoInput in;
  in.phase = &phase;
  in.magnitude = &mag;
  in.second_phase = &phase;
  in.second_echo = 0;
  in.te_ratio = 1.0;
  reset_memory_peak();
  const std::int64_t base = memory_current();
  const Volume u = romeo_unwrap(in);
  const double per_voxel = static_cast<double>(memory_peak() - base) / static_cast<double>(phase.voxels());
  EXPECT_LE(per_voxel, 24.0);
  EXPECT_GE(per_voxel, 8.0);  // the output at least: the measurement sees the allocations
  reset_memory_peak();
  const std::int64_t base_q = memory_current();
  const Volume q = romeo_voxel_quality(in);
  EXPECT_LE(static_cast<double>(memory_peak() - base_q) / static_cast<double>(phase.voxels()), 12.0);
}

// ---- weights and quality --------------------------------------------------------------------

TEST(RomeoWeights, QuantisationFollowsTheBins) {
  EXPECT_EQ(unwrap::weight_bin(1.0), 1);  // the best edge still gets bin 1: 0 means invalid
  EXPECT_EQ(unwrap::weight_bin(0.0), 0);
  EXPECT_EQ(unwrap::weight_bin(NAN), 0);
  EXPECT_EQ(unwrap::weight_bin(1e-4), 255);
  EXPECT_EQ(unwrap::weight_bin(0.6), 102);  // (1 − 0.6)·255 = 102
  EXPECT_EQ(unwrap::weight_bin(0.999), 1);
}

// A constant phase: every valid edge weighs 1 except that phase linearity is 0.9 where an outer
// neighbour is missing, so the factor is 0.1 + 0.9·0.9 = 0.91 there; edges leaving count 0.
TEST(RomeoQuality, ConstantPhaseMatchesTheFormula) {
  Volume phase = Volume::zeros({8, 8, 8}, Geometry::isotropic(1.0));
  for (double& x : phase.values()) x = 1.3;
  RomeoInput in;
  in.phase = &phase;
  const Volume q = romeo_voxel_quality(in);
  EXPECT_NEAR(q.at(4, 4, 4), 1.0, 1e-12);
  EXPECT_NEAR(q.at(0, 0, 0), 3.0 * 0.91 / 6.0, 1e-12);  // three edges, each at a border
  // (1, 4, 4): its −x edge has no voxel before it (0.91), its +x edge has both (1).
  EXPECT_NEAR(q.at(1, 4, 4), (0.91 + 1.0 + 4.0) / 6.0, 1e-12);
}

// A ramp of g rad per voxel along x: phase coherence 1 − g/π, linearity 1 (no curvature).
TEST(RomeoQuality, RampMatchesPhaseCoherence) {
  const double g = 1.1;
  Volume phase = Volume::zeros({10, 10, 10}, Geometry::isotropic(1.0));
  for (std::int64_t k = 0; k < 10; ++k)
    for (std::int64_t j = 0; j < 10; ++j)
      for (std::int64_t i = 0; i < 10; ++i) phase.at(i, j, k) = wrap_phase(g * static_cast<double>(i));
  RomeoInput in;
  in.phase = &phase;
  const Volume q = romeo_voxel_quality(in);
  const double wx = 0.1 + 0.9 * (1.0 - g / std::numbers::pi);
  EXPECT_NEAR(q.at(5, 5, 5), (2.0 * wx + 4.0) / 6.0, 1e-12);
  // With a magnitude half as large in every other x plane: (1/2)² = 0.25 → factor 0.325 on x edges.
  Volume mag = phase.clone();
  for (std::int64_t k = 0; k < 10; ++k)
    for (std::int64_t j = 0; j < 10; ++j)
      for (std::int64_t i = 0; i < 10; ++i) mag.at(i, j, k) = i % 2 == 0 ? 2.0 : 1.0;
  in.magnitude = &mag;
  const Volume qm = romeo_voxel_quality(in);
  EXPECT_NEAR(qm.at(5, 5, 5), (2.0 * wx * 0.325 + 4.0) / 6.0, 1e-12);
}

TEST(RomeoQuality, InUnitRangeLowerOnNoiseZeroWhenIsolated) {
  const Dims3 dims{32, 32, 32};
  const Volume smooth = wrapped(smooth_field(dims, {1, 1, 1}, 15.0));
  const Volume noise = noise_phase(dims, 11);
  Volume mask = Volume::zeros(dims, Geometry::isotropic(1.0));
  for (std::int64_t k = 2; k < 30; ++k)
    for (std::int64_t j = 2; j < 30; ++j)
      for (std::int64_t i = 2; i < 20; ++i) mask.at(i, j, k) = 1.0;
  mask.at(26, 16, 16) = 1.0;  // isolated: all six neighbours outside the mask
  double mean_smooth = 0.0, mean_noise = 0.0;
  for (const Volume* p : {&smooth, &noise}) {
    RomeoInput in;
    in.phase = p;
    in.mask = &mask;
    const Volume q = romeo_voxel_quality(in);
    double sum = 0.0;
    std::int64_t n = 0;
    for (std::int64_t v = 0; v < q.voxels(); ++v) {
      ASSERT_TRUE(q.data()[v] >= 0.0 && q.data()[v] <= 1.0) << q.data()[v];
      if (mask.data()[v] > 0.5) {
        sum += q.data()[v];
        ++n;
      } else {
        ASSERT_EQ(q.data()[v], 0.0);
      }
    }
    EXPECT_EQ(q.at(26, 16, 16), 0.0);
    (p == &smooth ? mean_smooth : mean_noise) = sum / static_cast<double>(n);
  }
  EXPECT_GT(mean_smooth, 0.8);
  EXPECT_LT(mean_noise, 0.5 * mean_smooth);
}

// ---- bad input ------------------------------------------------------------------------------

void expect_invalid(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(RomeoErrors, BadInputsAreNamed) {
  const Volume phase = wrapped(smooth_field({16, 16, 16}, {1, 1, 1}, 5.0));
  const Volume other = Volume::zeros({16, 16, 15}, Geometry::isotropic(1.0));
  const Volume aniso = Volume::zeros({16, 16, 16}, Geometry::with_voxel({1, 1, 2}));
  RomeoInput in;
  expect_invalid([&] { (void)romeo_unwrap(in); }, "no phase");
  in.phase = &phase;
  in.mask = &other;
  expect_invalid([&] { (void)romeo_unwrap(in); }, "mask");
  in.mask = nullptr;
  in.magnitude = &aniso;
  expect_invalid([&] { (void)romeo_voxel_quality(in); }, "magnitude");
  in.magnitude = nullptr;
  in.second_phase = &phase;
  in.second_echo = 0;
  expect_invalid([&] { (void)romeo_unwrap(in); }, "TE ratio");
  in.te_ratio = 0.5;
  in.second_echo = 1;
  expect_invalid([&] { (void)romeo_unwrap(in); }, "second phase echo 1");
  in.second_phase = nullptr;
  in.echo = 2;
  expect_invalid([&] { (void)romeo_unwrap(in); }, "phase echo 2");
  in.echo = 0;
  RomeoOptions o;
  o.max_seeds = 0;
  expect_invalid([&] { (void)romeo_unwrap(in, o); }, "max_seeds");
}

}  // namespace
}  // namespace qsmcore
