// LBV (Laplacian boundary value) against exact and analytic oracles: a discretely harmonic field
// plus a known local field that is 0 on the mask's boundary layer (LBV must return that local field
// to its tolerance: the discrete problem's exact solution), dipole fields of spheres outside the
// mask (removed), a sphere at the centre of a ball mask (kept, less the harmonic function with its
// boundary values, known in closed form), and the head phantom's true local field. Plus the eroded
// boundary layer, thread counts, memory, progress and refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "analytic_fields.h"
#include "core/parallel.h"
#include "pdf_lbv_helpers.h"
#include "qsmcore/bgremove.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/phantom.h"

namespace qsmcore {
namespace {

const Vec3 kZ{0.0, 0.0, 1.0};
const Vec3 kTilted{std::sin(20.0 * std::numbers::pi / 180.0), 0.0, std::cos(20.0 * std::numbers::pi / 180.0)};

BfrOptions lbv_options(double tolerance = 0.0) {
  BfrOptions o;
  o.method = BfrMethod::Lbv;
  o.tolerance = tolerance;
  return o;
}

// An ellipsoid mask (semi-axes in mm) about the volume's centre.
Volume ellipsoid_mask(const Dims3& dims, const Vec3& vox, const Vec3& semi_mm) {
  Volume m = Volume::zeros(dims, Geometry::with_voxel(vox));
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i) {
        const double x = (i - dims[0] / 2) * vox[0] / semi_mm[0], y = (j - dims[1] / 2) * vox[1] / semi_mm[1],
                     z = (k - dims[2] / 2) * vox[2] / semi_mm[2];
        m.at(i, j, k) = x * x + y * y + z * z <= 1.0 ? 1.0 : 0.0;
      }
  return m;
}

// The mask's interior the slow way: inside, with all six neighbours inside and off the faces.
Volume interior_of(const Volume& mask) {
  Volume in = Volume::zeros_like(mask);
  const Dims3& n = mask.dims();
  for (std::int64_t k = 1; k + 1 < n[2]; ++k)
    for (std::int64_t j = 1; j + 1 < n[1]; ++j)
      for (std::int64_t i = 1; i + 1 < n[0]; ++i) {
        bool all = mask.at(i, j, k) > 0.5;
        for (int a = 0; a < 3; ++a)
          for (int s : {-1, 1}) {
            const std::int64_t di = a == 0 ? s : 0, dj = a == 1 ? s : 0, dk = a == 2 ? s : 0;
            all = all && mask.at(i + di, j + dj, k + dk) > 0.5;
          }
        in.at(i, j, k) = all ? 1.0 : 0.0;
      }
  return in;
}

// max |a − b| / max |b| over the whole volume; NaN-safe.
double max_relative_error(const Volume& a, const Volume& b) {
  double e = 0.0, m = 0.0;
  for (std::int64_t v = 0; v < a.voxels(); ++v) {
    const double d = std::abs(a.data()[v] - b.data()[v]);
    e = std::isnan(d) || std::isnan(e) ? std::nan("") : std::max(e, d);
    m = std::max(m, std::abs(b.data()[v]));
  }
  return e / m;
}

struct Grid {
  Dims3 dims;
  Vec3 voxel_mm;
};

class LbvExact : public ::testing::TestWithParam<Grid> {};

// f = a discretely harmonic polynomial (constant, linear, x² − y², x³ − 3xz², in mm: the 7-point
// Laplacian with voxel spacing of each is exactly 0) plus a local field l that is 0 off the
// interior. L·f = L·l at every interior voxel and l meets the Dirichlet condition, so l is the
// discrete problem's exact solution: LBV must return it to its tolerance, and 0 off the interior.
TEST_P(LbvExact, ReturnsTheLocalFieldUnderAHarmonicPolynomial) {
  const auto [dims, vox] = GetParam();
  const Volume mask = ellipsoid_mask(dims, vox, {26.0, 22.0, 24.0});
  const Volume interior = interior_of(mask);
  Volume local = Volume::zeros(dims, Geometry::with_voxel(vox));
  Volume field = Volume::zeros_like(local);
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i) {
        const double x = (i - dims[0] / 2) * vox[0], y = (j - dims[1] / 2) * vox[1], z = (k - dims[2] / 2) * vox[2];
        const double l =
            0.05 * std::sin(x / 5.0) * std::cos(y / 7.0) + 0.02 * std::exp(-(x * x + y * y + z * z) / 50.0);
        local.at(i, j, k) = interior.at(i, j, k) > 0.5 ? l : 0.0;
        field.at(i, j, k) =
            3.0 + 0.2 * y - 0.1 * z + 0.01 * (x * x - y * y) + 1e-4 * (x * x * x - 3.0 * x * z * z) + local.at(i, j, k);
      }
  const BfrResult r = remove_background(field, mask, kZ, lbv_options(1e-8));
  EXPECT_LT(max_relative_error(r.local_field, local), 1e-6);
  EXPECT_LE(r.residual, 1e-8);
  EXPECT_GT(r.iterations, 0);
}

