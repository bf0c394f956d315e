// Forward model against analytic fields: a uniformly magnetised sphere (physics.md §2 sphere
// test), a single Fourier mode (field = D(k)·χ exactly on a periodic grid), and a uniform χ
// with qsm-forward's corner-value padding (field = χ/3 everywhere).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "qsmcore/physics.h"
#include "support/test_data.h"

namespace qsmcore {
namespace {

// Fraction of voxel (i,j,k) inside the sphere |x − c| < a (mm), by 6³ sub-samples: partial
// volumes keep the discrete sphere's dipole moment equal to the continuous one.
Volume sphere(const Dims3& d, const Vec3& vox, const Vec3& c, double a, double chi) {
  Volume v = Volume::zeros(d, Geometry::with_voxel(vox));
  constexpr int s = 6;
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const double p[3] = {i * vox[0] - c[0], j * vox[1] - c[1], k * vox[2] - c[2]};
        if (std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]) > a + 2.0 * std::max({vox[0], vox[1], vox[2]}))
          continue;
        int in = 0;
        for (int u = 0; u < s; ++u)
          for (int w = 0; w < s; ++w)
            for (int t = 0; t < s; ++t) {
              const double x = p[0] + ((u + 0.5) / s - 0.5) * vox[0], y = p[1] + ((w + 0.5) / s - 0.5) * vox[1],
                           z = p[2] + ((t + 0.5) / s - 0.5) * vox[2];
              in += x * x + y * y + z * z < a * a;
            }
        v.at(i, j, k) = chi * in / double(s * s * s);
      }
  return v;
}

// Outside: (Δχ/3)(a/r)³(3cos²θ − 1), θ from b̂; the gate is 2 % of the peak 2Δχ/3.
void expect_sphere_field(const Dims3& d, const Vec3& vox, const Vec3& b) {
  const double a = 7.0, chi = 0.1;
  const Vec3 c{d[0] / 2 * vox[0], d[1] / 2 * vox[1], d[2] / 2 * vox[2]};
  const Volume s = sphere(d, vox, c, a, chi);
  ForwardOptions o;
  o.kernel = KernelOptions::lpcnn_modl();  // D(0) = 0
  o.padding = Padding::ZeroTo2N;
  const Volume f = forward_field(s, b, o);
  const double gate = 0.02 * 2.0 * chi / 3.0, min_r = a + 2.0 * std::max({vox[0], vox[1], vox[2]});
  double worst = 0.0;
  std::int64_t checked = 0;
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const double p[3] = {i * vox[0] - c[0], j * vox[1] - c[1], k * vox[2] - c[2]};
        const double r = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
        if (r < min_r) continue;
        const double cos_t = (p[0] * b[0] + p[1] * b[1] + p[2] * b[2]) / r;
        const double want = chi / 3.0 * std::pow(a / r, 3) * (3.0 * cos_t * cos_t - 1.0);
        worst = qsmtest::worse(worst, std::abs(f.at(i, j, k) - want));
        ++checked;
      }
  EXPECT_GT(checked, 1000);
  EXPECT_LE(worst, gate) << "worst error " << worst << " ppm vs gate " << gate;
}

TEST(ForwardModel, SphereMatchesTheAnalyticDipoleFieldAxial) { expect_sphere_field({48, 48, 48}, {1, 1, 1}, {0, 0, 1}); }

TEST(ForwardModel, SphereMatchesTheAnalyticDipoleFieldTiltedAnisotropic) {
  const double t = 20.0 * std::numbers::pi / 180.0;
  expect_sphere_field({48, 40, 32}, {1.0, 1.2, 1.5}, {std::sin(t), 0.0, std::cos(t)});
}

TEST(ForwardModel, SingleFourierModeIsScaledByTheKernelValue) {
  const Dims3 d{16, 12, 10};
  const Vec3 vox{1.0, 1.5, 2.0}, b{0.3, 0.2, 0.933};
  const std::int64_t m[3] = {2, 1, 3};
  Volume chi = Volume::zeros(d, Geometry::with_voxel(vox));
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i)
        chi.at(i, j, k) = std::cos(2 * std::numbers::pi * (double(m[0] * i) / d[0] + double(m[1] * j) / d[1] +
                                                          double(m[2] * k) / d[2]));
  ForwardOptions o;
  o.kernel = KernelOptions::lpcnn_modl();
  o.padding = Padding::None;
  const Volume f = forward_field(chi, b, o);
  const double D = dipole_value(d, vox, b, o.kernel, m[0], m[1], m[2]);
  for (std::int64_t i = 0; i < chi.voxels(); ++i) EXPECT_NEAR(f.data()[i], D * chi.data()[i], 1e-12);
}

TEST(ForwardModel, UniformChiWithCornerPaddingGivesAThirdOfIt) {
  Volume chi = Volume::zeros({10, 12, 8}, Geometry::isotropic(1.0));
  for (double& x : chi.values()) x = 0.3;
  const Volume f = forward_field(chi, {0, 0, 1});  // qsm-forward defaults: D(0) = 1/3, corner fill
  for (double x : f.values()) EXPECT_NEAR(x, 0.1, 1e-12);
}

}  // namespace
}  // namespace qsmcore
