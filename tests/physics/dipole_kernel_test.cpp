// Dipole kernel: closed-form values (along b̂, across it, on the magic-angle cone), the
// convention table of physics.md §2 (DC value, b̂ normalisation, ε), D(−k) = D(k), the range
// [−2/3, 1/3], anisotropic voxels entering through the field of view, and the half spectrum.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <numbers>

#include "qsmcore/error.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace {

const KernelOptions kVariants[] = {KernelOptions::lpcnn_modl(), KernelOptions::nextqsm(),
                                   KernelOptions::qsm_forward()};

std::int64_t neg(std::int64_t p, std::int64_t n) { return (n - p) % n; }

TEST(DipoleKernel, ClosedFormValuesAlongAcrossAndOnTheCone) {
  const Dims3 d{16, 16, 16};
  const Vec3 v{1, 1, 1}, z{0, 0, 1};
  for (const auto& o : kVariants) {
    // k ∥ b̂: 1/3 − 1; k ⊥ b̂: 1/3; k along (1,1,1) is at 54.7° to z: on the cone, D = 0.
    // NeXtQSM's ε = FLT_EPSILON in |k|² + ε shifts these by up to ε/|k|² ≈ 1e-5 here.
    const double tol = o.eps > 0 ? 2e-5 : 1e-15;
    EXPECT_NEAR(dipole_value(d, v, z, o, 0, 0, 3), -2.0 / 3.0, tol);
    EXPECT_NEAR(dipole_value(d, v, z, o, 2, 0, 0), 1.0 / 3.0, 1e-15);
    EXPECT_NEAR(dipole_value(d, v, z, o, 1, 1, 1), 0.0, tol);
    EXPECT_NEAR(dipole_value(d, v, z, o, 15, 15, 15), 0.0, tol);  // −(1,1,1)
  }
}

TEST(DipoleKernel, DcValueFollowsTheConvention) {
  const Dims3 d{8, 10, 12};
  const Vec3 b{0.2, 0.1, 0.97};
  EXPECT_EQ(dipole_value(d, {1, 1, 1}, b, KernelOptions::lpcnn_modl(), 0, 0, 0), 0.0);
  EXPECT_EQ(dipole_value(d, {1, 1, 1}, b, KernelOptions::nextqsm(), 0, 0, 0), 1.0 / 3.0);
  EXPECT_EQ(dipole_value(d, {1, 1, 1}, b, KernelOptions::qsm_forward(), 0, 0, 0), 1.0 / 3.0);
}

// physics.md §2 test 1: the variants agree everywhere except at DC and at the ε level. With a
// unit b̂, NeXtQSM's value differs from the exact one by (k·b)²·ε/(|k|²(|k|²+ε)) ≤ ε/|k|².
TEST(DipoleKernel, VariantsAgreeExceptAtDcAndEpsilon) {
  const Dims3 d{12, 9, 10};
  const Vec3 vox{0.8, 1.0, 1.6};
  const double t = 20.0 * std::numbers::pi / 180.0;
  const Vec3 b{0.0, std::sin(t), std::cos(t)};
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        if (i == 0 && j == 0 && k == 0) continue;
        const double a = dipole_value(d, vox, b, KernelOptions::lpcnn_modl(), i, j, k);
        const double q = dipole_value(d, vox, b, KernelOptions::qsm_forward(), i, j, k);
        const double n = dipole_value(d, vox, b, KernelOptions::nextqsm(), i, j, k);
        EXPECT_NEAR(a, q, 1e-15);
        const double kx = (i < 6 ? i : i - 12) / (12 * 0.8), ky = (j < 5 ? j : j - 9) / (9 * 1.0),
                     kz = (k < 5 ? k : k - 10) / (10 * 1.6);
        const double k2 = kx * kx + ky * ky + kz * kz;
        EXPECT_LE(std::abs(a - n), FLT_EPSILON / k2 * (1 + 1e-9) + 1e-15) << i << "," << j << "," << k;
      }
}