INSTANTIATE_TEST_SUITE_P(Grids, LbvExact,
                         ::testing::Values(Grid{{64, 64, 64}, {1.0, 1.0, 1.0}}, Grid{{60, 52, 33}, {0.9, 1.0, 1.5}},
                                           Grid{{64, 64, 25}, {1.0, 1.0, 2.0}}));

// The harmonic polynomial alone: L·f is rounding error, and the local field is 0.
TEST(Lbv, HarmonicPolynomialAloneGivesZero) {
  const Dims3 dims{48, 40, 44};
  const Vec3 vox{1.0, 1.2, 0.8};
  const Volume mask = ellipsoid_mask(dims, vox, {20.0, 20.0, 15.0});
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i) {
        const double x = i * vox[0], y = j * vox[1], z = k * vox[2];
        field.at(i, j, k) = 100.0 + x - 2.0 * y + 0.03 * (y * y - z * z) + 0.02 * x * y;
      }
  const BfrResult r = remove_background(field, mask, kZ, lbv_options());
  double worst = 0.0;
  for (double v : r.local_field.values()) worst = std::isnan(v) ? v : std::max(worst, std::abs(v));
  EXPECT_LT(worst, 1e-9);
}

struct SphereCase {
  Vec3 voxel_mm;
  Vec3 b0;
};

class LbvSphereOutside : public ::testing::TestWithParam<SphereCase> {};

// Spheres outside a ball mask: their field is harmonic inside it and must go. What is left is
// the 7-point Laplacian's truncation error on the sampled r⁻³ field, O(h²·∂⁴f), not the solver's:
// measured 0.4–0.9 %.
TEST_P(LbvSphereOutside, RemovesTheirFieldInsideTheMask) {
  const SphereCase c = GetParam();
  const Dims3 dims{64, 60, 56};
  const Vec3 centre{32 * c.voxel_mm[0], 30 * c.voxel_mm[1], 28 * c.voxel_mm[2]};
  const Volume mask = qsmtest::ball_mask(dims, c.voxel_mm, centre, 18.0);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(c.voxel_mm));
  qsmtest::add_sphere_field(field, {{centre[0], centre[1], centre[2] + 27.0}, 4.0, 1.0}, c.b0);
  qsmtest::add_sphere_field(field, {{centre[0] + 25.0, centre[1], centre[2]}, 3.0, -2.0}, c.b0);
  qsmtest::add_sphere_field(field, {{centre[0] - 17.0, centre[1] + 17.0, centre[2] - 10.0}, 3.0, 1.5}, c.b0);
  const BfrResult r = remove_background(field, mask, c.b0, lbv_options());
  EXPECT_LT(qsmtest::demeaned_norm_ratio(r.local_field, field, r.mask), 0.02);
}

INSTANTIATE_TEST_SUITE_P(Grids, LbvSphereOutside,
                         ::testing::Values(SphereCase{{1.0, 1.0, 1.0}, kZ}, SphereCase{{1.0, 1.0, 1.0}, kTilted},
                                           SphereCase{{0.9, 1.0, 1.4}, kTilted}));

// A sphere at the centre of a ball mask of radius R: h = (Δχ/3)(a/r)³(3cos²θ − 1), whose boundary
// values (Δχ/3)(a/R)³(3cos²θ − 1) extend harmonically inside as H = (Δχ·a³/3)/R⁵·(3z² − r²).
// LBV keeps h − H; its Dirichlet layer lies half a voxel inside R, so R − ½ voxel stands for R.
TEST(Lbv, KeepsTheFieldOfASphereInsideTheMaskLessItsBoundaryExtension) {
  for (const Vec3& vox : {Vec3{1.0, 1.0, 1.0}, Vec3{0.9, 1.0, 1.4}}) {
    const Dims3 dims{64, 64, 64};
    const double a = 4.0, R = 22.0, dchi = 0.1, Reff = R - 0.5;
    const Vec3 c0{32 * vox[0], 32 * vox[1], 32 * vox[2]};
    const Volume mask = qsmtest::ball_mask(dims, vox, c0, R);
    Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
    qsmtest::add_sphere_field(field, {c0, a, dchi}, kZ);
    Volume expected = field.clone();
    for (std::int64_t k = 0; k < 64; ++k)
      for (std::int64_t j = 0; j < 64; ++j)
        for (std::int64_t i = 0; i < 64; ++i) {
          const double x = i * vox[0] - c0[0], y = j * vox[1] - c0[1], z = k * vox[2] - c0[2];
          expected.at(i, j, k) -= dchi * a * a * a / 3.0 / std::pow(Reff, 5) * (2.0 * z * z - x * x - y * y);
        }
    const BfrResult r = remove_background(field, mask, kZ, lbv_options());
    // Measured: 0.2–0.35 % from h − H over the whole mask (its boundary layer, where LBV gives 0,
    // included), against 5.6 % from h.
    EXPECT_LT(qsmtest::demeaned_nrmse(r.local_field, expected, mask), 1.0) << vox[2];
    EXPECT_GT(qsmtest::demeaned_nrmse(r.local_field, field, mask), 3.0) << vox[2];
  }
}

