// Shared by the SWI tests and figures: a synthetic 64×64×24 scan with a paramagnetic vein along
// B0 (an infinite cylinder parallel to the field: +Δχ/3 inside, 0 outside — the analytic dipole
// field), a smooth background field, field noise, a smooth magnitude and a cylindrical mask.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "physics/pcg.h"
#include "qsmcore/physics.h"
#include "qsmcore/relaxometry.h"

namespace qsmcore::testing::vein {

inline const std::vector<double> kTe{0.005, 0.010, 0.015, 0.020};
constexpr double kVeinX = 36.0, kVeinY = 30.0, kVeinRadius = 2.5;
inline const Dims3 kDims{64, 64, 24};

// The in-plane distance from the vein's axis.
inline double vein_distance(std::int64_t i, std::int64_t j) {
  return std::hypot(static_cast<double>(i) - kVeinX, static_cast<double>(j) - kVeinY);
}

// A cylinder of radius 28 voxels about the volume's axis: the brain mask.
inline Volume cylinder_mask() {
  Volume m = Volume::zeros(kDims, Geometry::isotropic(1.0));
  for (std::int64_t k = 0; k < kDims[2]; ++k)
    for (std::int64_t j = 0; j < kDims[1]; ++j)
      for (std::int64_t i = 0; i < kDims[0]; ++i) m.at(i, j, k) = std::hypot(i - 31.5, j - 31.5) <= 28.0 ? 1.0 : 0.0;
  return m;
}

// Voxels whose whole smoothing window (3σ = 12 voxels in-plane) lies inside the mask.
inline bool interior(std::int64_t i, std::int64_t j) {
  return std::hypot(i - 31.5, j - 31.5) <= 28.0 - 12.0 * std::sqrt(2.0) - 0.5;
}

// Venous blood 0.45 ppm above tissue at 3 T: +Δχ/3 inside a cylinder parallel to B0, 0 outside.
inline const double kVeinHz = 0.45 / 3.0 * hz_per_ppm(3.0);

struct FieldParts {
  bool vein = true, background = false;
  double noise_hz = 0.5;
  double gradient_scale = 1.0;  // scales the background's in-plane gradients
};

// A smooth background: a per-slice offset, in-plane gradients that change with z (tens of Hz
// across the mask), and a gentle in-plane curvature.
inline double background_hz(std::int64_t i, std::int64_t j, std::int64_t k, double gradient_scale) {
  const double u = (static_cast<double>(i) - 31.5) / 32.0, v = (static_cast<double>(j) - 31.5) / 32.0;
  const double z = static_cast<double>(k);
  return 40.0 * std::sin(z / 5.0) + gradient_scale * ((15.0 + 0.5 * z) * u - 10.0 * v) + 2.0 * u * u;
}

inline Volume field(const FieldParts& p) {
  Volume f = Volume::zeros(kDims, Geometry::isotropic(1.0));
  physics::Pcg32 rng(99);
  for (std::int64_t k = 0; k < kDims[2]; ++k)
    for (std::int64_t j = 0; j < kDims[1]; ++j)
      for (std::int64_t i = 0; i < kDims[0]; ++i) {
        double x = p.noise_hz * rng.normal();
        if (p.vein && vein_distance(i, j) <= kVeinRadius) x += kVeinHz;
        if (p.background) x += background_hz(i, j, k, p.gradient_scale);
        f.at(i, j, k) = x;
      }
  return f;
}

// A smooth magnitude (no structure at the vein: its darkening must come from the phase).
inline Volume magnitude() {
  Volume m = Volume::zeros(kDims, Geometry::isotropic(1.0));
  for (std::int64_t k = 0; k < kDims[2]; ++k)
    for (std::int64_t j = 0; j < kDims[1]; ++j)
      for (std::int64_t i = 0; i < kDims[0]; ++i) m.at(i, j, k) = 100.0 + 0.3 * static_cast<double>(i + j) + k;
  return m;
}

inline SwiOptions scaled(SwiPhaseScaling s) {
  SwiOptions o;
  o.scaling = s;
  return o;
}

// The mean of swi/magnitude over the voxels whose in-plane distance from the vein is in [lo, hi].
inline double mean_weight(const SwiResult& r, const Volume& mag, double lo, double hi) {
  double s = 0.0;
  int n = 0;
  for (std::int64_t k = 0; k < kDims[2]; ++k)
    for (std::int64_t j = 0; j < kDims[1]; ++j)
      for (std::int64_t i = 0; i < kDims[0]; ++i) {
        const double d = vein_distance(i, j);
        if (d < lo || d > hi) continue;
        s += r.swi.at(i, j, k) / mag.at(i, j, k);
        ++n;
      }
  return s / n;
}

// max over interior voxels of |a − b| / magnitude (NaN if any is NaN).
inline double interior_change(const SwiResult& a, const SwiResult& b, const Volume& mag) {
  double worst = 0.0;
  for (std::int64_t k = 0; k < kDims[2]; ++k)
    for (std::int64_t j = 0; j < kDims[1]; ++j)
      for (std::int64_t i = 0; i < kDims[0]; ++i)
        if (interior(i, j)) {
          const double d = std::abs(a.swi.at(i, j, k) - b.swi.at(i, j, k)) / mag.at(i, j, k);
          if (!(d <= worst)) worst = d;  // a NaN becomes the result
        }
  return worst;
}

}  // namespace qsmcore::testing::vein
