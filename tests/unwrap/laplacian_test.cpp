// Laplacian unwrapping (laplacian_unwrap) and the DCT it is built on. Oracles: a naive DCT-II
// sum; analytic residue-free fields, on which the least-squares Laplacian solution is the truth
// up to a constant (so the congruent output is exact and the smooth one is the truth to
// round-off or to the masked solver's tolerance, bounds measured below); and congruence on inputs
// full of residues.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/unwrap.h"
#include "unwrap/dct.h"
#include "unwrap/unwrap_test_util.h"

namespace qsmcore {
namespace {

using namespace unwrap_test;

// X(k) = Σ_n x(n)·Π_a cos(π·k_a·(2n_a + 1)/(2N_a)), summed directly.
std::vector<double> naive_dct(const std::vector<double>& x, const Dims3& d) {
  std::vector<double> out(x.size(), 0.0);
  const auto c = [](std::int64_t k, std::int64_t n, std::int64_t len) {
    return std::cos(std::numbers::pi * static_cast<double>(k * (2 * n + 1)) / (2.0 * static_cast<double>(len)));
  };
  for (std::int64_t k3 = 0; k3 < d[2]; ++k3)
    for (std::int64_t k2 = 0; k2 < d[1]; ++k2)
      for (std::int64_t k1 = 0; k1 < d[0]; ++k1) {
        double s = 0.0;
        for (std::int64_t n3 = 0; n3 < d[2]; ++n3)
          for (std::int64_t n2 = 0; n2 < d[1]; ++n2)
            for (std::int64_t n1 = 0; n1 < d[0]; ++n1)
              s += x[static_cast<std::size_t>(n1 + d[0] * (n2 + d[1] * n3))] * c(k1, n1, d[0]) * c(k2, n2, d[1]) *
                   c(k3, n3, d[2]);
        out[static_cast<std::size_t>(k1 + d[0] * (k2 + d[1] * k3))] = s;
      }
  return out;
}

TEST(Dct3, MatchesTheDefinitionAndInvertsExactly) {
  for (const Dims3& d : {Dims3{5, 4, 3}, Dims3{6, 7, 1}, Dims3{1, 9, 2}, Dims3{8, 8, 8}}) {
    std::vector<double> x(static_cast<std::size_t>(d[0] * d[1] * d[2]));
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = std::sin(1.7 * static_cast<double>(i)) + 0.1 * static_cast<double>(i % 5);
    const std::vector<double> want = naive_dct(x, d);
    std::vector<double> y = x;
    const unwrap::Dct3<double> dct(d);
    dct.forward(y.data());
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-10) << d[0] << "×" << d[1] << "×" << d[2];
    dct.inverse(y.data());
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], x[i], 1e-12);
    std::vector<float> f(x.begin(), x.end());
    const unwrap::Dct3<float> dctf(d);
    dctf.forward(f.data());
    for (std::size_t i = 0; i < f.size(); ++i) ASSERT_NEAR(f[i], want[i], 1e-4);
  }
}

// Largest |u − truth − c| with c the mean difference over the selected voxels.
double deviation_from_constant(const Volume& u, const Volume& truth, const Volume* mask) {
  double mean = 0.0;
  std::int64_t n = 0;
  for (std::int64_t v = 0; v < u.voxels(); ++v)
    if (mask == nullptr || mask->data()[v] > 0.5) {
      mean += u.data()[v] - truth.data()[v];
      ++n;
    }
  mean /= static_cast<double>(n);
  double worst = 0.0;
  for (std::int64_t v = 0; v < u.voxels(); ++v)
    if (mask == nullptr || mask->data()[v] > 0.5) {
      const double d = std::abs(u.data()[v] - truth.data()[v] - mean);
      if (!(d <= worst)) worst = std::isfinite(d) ? d : INFINITY;
    }
  return worst;
}

// No mask: the DCT solves the Neumann problem exactly, so the smooth output is the truth plus a
// constant to round-off (measured 1.7e-13 rad at 64³, ±25 rad), a multiple of 2π after the
// circular alignment.
TEST(LaplacianUnwrap, WholeGridIsTheTruthUpToOneConstant) {
  for (const Vec3& voxel : {Vec3{1, 1, 1}, Vec3{0.8, 1.1, 2.0}}) {
    const Dims3 dims{64, 56, 40};
    const Volume truth = smooth_field(dims, voxel, 25.0);
    ASSERT_LT(max_step(truth), std::numbers::pi);
    const Volume phase = wrapped(truth);
    const Volume smooth = laplacian_unwrap(phase);
    EXPECT_LT(deviation_from_constant(smooth, truth, nullptr), 1e-9);
    expect_one_multiple(smooth, 0, truth, 0, everywhere(), 1e-9, "smooth output");
    LaplacianUnwrapOptions o;
    o.congruent = true;
    const Volume congruent = laplacian_unwrap(phase, 0, nullptr, o);
    expect_one_multiple(congruent, 0, truth, 0, everywhere(), 1e-9, "congruent output");
    expect_congruent(congruent, phase, everywhere());
  }
}