// The kept mask is the interior (mask voxels with all six neighbours inside, off the faces); the
// boundary layer is reported as eroded and is 0 in the output, as is everything outside.
TEST(Lbv, KeepsTheMaskLessItsBoundaryLayerAndSaysSo) {
  const Dims3 dims{40, 36, 30};
  const Vec3 vox{1.0, 1.0, 1.0};
  Volume mask = ellipsoid_mask(dims, vox, {17.0, 15.0, 20.0});  // reaches the z faces
  ASSERT_GT(mask.at(20, 18, 0), 0.5);
  Volume field = Volume::zeros_like(mask);
  qsmtest::add_sphere_field(field, {{20.0, 18.0, 15.0}, 3.0, 0.1}, kZ);
  const BfrResult r = remove_background(field, mask, kZ, lbv_options());
  const Volume interior = interior_of(mask);
  std::int64_t inside = 0, kept = 0;
  for (std::int64_t v = 0; v < mask.voxels(); ++v) {
    inside += mask.data()[v] > 0.5 ? 1 : 0;
    kept += interior.data()[v] > 0.5 ? 1 : 0;
    ASSERT_EQ(r.mask.data()[v], interior.data()[v]) << v;
    if (interior.data()[v] < 0.5) {
      ASSERT_EQ(r.local_field.data()[v], 0.0) << v;
    }
  }
  EXPECT_EQ(r.eroded_voxels, inside - kept);
  EXPECT_GT(r.eroded_voxels, 0);
}

// The head phantom (b̂ = z, skull and air background, shimmed): NRMSE of the local field over the
// whole true mask, the eroded boundary layer counting as error. Measured 74.5 % at 96³ (72 % at
// 128³, 69.5 % at 181×217×181), against 240 % for the total field. Most of what is lost is the
// local field's own harmonic part, which no background removal can tell from background.
TEST(Lbv, HeadPhantomLocalFieldOverTheWholeMask) {
  PhantomOptions po;
  po.dims = {96, 96, 96};
  const Phantom ph = make_head_phantom(po);
  const BfrResult r = remove_background(ph.total_field, ph.mask, po.b0_dir, lbv_options());
  const double total = qsmtest::demeaned_nrmse(ph.total_field, ph.local_field, ph.mask);
  const double lbv = qsmtest::demeaned_nrmse(r.local_field, ph.local_field, ph.mask);
  EXPECT_GT(total, 200.0);
  EXPECT_LT(lbv, 80.0);
}

// Same bits on 1, 2 and 3 threads: every voxel's update reads only the other colour, and sums run
// over planes in order. The fine grid is above the size from which LBV uses threads.
TEST(Lbv, ResultDoesNotDependOnTheThreadCount) {
  const Dims3 dims{64, 60, 56};
  const Vec3 vox{1.0, 1.0, 1.2};
  const Volume mask = ellipsoid_mask(dims, vox, {27.0, 25.0, 27.0});
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  qsmtest::add_sphere_field(field, {{32.0, 30.0, 34.0}, 3.0, 0.1}, kTilted);
  qsmtest::add_sphere_field(field, {{32.0, 30.0, 70.0}, 5.0, 2.0}, kTilted);
  std::vector<std::vector<double>> out;
  for (int t : {1, 2, 3}) {
    ScopedThreads st(t);
    const BfrResult r = remove_background(field, mask, kTilted, lbv_options(1e-6));
    out.emplace_back(r.local_field.values().begin(), r.local_field.values().end());
  }
  EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(out[0].data(), out[2].data(), out[0].size() * sizeof(double)), 0);
}

