// PDF (projection onto dipole fields) against analytic fields: spheres of uniform χ outside the mask
// (their field inside it is background and must go), a sphere inside (its field must stay), a
// source beyond the volume's faces (what the padding is for), and the head phantom's true local
// field. Plus weights, thread counts, memory, progress and refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "analytic_fields.h"
#include "bgremove/pdf_grid.h"
#include "core/parallel.h"
#include "pdf_lbv_helpers.h"
#include "physics/pcg.h"
#include "qsmcore/bgremove.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/phantom.h"

namespace qsmcore {
namespace {

const Vec3 kZ{0.0, 0.0, 1.0};
// 20° from z in the x-z plane: an oblique acquisition.
const Vec3 kTilted{std::sin(20.0 * std::numbers::pi / 180.0), 0.0, std::cos(20.0 * std::numbers::pi / 180.0)};

BfrOptions pdf_options() {
  BfrOptions o;
  o.method = BfrMethod::Pdf;
  return o;
}

struct Case {
  Vec3 voxel_mm;
  Vec3 b0;
};

class PdfSphereOutside : public ::testing::TestWithParam<Case> {};

// Three spheres outside a ball mask (along B0, across it, and oblique; Δχ of both signs): their
// field inside the mask is harmonic, fitted by sources outside the mask, and must be removed.
TEST_P(PdfSphereOutside, RemovesTheirFieldInsideTheMask) {
  const Case c = GetParam();
  const Dims3 dims{64, 60, 56};
  const Vec3 centre{32 * c.voxel_mm[0], 30 * c.voxel_mm[1], 28 * c.voxel_mm[2]};
  const Volume mask = qsmtest::ball_mask(dims, c.voxel_mm, centre, 18.0);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(c.voxel_mm));
  qsmtest::add_sphere_field(field, {{centre[0], centre[1], centre[2] + 25.0}, 4.0, 1.0}, c.b0);
  qsmtest::add_sphere_field(field, {{centre[0] + 24.0, centre[1], centre[2]}, 3.0, -2.0}, c.b0);
  qsmtest::add_sphere_field(field, {{centre[0] - 17.0, centre[1] + 17.0, centre[2] - 10.0}, 3.0, 1.5}, c.b0);
  const BfrResult r = remove_background(field, mask, c.b0, pdf_options());
  // Measured: 0.3–0.6 % of the field is left after the default 20 iterations.
  EXPECT_LT(qsmtest::demeaned_norm_ratio(r.local_field, field, mask), 0.02);
  EXPECT_EQ(r.eroded_voxels, 0);
  for (std::int64_t v = 0; v < mask.voxels(); ++v) {
    ASSERT_EQ(r.mask.data()[v], mask.data()[v]) << v;
    if (!mask_inside(mask.data()[v])) {
      ASSERT_EQ(r.local_field.data()[v], 0.0) << v;
    }
  }
  EXPECT_GT(r.iterations, 0);
  EXPECT_LE(r.iterations, 20);
  EXPECT_TRUE(std::isfinite(r.residual));
}

INSTANTIATE_TEST_SUITE_P(Grids, PdfSphereOutside,
                         ::testing::Values(Case{{1.0, 1.0, 1.0}, kZ}, Case{{1.0, 1.0, 1.0}, kTilted},
                                           Case{{0.9, 1.0, 1.4}, kTilted}));

// A sphere at the centre of a ball mask: its field h = (Δχ/3)(a/r)³(3cos²θ − 1) is the local
// field, but its best approximation by harmonic functions on the ball — what sources outside can
// make — is not zero: by symmetry it is the projection onto r²·P₂, c·(3z² − r²) with
// c = (Δχ·a³/3)·7(R² − a²)/(2R⁷), which takes (21/4)(a/R)³ of h's energy (here 17 % of its norm).
// PDF keeps h less that projection.
TEST(Pdf, KeepsTheFieldOfASphereInsideTheMaskLessItsHarmonicProjection) {
  const Dims3 dims{64, 64, 64};
  const Vec3 vox{1.0, 1.0, 1.0};
  const double a = 4.0, R = 22.0, dchi = 0.1;
  const Volume mask = qsmtest::ball_mask(dims, vox, {32.0, 32.0, 32.0}, R);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  qsmtest::add_sphere_field(field, {{32.0, 32.0, 32.0}, a, dchi}, kZ);
  Volume expected = field.clone();
  const double c = dchi * a * a * a / 3.0 * 7.0 * (R * R - a * a) / (2.0 * std::pow(R, 7));
  for (std::int64_t k = 0; k < 64; ++k)
    for (std::int64_t j = 0; j < 64; ++j)
      for (std::int64_t i = 0; i < 64; ++i) {
        const double x = i - 32.0, y = j - 32.0, z = k - 32.0;
        expected.at(i, j, k) -= c * (2.0 * z * z - x * x - y * y);
      }
  const BfrResult r = remove_background(field, mask, kZ, pdf_options());
  // Measured: 4.5 % from h less its projection, 17.4 % from h (the projection alone: 16.7 %).
  EXPECT_LT(qsmtest::demeaned_nrmse(r.local_field, expected, mask), 7.0);
  EXPECT_LT(qsmtest::demeaned_nrmse(r.local_field, field, mask), 20.0);
}

// A mask that reaches both z faces, and a sphere below the volume: the only room for a source
// "below the first slice" is the padding (without it, the periodic grid leaves 87 % of this field
// in place). The field must be removed all the same.
TEST(Pdf, RemovesASourceBeyondTheVolumesFaces) {
  const Dims3 dims{64, 64, 64};
  const Vec3 vox{1.0, 1.0, 1.0};
  Volume mask = Volume::zeros(dims, Geometry::with_voxel(vox));
  for (std::int64_t k = 0; k < 64; ++k)
    for (std::int64_t j = 0; j < 64; ++j)
      for (std::int64_t i = 0; i < 64; ++i) {
        const double x = (i - 32.0) / 24.0, y = (j - 32.0) / 26.0, z = (k - 32.0) / 37.0;
        mask.at(i, j, k) = x * x + y * y + z * z <= 1.0 ? 1.0 : 0.0;
      }
  ASSERT_GT(mask.at(32, 32, 0), 0.5);
  ASSERT_GT(mask.at(32, 32, 63), 0.5);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  qsmtest::add_sphere_field(field, {{32.0, 32.0, -10.0}, 6.0, 1.0}, kZ);
  const BfrResult r = remove_background(field, mask, kZ, pdf_options());
  EXPECT_LT(qsmtest::demeaned_norm_ratio(r.local_field, field, mask), 0.02);
}

// The head phantom (b̂ = z, skull and air background, shimmed): NRMSE of the local field over the
// whole true mask. Measured 71.7 % at 64³ (69.2 % at 128³, 68.4 % at 181×217×181) against 288 %
// for the total field. PDF on the true local field alone loses as much (69.5 % at 96³): what is
// lost is the local field's part that sources outside the mask could also make.
TEST(Pdf, HeadPhantomLocalFieldOverTheWholeMask) {
  PhantomOptions po;
  po.dims = {64, 64, 64};
  const Phantom ph = make_head_phantom(po);
  const BfrResult r = remove_background(ph.total_field, ph.mask, po.b0_dir, pdf_options());
  EXPECT_GT(qsmtest::demeaned_nrmse(ph.total_field, ph.local_field, ph.mask), 250.0);
  EXPECT_LT(qsmtest::demeaned_nrmse(r.local_field, ph.local_field, ph.mask), 76.0);
}

Volume outside_spheres_field(const Dims3& dims, const Vec3& vox, Volume& mask) {
  mask = qsmtest::ball_mask(dims, vox, {24.0, 24.0, 24.0}, 15.0);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  qsmtest::add_sphere_field(field, {{24.0, 24.0, 45.0}, 4.0, 1.0}, kTilted);
  qsmtest::add_sphere_field(field, {{4.0, 30.0, 20.0}, 3.0, -2.0}, kTilted);
  return field;
}

// Noise-free background alone: the answer is 0 whatever the weights, so weights that vary by a
// factor of 4 must leave as little as none do, and a uniform weight is no weight at all. Voxel-wise
// random weights slow CGLS down (20 iterations leave 2.3 % against 0.5 % unweighted), so both run
// 100 here (then 0.29 % and 0.44 %).
TEST(Pdf, WeightsChangeNothingOnNoiseFreeData) {
  const Dims3 dims{48, 48, 48};
  const Vec3 vox{1.0, 1.0, 1.0};
  Volume mask;
  const Volume field = outside_spheres_field(dims, vox, mask);
  Volume weights = Volume::zeros_like(field);
  physics::Pcg32 rng(7);
  for (double& w : weights.values()) w = 0.5 + 1.5 * rng.uniform();
  Volume uniform = Volume::zeros_like(field);
  for (double& w : uniform.values()) w = 5.0;
  BfrOptions o = pdf_options();
  o.max_iterations = 100;
  o.tolerance = 1e-12;
  const BfrResult none = remove_background(field, mask, kTilted, o);
  o.weights = &weights;
  const BfrResult varied = remove_background(field, mask, kTilted, o);
  o.weights = &uniform;
  const BfrResult flat = remove_background(field, mask, kTilted, o);
  const double left_none = qsmtest::demeaned_norm_ratio(none.local_field, field, mask);
  const double left_varied = qsmtest::demeaned_norm_ratio(varied.local_field, field, mask);
  EXPECT_LT(left_none, 0.01);
  EXPECT_LT(left_varied, 0.01);
  for (std::int64_t v = 0; v < field.voxels(); ++v)
    ASSERT_NEAR(flat.local_field.data()[v], none.local_field.data()[v], 1e-9) << v;
}

// Same bits on 1, 2 and 3 threads: FFTW's transforms are, and every sum runs over planes in order.
// The grid (72×64×60) is above the size from which PDF uses threads at all.
TEST(Pdf, ResultDoesNotDependOnTheThreadCount) {
  const Dims3 dims{64, 60, 56};
  const Vec3 vox{1.0, 1.1, 1.3};
  Volume mask;
  Volume field = outside_spheres_field(dims, vox, mask);
  qsmtest::add_sphere_field(field, {{22.0, 22.0, 22.0}, 3.0, 0.1}, kTilted);
  std::vector<std::vector<double>> out;
  for (int t : {1, 2, 3}) {
    ScopedThreads st(t);
    const BfrResult r = remove_background(field, mask, kTilted, pdf_options());
    out.emplace_back(r.local_field.values().begin(), r.local_field.values().end());
  }
  EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(out[0].data(), out[2].data(), out[0].size() * sizeof(double)), 0);
}

