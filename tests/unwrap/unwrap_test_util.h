// Shared pieces of the unwrapping tests: residue-free smooth phase fields with known truth, their
// wrapped versions, masks, and the two checks every test makes — exactness (unwrapped − truth is
// one multiple of 2π over a region) and congruence (unwrapped − wrapped is a multiple of 2π in
// every voxel). Checks fail on NaN/Inf.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <string>

#include "physics/pcg.h"
#include "qsmcore/physics.h"
#include "qsmcore/volume.h"

namespace qsmcore::unwrap_test {

inline constexpr double kTwoPi = 2.0 * std::numbers::pi;

inline Volume filled(const Dims3& dims, const Vec3& voxel, const std::function<double(double, double, double)>& f) {
  Volume v = Volume::zeros(dims, Geometry::with_voxel(voxel));
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i) {
        // Coordinates in mm from the grid's centre, so an anisotropic grid samples the same field.
        const double x = (static_cast<double>(i) - 0.5 * static_cast<double>(dims[0] - 1)) * voxel[0];
        const double y = (static_cast<double>(j) - 0.5 * static_cast<double>(dims[1] - 1)) * voxel[1];
        const double z = (static_cast<double>(k) - 0.5 * static_cast<double>(dims[2] - 1)) * voxel[2];
        v.at(i, j, k) = f(x, y, z);
      }
  return v;
}

/// A smooth field (rad) of three Gaussians and a quadratic, its largest |value| `amplitude`:
/// several wraps over a 48–80 mm grid, neighbour steps well below π (checked by callers).
inline Volume smooth_field(const Dims3& dims, const Vec3& voxel, double amplitude) {
  const double lx = dims[0] * voxel[0], ly = dims[1] * voxel[1], lz = dims[2] * voxel[2];
  const auto g = [](double dx, double dy, double dz, double s) {
    return std::exp(-(dx * dx + dy * dy + dz * dz) / (2.0 * s * s));
  };
  Volume v = filled(dims, voxel, [&](double x, double y, double z) {
    const double u = x / lx, w = y / ly, t = z / lz;  // about −0.5..0.5
    return 1.0 * g(u - 0.15, w + 0.1, t, 0.18) - 0.8 * g(u + 0.2, w - 0.15, t + 0.1, 0.14) +
           0.6 * g(u, w + 0.2, t - 0.2, 0.2) + 0.5 * u * u - 0.7 * u * w + 0.4 * t + 0.3 * w * t;
  });
  double peak = 0.0;
  for (double x : v.values()) peak = std::max(peak, std::abs(x));
  for (double& x : v.values()) x *= amplitude / peak;
  return v;
}

inline Volume wrapped(const Volume& truth) {
  Volume w = truth.clone();
  for (double& x : w.values()) x = wrap_phase(x);
  return w;
}

/// Largest |difference| between neighbours (any axis) over voxels selected by `mask` (null = all).
inline double max_step(const Volume& v, const Volume* mask = nullptr) {
  double m = 0.0;
  const auto in = [&](std::int64_t i, std::int64_t j, std::int64_t k) {
    return mask == nullptr || mask->at(i, j, k) > 0.5;
  };
  for (std::int64_t k = 0; k < v.nz(); ++k)
    for (std::int64_t j = 0; j < v.ny(); ++j)
      for (std::int64_t i = 0; i < v.nx(); ++i) {
        if (!in(i, j, k)) continue;
        if (i + 1 < v.nx() && in(i + 1, j, k)) m = std::max(m, std::abs(v.at(i + 1, j, k) - v.at(i, j, k)));
        if (j + 1 < v.ny() && in(i, j + 1, k)) m = std::max(m, std::abs(v.at(i, j + 1, k) - v.at(i, j, k)));
        if (k + 1 < v.nz() && in(i, j, k + 1)) m = std::max(m, std::abs(v.at(i, j, k + 1) - v.at(i, j, k)));
      }
  return m;
}

inline Volume ellipsoid_mask(const Dims3& dims, const Vec3& voxel, const Vec3& centre_mm, const Vec3& semi_mm) {
  return filled(dims, voxel, [&](double x, double y, double z) {
    const double a = (x - centre_mm[0]) / semi_mm[0], b = (y - centre_mm[1]) / semi_mm[1],
                 c = (z - centre_mm[2]) / semi_mm[2];
    return a * a + b * b + c * c <= 1.0 ? 1.0 : 0.0;
  });
}

/// unwrapped − truth over the voxels where `select` holds: the same multiple of 2π everywhere,
/// to `tol` rad. Returns that multiple (for callers that compare pieces).
inline double expect_one_multiple(const Volume& unwrapped, std::int64_t uframe, const Volume& truth,
                                  std::int64_t tframe, const std::function<bool(std::int64_t)>& select,
                                  double tol = 1e-9, const std::string& what = "") {
  const auto u = unwrapped.frame(uframe);
  const auto t = truth.frame(tframe);
  std::int64_t first = -1, bad = 0, count = 0;
  double k0 = 0.0, worst = 0.0;
  for (std::int64_t v = 0; v < unwrapped.voxels(); ++v) {
    if (!select(v)) continue;
    ++count;
    const double d = u[static_cast<std::size_t>(v)] - t[static_cast<std::size_t>(v)];
    if (first < 0) {
      first = v;
      k0 = std::nearbyint(d / kTwoPi);
    }
    const double err = std::abs(d - kTwoPi * k0);
    if (!(err <= tol)) {
      ++bad;
      worst = std::isfinite(err) ? std::max(worst, err) : INFINITY;
    }
  }
  EXPECT_GT(count, 0) << what;
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << count << " voxels off the 2π multiple " << k0 << " (worst by "
                    << worst << " rad)";
  return k0;
}

/// (unwrapped − wrapped)/2π is an integer (to `tol`·2π) wherever `select` holds.
inline void expect_congruent(const Volume& unwrapped, const Volume& wrapped_phase,
                             const std::function<bool(std::int64_t)>& select, double tol = 1e-9) {
  std::int64_t bad = 0, count = 0;
  for (std::int64_t v = 0; v < unwrapped.voxels(); ++v) {
    if (!select(v)) continue;
    ++count;
    const double k = (unwrapped.data()[v] - wrapped_phase.data()[v]) / kTwoPi;
    if (!(std::abs(k - std::nearbyint(k)) <= tol)) ++bad;
  }
  EXPECT_GT(count, 0);
  EXPECT_EQ(bad, 0) << bad << " of " << count << " voxels are not congruent with the input";
}

inline std::function<bool(std::int64_t)> everywhere() {
  return [](std::int64_t) { return true; };
}
inline std::function<bool(std::int64_t)> inside(const Volume& mask) {
  return [&mask](std::int64_t v) { return mask.data()[v] > 0.5; };
}

/// Uniform noise in (−π, π], seeded.
inline Volume noise_phase(const Dims3& dims, std::uint64_t seed) {
  Volume v = Volume::zeros(dims, Geometry::isotropic(1.0));
  physics::Pcg32 rng(seed);
  for (double& x : v.values()) x = wrap_phase((rng.uniform() * 2.0 - 1.0) * std::numbers::pi);
  return v;
}

}  // namespace qsmcore::unwrap_test
