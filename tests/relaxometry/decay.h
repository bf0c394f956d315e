// Shared by the relaxometry tests: analytic mono-exponential decays S0·exp(−R2*·TE) on a grid,
// seeded Gaussian or Rician noise, and statistics over a set of voxels.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "physics/pcg.h"
#include "qsmcore/volume.h"

namespace qsmcore::testing {

/// One frame per TE: S0(v)·exp(−R2*(v)·TE) with R2* and S0 given per voxel index.
inline Volume decay_volume(const Dims3& dims, const std::vector<double>& te_s,
                           const std::function<double(std::int64_t)>& r2star_hz,
                           const std::function<double(std::int64_t)>& s0) {
  Volume v = Volume::zeros(dims, Geometry::isotropic(1.0), static_cast<std::int64_t>(te_s.size()));
  for (std::size_t e = 0; e < te_s.size(); ++e)
    for (std::int64_t i = 0; i < v.voxels(); ++i)
      v.frame(static_cast<std::int64_t>(e))[static_cast<std::size_t>(i)] = s0(i) * std::exp(-r2star_hz(i) * te_s[e]);
  return v;
}

enum class Noise { Gaussian, Rician };

/// Adds noise of standard deviation sigma (per channel) to every value: S + σn (Gaussian, as a
/// real-valued reconstruction) or |S + σ(n₁ + i·n₂)| (Rician, a magnitude image). Seeded.
inline void add_noise(Volume& v, double sigma, Noise kind, std::uint64_t seed) {
  physics::Pcg32 rng(seed);
  for (double& x : v.values()) {
    const double re = x + sigma * rng.normal();
    if (kind == Noise::Gaussian) {
      x = re;
    } else {
      const double im = sigma * rng.normal();
      x = std::hypot(re, im);
    }
  }
}

struct Stats {
  double mean = 0.0, sd = 0.0;
  std::int64_t n = 0;
};

inline Stats stats(const Volume& v) {
  Stats s;
  s.n = v.voxels();
  for (const double x : v.frame(0)) s.mean += x;
  s.mean /= static_cast<double>(s.n);
  double ss = 0.0;
  for (const double x : v.frame(0)) ss += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(ss / static_cast<double>(s.n - 1));
  return s;
}

}  // namespace qsmcore::testing