// Peak accounted bytes above what was held before, per volume voxel, against the 56 B target.
// About 14 B per padded voxel (the direction p, the f32 FFT's real and half-spectrum buffers, the
// f32 kernel) plus the f64 output that holds the background estimate and a byte mask; at 64³ the
// padded grid (72³) is 1.42 volumes: 29 B measured.
TEST(Pdf, PeakMemoryWithinItsTarget) {
  const Dims3 dims{64, 64, 64};
  const Vec3 vox{1.0, 1.0, 1.0};
  const Volume mask = qsmtest::ball_mask(dims, vox, {32.0, 32.0, 32.0}, 24.0);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  qsmtest::add_sphere_field(field, {{32.0, 32.0, 60.0}, 3.0, 1.0}, kZ);
  reset_memory_peak();
  const std::int64_t base = memory_current();
  {
    const BfrResult r = remove_background(field, mask, kZ, pdf_options());
    ASSERT_GT(r.iterations, 0);
  }
  const double per_voxel = static_cast<double>(memory_peak() - base) / static_cast<double>(field.voxels());
  EXPECT_GE(per_voxel, 16.0);  // the two f64 outputs at least
  EXPECT_LE(per_voxel, 56.0);
}

TEST(Pdf, ReportsProgressUpToOneAndStopsAtItsIterationLimit) {
  const Dims3 dims{40, 40, 40};
  Volume mask;
  const Volume field = outside_spheres_field(dims, {1.0, 1.0, 1.0}, mask);
  std::vector<double> seen;
  BfrOptions o = pdf_options();
  o.max_iterations = 7;
  o.tolerance = 1e-12;
  o.progress = [&](double f) { seen.push_back(f); };
  const BfrResult r = remove_background(field, mask, kTilted, o);
  EXPECT_EQ(r.iterations, 7);
  EXPECT_GT(r.residual, 1e-12);
  EXPECT_LT(r.residual, 1.0);
  ASSERT_FALSE(seen.empty());
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i], seen[i - 1]);
  EXPECT_GT(seen.front(), 0.0);
  EXPECT_EQ(seen.back(), 1.0);
}