// With a mask: conjugate gradients in f32 to a relative residual of 1e-6; the smooth output
// measured within 2.2e-6 rad of truth + constant (64³, ±25 rad); bound asserted: 1e-4 rad.
TEST(LaplacianUnwrap, MaskedIsExactWhenCongruentAndCloseWhenSmooth) {
  const Dims3 dims{64, 64, 64};
  const Vec3 voxel{1, 1, 1};
  const Volume truth = smooth_field(dims, voxel, 25.0);
  const Volume phase = wrapped(truth);
  const Volume mask = ellipsoid_mask(dims, voxel, {2, -1, 0}, {28, 26, 24});
  const Volume smooth = laplacian_unwrap(phase, 0, &mask);
  EXPECT_LT(deviation_from_constant(smooth, truth, &mask), 1e-4);
  LaplacianUnwrapOptions o;
  o.congruent = true;
  const Volume congruent = laplacian_unwrap(phase, 0, &mask, o);
  expect_one_multiple(congruent, 0, truth, 0, inside(mask), 1e-9);
  for (std::int64_t v = 0; v < mask.voxels(); ++v)
    if (mask.data()[v] < 0.5) {
      ASSERT_EQ(congruent.data()[v], 0.0);
      ASSERT_EQ(smooth.data()[v], 0.0);
    }
}

// Prime side lengths (61, 47): the solver's preconditioner runs on a padded box (63×48×48).
TEST(LaplacianUnwrap, DisconnectedBlobsAreEachExact) {
  const Dims3 dims{61, 47, 48};
  const Vec3 voxel{1, 1, 1};
  const Volume truth = smooth_field(dims, voxel, 25.0);
  const Volume phase = wrapped(truth);
  const Volume a = ellipsoid_mask(dims, voxel, {-16, 0, 0}, {13, 18, 18});
  const Volume b = ellipsoid_mask(dims, voxel, {17, 2, -3}, {12, 15, 16});
  Volume mask = a.clone();
  for (std::int64_t v = 0; v < mask.voxels(); ++v) mask.data()[v] = std::max(a.data()[v], b.data()[v]);
  LaplacianUnwrapOptions o;
  o.congruent = true;
  const Volume u = laplacian_unwrap(phase, 0, &mask, o);
  expect_one_multiple(u, 0, truth, 0, inside(a), 1e-9, "blob a");
  expect_one_multiple(u, 0, truth, 0, inside(b), 1e-9, "blob b");
}

// Residues everywhere (strong noise): the congruent output still differs from the input by whole
// multiples of 2π, and the smooth output stays finite and within the input's range plus the
// noise-free field's (a residue cannot make it diverge).
TEST(LaplacianUnwrap, NoisyInputStaysCongruentAndBounded) {
  const Dims3 dims{40, 36, 32};
  const Volume truth = smooth_field(dims, {1, 1, 1}, 15.0);
  const Volume noise = noise_phase(dims, 21);
  Volume phase = truth.clone();
  for (std::int64_t v = 0; v < phase.voxels(); ++v)
    phase.data()[v] = wrap_phase(truth.data()[v] + 0.9 * noise.data()[v]);
  const Volume mask = ellipsoid_mask(dims, {1, 1, 1}, {0, 0, 0}, {18, 16, 14});
  LaplacianUnwrapOptions o;
  o.congruent = true;
  for (const Volume* m : {static_cast<const Volume*>(nullptr), &mask}) {
    const Volume u = laplacian_unwrap(phase, 0, m, o);
    expect_congruent(u, phase, m == nullptr ? everywhere() : inside(mask));
    const Volume s = laplacian_unwrap(phase, 0, m);
    for (double x : s.values()) ASSERT_TRUE(std::abs(x) < 100.0) << x;
  }
}

TEST(LaplacianUnwrap, FrameAndProgress) {
  const Dims3 dims{24, 24, 24};
  const Volume truth = smooth_field(dims, {1, 1, 1}, 10.0);
  Volume two = Volume::zeros(dims, truth.geometry(), 2);
  for (std::int64_t v = 0; v < truth.voxels(); ++v)
    two.frame(1)[static_cast<std::size_t>(v)] = wrap_phase(truth.data()[v]);
  std::vector<double> seen;
  LaplacianUnwrapOptions o;
  o.congruent = true;
  o.progress = [&](double f) { seen.push_back(f); };
  const Volume u = laplacian_unwrap(two, 1, nullptr, o);
  expect_one_multiple(u, 0, truth, 0, everywhere());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), 1.0);
}

// Measured: 12.1 bytes per voxel without a mask (output + the pieces' walk list), 24.0 with one
// (output + four f32 solver vectors); asserted with a little room.
TEST(LaplacianUnwrap, MemoryPerVoxel) {
  const Dims3 dims{48, 48, 48};
  const Volume phase = wrapped(smooth_field(dims, {1, 1, 1}, 10.0));
  const Volume mask = ellipsoid_mask(dims, {1, 1, 1}, {0, 0, 0}, {20, 20, 20});
  for (const Volume* m : {static_cast<const Volume*>(nullptr), &mask}) {
    reset_memory_peak();
    const std::int64_t base = memory_current();
    const Volume u = laplacian_unwrap(phase, 0, m);
    const double per_voxel = static_cast<double>(memory_peak() - base) / static_cast<double>(phase.voxels());
    EXPECT_LE(per_voxel, m == nullptr ? 12.5 : 24.5);
    EXPECT_GE(per_voxel, 8.0);
  }
}

TEST(LaplacianUnwrap, BadInputsAreNamed) {
  const Volume phase = Volume::zeros({8, 8, 8}, Geometry::isotropic(1.0));
  const Volume mask = Volume::zeros({8, 8, 9}, Geometry::isotropic(1.0));
  const auto expect = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect([&] { (void)laplacian_unwrap(phase, 0, &mask); }, "mask");
  expect([&] { (void)laplacian_unwrap(phase, 1); }, "echo 1");
  expect([&] { (void)laplacian_unwrap(Volume()); }, "empty");
}

}  // namespace
}  // namespace qsmcore