TEST(DipoleKernel, RealSymmetricAndBoundedForAnyDirection) {
  // Odd sizes: every index has an exact mirror frequency, so D(−k) = D(k) must hold exactly.
  const Dims3 d{9, 11, 7};
  const Vec3 vox{1.0, 0.7, 2.0};
  const Vec3 b{0.3, -0.4, 0.866};
  for (const auto& o : {KernelOptions::lpcnn_modl(), KernelOptions::qsm_forward()})
    for (std::int64_t k = 0; k < d[2]; ++k)
      for (std::int64_t j = 0; j < d[1]; ++j)
        for (std::int64_t i = 0; i < d[0]; ++i) {
          const double v = dipole_value(d, vox, b, o, i, j, k);
          EXPECT_EQ(v, dipole_value(d, vox, b, o, neg(i, 9), neg(j, 11), neg(k, 7)));
          EXPECT_GE(v, -2.0 / 3.0 - 1e-15);
          EXPECT_LE(v, 1.0 / 3.0 + 1e-15);
        }
}

TEST(DipoleKernel, AnisotropicVoxelsEnterThroughTheFieldOfView) {
  // 32 voxels of 1 mm and 16 voxels of 2 mm span the same 32 mm, so index 1 along y and along z
  // are the same frequency: k = (0, 1/32, 1/32) mm⁻¹, 45° from z, D = 1/3 − 1/2.
  const Dims3 d{32, 32, 16};
  EXPECT_NEAR(dipole_value(d, {1, 1, 2}, {0, 0, 1}, KernelOptions::lpcnn_modl(), 0, 1, 1), -1.0 / 6.0, 1e-15);
  // On an isotropic grid of the same shape the same indices are not 45°: kz = 1/16.
  EXPECT_NEAR(dipole_value(d, {1, 1, 1}, {0, 0, 1}, KernelOptions::lpcnn_modl(), 0, 1, 1), 1.0 / 3.0 - 0.8, 1e-15);
}

TEST(DipoleKernel, NextQsmDoesNotRenormaliseB) {
  const Dims3 d{8, 8, 8};
  const double kz = 1.0 / 8.0;
  const double want = 1.0 / 3.0 - 4.0 * kz * kz / (kz * kz + FLT_EPSILON);
  EXPECT_NEAR(dipole_value(d, {1, 1, 1}, {0, 0, 2}, KernelOptions::nextqsm(), 0, 0, 1), want, 1e-15);
  EXPECT_NEAR(dipole_value(d, {1, 1, 1}, {0, 0, 2}, KernelOptions::lpcnn_modl(), 0, 0, 1), -2.0 / 3.0, 1e-15);
}

TEST(DipoleKernel, HalfSpectrumIsTheSymmetrisedFullKernel) {
  // Even sizes and an oblique b̂: Nyquist planes are their own mirror index but not their own
  // mirror frequency, so the stored value is the average (what real(ifft(D·fft(v))) sees).
  const Dims3 d{8, 6, 4};
  const Vec3 vox{1, 1.5, 2}, b{0.5, 0.5, 0.7071};
  const DipoleKernel kern = make_kernel(d, vox, b, KernelOptions::lpcnn_modl());
  ASSERT_EQ(kern.half_nx(), 5);
  for (std::int64_t k = 0; k < 4; ++k)
    for (std::int64_t j = 0; j < 6; ++j)
      for (std::int64_t i = 0; i < 5; ++i) {
        const auto o = KernelOptions::lpcnn_modl();
        const double want =
            0.5 * (dipole_value(d, vox, b, o, i, j, k) + dipole_value(d, vox, b, o, neg(i, 8), neg(j, 6), neg(k, 4)));
        EXPECT_NEAR(kern.half(i, j, k), want, 1e-15);
      }
}

TEST(DipoleKernel, RejectsADegenerateGridOrDirection) {
  EXPECT_THROW(make_kernel({8, 0, 8}, {1, 1, 1}, {0, 0, 1}, {}), Error);
  EXPECT_THROW(make_kernel({8, 8, 8}, {1, 0, 1}, {0, 0, 1}, {}), Error);
  EXPECT_THROW(make_kernel({8, 8, 8}, {1, 1, 1}, {0, 0, 0}, {}), Error);
}

}  // namespace
}  // namespace qsmcore