// The field is read only inside the mask: NaN outside changes nothing.
TEST(Pdf, IgnoresTheFieldOutsideTheMask) {
  const Dims3 dims{40, 40, 40};
  Volume mask;
  const Volume field = outside_spheres_field(dims, {1.0, 1.0, 1.0}, mask);
  Volume poisoned = field.clone();
  for (std::int64_t v = 0; v < mask.voxels(); ++v)
    if (mask.data()[v] < 0.5) poisoned.data()[v] = std::nan("");
  const BfrResult a = remove_background(field, mask, kTilted, pdf_options());
  const BfrResult b = remove_background(poisoned, mask, kTilted, pdf_options());
  EXPECT_EQ(std::memcmp(a.local_field.data(), b.local_field.data(), a.local_field.voxels() * sizeof(double)), 0);
}

TEST(Pdf, RefusesBadInput) {
  const Dims3 dims{24, 24, 24};
  const Vec3 vox{1.0, 1.0, 1.0};
  const Volume mask = qsmtest::ball_mask(dims, vox, {12.0, 12.0, 12.0}, 8.0);
  const Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  Volume nan_inside = field.clone();
  nan_inside.at(12, 12, 12) = std::nan("");
  qsmtest::expect_invalid(nan_inside, mask, pdf_options(), "NaN inside the mask");
  qsmtest::expect_invalid(Volume::zeros(dims, Geometry::with_voxel(vox), 2), mask, pdf_options(),
                          "a field of two frames");
  const auto with_weights = [&](double inside_value, const char* what) {
    Volume w = Volume::zeros_like(field);
    for (double& x : w.values()) x = 1.0;
    w.at(12, 12, 12) = inside_value;
    if (inside_value == 0.0)
      for (double& x : w.values()) x = 0.0;
    BfrOptions o = pdf_options();
    o.weights = &w;
    qsmtest::expect_invalid(field, mask, o, what);
  };
  with_weights(-1.0, "a negative weight inside the mask");
  with_weights(std::nan(""), "a NaN weight inside the mask");
  with_weights(INFINITY, "an infinite weight inside the mask");
  with_weights(0.0, "weights that are zero everywhere inside the mask");
  const Volume other = Volume::zeros({24, 24, 23}, Geometry::with_voxel(vox));
  BfrOptions o = pdf_options();
  o.weights = &other;
  qsmtest::expect_invalid(field, mask, o, "weights on another grid");
  o = pdf_options();
  o.max_iterations = -1;
  qsmtest::expect_invalid(field, mask, o, "a negative iteration limit");
}

// The FFT grid: each axis at least n + max(⌈n/16⌉, 4), and the first size from there whose prime
// factors are 2, 3 and 5 only (checked by trial division from scratch).
TEST(Pdf, FftGridIsTheFirstSmoothSizePastThePadding) {
  const auto smooth = [](std::int64_t m) {
    for (std::int64_t p : {2, 3, 5})
      while (m % p == 0) m /= p;
    return m == 1;
  };
  for (std::int64_t n : {1, 7, 24, 64, 96, 128, 181, 217, 256, 333}) {
    const std::int64_t least = n + std::max<std::int64_t>((n + 15) / 16, 4);
    const std::int64_t g = bgremove::pdf_fft_grid({n, n, n})[0];
    EXPECT_GE(g, least) << n;
    EXPECT_TRUE(smooth(g)) << n;
    for (std::int64_t m = least; m < g; ++m) EXPECT_FALSE(smooth(m)) << n << " " << m;
  }
  const Dims3 g = bgremove::pdf_fft_grid({181, 217, 181});
  EXPECT_EQ(g, (Dims3{200, 240, 200}));
}

}  // namespace
}  // namespace qsmcore