// Peak accounted bytes above what was held before, per voxel: the two f64 outputs (16 B) are the
// peak; the work arrays (interior bytes, coarse grids, plane buffers: about 2.3 B) are gone before
// the output mask is made. The 13 B target cannot hold two f64 output volumes.
TEST(Lbv, PeakMemoryIsItsTwoOutputVolumes) {
  const Dims3 dims{64, 64, 64};
  const Vec3 vox{1.0, 1.0, 1.0};
  const Volume mask = qsmtest::ball_mask(dims, vox, {32.0, 32.0, 32.0}, 26.0);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  qsmtest::add_sphere_field(field, {{32.0, 32.0, 32.0}, 4.0, 0.1}, kZ);
  reset_memory_peak();
  const std::int64_t base = memory_current();
  {
    const BfrResult r = remove_background(field, mask, kZ, lbv_options());
    ASSERT_GT(r.iterations, 0);
  }
  const double per_voxel = static_cast<double>(memory_peak() - base) / static_cast<double>(field.voxels());
  EXPECT_GE(per_voxel, 16.0);
  EXPECT_LE(per_voxel, 16.5);
}

TEST(Lbv, ReportsProgressUpToOneAndStopsAtItsCycleLimit) {
  const Dims3 dims{40, 40, 40};
  const Vec3 vox{1.0, 1.0, 1.0};
  const Volume mask = qsmtest::ball_mask(dims, vox, {20.0, 20.0, 20.0}, 16.0);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  qsmtest::add_sphere_field(field, {{21.0, 19.0, 20.0}, 3.0, 0.1}, kZ);
  std::vector<double> seen;
  BfrOptions o = lbv_options(1e-10);
  o.progress = [&](double f) { seen.push_back(f); };
  const BfrResult r = remove_background(field, mask, kZ, o);
  ASSERT_FALSE(seen.empty());
  for (double f : seen) EXPECT_TRUE(f >= 0.0 && f <= 1.0) << f;
  EXPECT_EQ(seen.back(), 1.0);
  EXPECT_LE(r.residual, 1e-10);
  o.max_iterations = 1;
  const BfrResult one = remove_background(field, mask, kZ, o);
  EXPECT_EQ(one.iterations, 1);
  EXPECT_GT(one.residual, 1e-10);
  EXPECT_LT(one.residual, 1.0);
}

// The field is read only inside the mask: NaN outside changes nothing.
TEST(Lbv, IgnoresTheFieldOutsideTheMask) {
  const Dims3 dims{40, 40, 40};
  const Vec3 vox{1.0, 1.0, 1.0};
  const Volume mask = qsmtest::ball_mask(dims, vox, {20.0, 20.0, 20.0}, 15.0);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  qsmtest::add_sphere_field(field, {{20.0, 20.0, 20.0}, 3.0, 0.1}, kZ);
  Volume poisoned = field.clone();
  for (std::int64_t v = 0; v < mask.voxels(); ++v)
    if (mask.data()[v] < 0.5) poisoned.data()[v] = std::nan("");
  const BfrResult a = remove_background(field, mask, kZ, lbv_options());
  const BfrResult b = remove_background(poisoned, mask, kZ, lbv_options());
  EXPECT_EQ(std::memcmp(a.local_field.data(), b.local_field.data(), a.local_field.voxels() * sizeof(double)), 0);
}

TEST(Lbv, RefusesBadInput) {
  const Dims3 dims{24, 24, 24};
  const Vec3 vox{1.0, 1.0, 1.0};
  const Volume mask = qsmtest::ball_mask(dims, vox, {12.0, 12.0, 12.0}, 9.0);
  Volume field = Volume::zeros(dims, Geometry::with_voxel(vox));
  Volume nan_inside = field.clone();
  nan_inside.at(12, 12, 12) = std::nan("");
  qsmtest::expect_invalid(nan_inside, mask, lbv_options(), "NaN inside the mask");
  Volume inf_inside = field.clone();
  inf_inside.at(12, 12, 12) = INFINITY;
  qsmtest::expect_invalid(inf_inside, mask, lbv_options(), "Inf inside the mask");
  const Volume two_frames = Volume::zeros(dims, Geometry::with_voxel(vox), 2);
  qsmtest::expect_invalid(two_frames, mask, lbv_options(), "a field of two frames");
  Volume sheet = Volume::zeros_like(field);
  for (std::int64_t j = 0; j < 24; ++j)
    for (std::int64_t i = 0; i < 24; ++i) sheet.at(i, j, 12) = 1.0;
  qsmtest::expect_invalid(field, sheet, lbv_options(), "a mask with no interior");
  BfrOptions negative = lbv_options();
  negative.tolerance = -1.0;
  qsmtest::expect_invalid(field, mask, negative, "a negative tolerance");
  const Volume other = Volume::zeros({24, 24, 25}, Geometry::with_voxel(vox));
  qsmtest::expect_invalid(field, other, lbv_options(), "a mask on another grid");
}

}  // namespace
}  // namespace qsmcore
