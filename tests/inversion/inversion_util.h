// Shared fixtures of the inversion tests: single Fourier modes, a smooth χ, full and spherical
// masks, and the head phantom's true local field (made once per size and tilt per process).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <numbers>
#include <tuple>

#include "physics/pcg.h"
#include "qsmcore/inversion.h"
#include "qsmcore/phantom.h"
#include "qsmcore/physics.h"

namespace qsmtest {

using qsmcore::Dims3;
using qsmcore::Geometry;
using qsmcore::Vec3;
using qsmcore::Volume;

/// cos(2π m·r/N) on a grid of `d` (one Fourier mode of the periodic grid).
inline Volume fourier_mode(const Dims3& d, const Vec3& vox, const std::array<std::int64_t, 3>& m) {
  Volume v = Volume::zeros(d, Geometry::with_voxel(vox));
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i)
        v.at(i, j, k) = std::cos(2 * std::numbers::pi *
                                 (double(m[0] * i) / d[0] + double(m[1] * j) / d[1] + double(m[2] * k) / d[2]));
  return v;
}

/// 1 everywhere on v's grid.
inline Volume full_mask(const Volume& like) {
  Volume m = Volume::zeros_like(like, 1);
  for (double& x : m.values()) x = 1.0;
  return m;
}

/// An ellipsoid of semi-axes `frac`·(dims/2) at the centre: 1 inside, 0 outside.
inline Volume ellipsoid_mask(const Volume& like, const Vec3& frac) {
  Volume m = Volume::zeros_like(like, 1);
  const Dims3& d = like.dims();
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        double r2 = 0.0;
        const std::int64_t p[3] = {i, j, k};
        for (int a = 0; a < 3; ++a) {
          const double x = (p[a] - (d[a] - 1) / 2.0) / (frac[a] * d[a] / 2.0);
          r2 += x * x;
        }
        m.at(i, j, k) = r2 <= 1.0 ? 1.0 : 0.0;
      }
  return m;
}

/// A smooth χ (ppm): three Gaussian blobs of ±0.1 ppm, a few voxels wide.
inline Volume smooth_chi(const Dims3& d, const Vec3& vox) {
  Volume chi = Volume::zeros(d, Geometry::with_voxel(vox));
  const double blobs[3][5] = {{0.35, 0.4, 0.5, 0.1, 3.0}, {0.65, 0.55, 0.4, -0.08, 2.5}, {0.5, 0.7, 0.65, 0.05, 4.0}};
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        double v = 0.0;
        for (const auto& b : blobs) {
          const double dx = (i - b[0] * d[0]) * vox[0], dy = (j - b[1] * d[1]) * vox[1],
                       dz = (k - b[2] * d[2]) * vox[2];
          v += b[3] * std::exp(-(dx * dx + dy * dy + dz * dz) / (2 * b[4] * b[4]));
        }
        chi.at(i, j, k) = v;
      }
  return chi;
}

/// The periodic forward model with D(0) = 0, the operator the inversions invert.
inline Volume periodic_field(const Volume& chi, const Vec3& b0) {
  qsmcore::ForwardOptions fo;
  fo.kernel = qsmcore::KernelOptions::lpcnn_modl();
  fo.padding = qsmcore::Padding::None;
  return qsmcore::forward_field(chi, b0, fo);
}

/// The head phantom's truth at `d` with B0 tilted by `tilt_deg` about y (no background: the
/// inversions start from the true local field). Made once per process.
struct PhantomTruth {
  Volume local_field, chi, mask;
  Vec3 b0;
};
inline const PhantomTruth& phantom_truth(const Dims3& d, double tilt_deg = 0.0) {
  static std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, double>, std::unique_ptr<PhantomTruth>> cache;
  auto& slot = cache[{d[0], d[1], d[2], tilt_deg}];
  if (!slot) {
    qsmcore::PhantomOptions o;
    o.dims = d;
    o.background = false;
    o.shim = false;
    o.phase_offset = false;
    const double t = tilt_deg * std::numbers::pi / 180.0;
    o.b0_dir = {std::sin(t), 0.0, std::cos(t)};
    qsmcore::Phantom ph = qsmcore::make_head_phantom(o);
    slot = std::make_unique<PhantomTruth>(
        PhantomTruth{std::move(ph.local_field), std::move(ph.chi), std::move(ph.mask), o.b0_dir});
  }
  return *slot;
}

/// v + N(0, σ²) per voxel from a seeded stream.
inline Volume with_noise(const Volume& v, double sigma, std::uint64_t seed) {
  Volume out = v.clone();
  qsmcore::physics::Pcg32 rng(seed);
  for (double& x : out.values()) x += sigma * rng.normal();
  return out;
}

/// ‖a − b‖/‖b‖ over the voxels where `mask` is set (all when null).
inline double relative_error(const Volume& a, const Volume& b, const Volume* mask = nullptr) {
  double e = 0.0, n = 0.0;
  for (std::int64_t q = 0; q < a.voxels(); ++q) {
    if (mask != nullptr && !(mask->data()[q] > 0.5)) continue;
    const double d = a.data()[q] - b.data()[q];
    e += d * d;
    n += b.data()[q] * b.data()[q];
  }
  return std::sqrt(e / n);
}

/// Mean of v inside the mask.
inline double mean_inside(const Volume& v, const Volume& mask) {
  double s = 0.0, n = 0.0;
  for (std::int64_t q = 0; q < v.voxels(); ++q)
    if (mask.data()[q] > 0.5) {
      s += v.data()[q];
      n += 1.0;
    }
  return s / n;
}

}  // namespace qsmtest
