// Test-side references for the SHARP family, written from the definitions and slow on purpose:
// the ball's offsets, ball means, the erosion "the whole ball lies inside the mask" voxel by voxel
// and as SEPIA/QSM.jl threshold S∗M, and a blobby test mask.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "physics/fft.h"
#include "qsmcore/volume.h"

namespace qsmcore::bgremove {

// Offsets of the ball of radius r, by its definition (voxel centres within r mm).
inline std::vector<std::array<std::int64_t, 3>> ball_offsets(const Vec3& voxel, double r) {
  std::vector<std::array<std::int64_t, 3>> out;
  const auto h = [&](int a) { return static_cast<std::int64_t>(r / voxel[a]) + 1; };
  for (std::int64_t k = -h(2); k <= h(2); ++k)
    for (std::int64_t j = -h(1); j <= h(1); ++j)
      for (std::int64_t i = -h(0); i <= h(0); ++i) {
        const double x = i * voxel[0], y = j * voxel[1], z = k * voxel[2];
        if (x * x + y * y + z * z <= r * r * (1 + 1e-12)) out.push_back({i, j, k});
      }
  return out;
}

// A blobby mask: a union of balls, one of them cut by the volume's border.
inline Volume blob_mask(const Dims3& d, const Vec3& voxel) {
  Volume m = Volume::zeros(d, Geometry::with_voxel(voxel));
  const double balls[][4] = {
      {0.45, 0.5, 0.5, 0.33}, {0.75, 0.35, 0.6, 0.22}, {0.2, 0.7, 0.35, 0.2}, {0.5, 0.5, 0.95, 0.2}};
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i)
        for (const auto& b : balls) {
          const double x = (i + 0.5) / d[0] - b[0], y = (j + 0.5) / d[1] - b[1], z = (k + 0.5) / d[2] - b[2];
          if (x * x + y * y + z * z <= b[3] * b[3]) m.at(i, j, k) = 1.0;
        }
  return m;
}

// The erosion as SEPIA/MEDI and QSM.jl compute it: S∗M > 1 − ε by FFT, on a grid padded by
// more than the ball's reach so that nothing wraps and the outside of the volume counts as
// outside. ε = 0.5/|ball|: a single missing voxel drops the mean by 1/|ball|.
inline Volume smv_threshold_erosion(const Volume& mask, double r) {
  const Vec3& v = mask.voxel_mm();
  const auto offsets = ball_offsets(v, r);
  Dims3 g;
  for (int a = 0; a < 3; ++a) g[a] = mask.dims()[a] + 2 * (static_cast<std::int64_t>(r / v[a]) + 2);
  physics::RealFft3<double> fm(g), fk(g);
  std::fill(fm.real(), fm.real() + fm.real_count(), 0.0);
  std::fill(fk.real(), fk.real() + fk.real_count(), 0.0);
  for (std::int64_t k = 0; k < mask.nz(); ++k)
    for (std::int64_t j = 0; j < mask.ny(); ++j)
      for (std::int64_t i = 0; i < mask.nx(); ++i) fm.real()[i + g[0] * (j + g[1] * k)] = mask.at(i, j, k);
  auto wrap = [](std::int64_t i, std::int64_t n) { return ((i % n) + n) % n; };
  for (const auto& o : offsets)
    fk.real()[wrap(o[0], g[0]) + g[0] * (wrap(o[1], g[1]) + g[1] * wrap(o[2], g[2]))] = 1.0 / offsets.size();
  fm.forward();
  fk.forward();
  for (std::int64_t n = 0; n < fm.spectrum_count(); ++n) fm.spectrum()[n] *= fk.spectrum()[n];
  fm.inverse();
  Volume out = Volume::zeros_like(mask, 1);
  const double eps = 0.5 / static_cast<double>(offsets.size());
  for (std::int64_t k = 0; k < mask.nz(); ++k)
    for (std::int64_t j = 0; j < mask.ny(); ++j)
      for (std::int64_t i = 0; i < mask.nx(); ++i)
        out.at(i, j, k) = fm.real()[i + g[0] * (j + g[1] * k)] > 1.0 - eps ? 1.0 : 0.0;
  return out;
}

// "The whole ball lies inside the mask", voxel by voxel.
inline Volume brute_force_erosion(const Volume& mask, double r) {
  const auto offsets = ball_offsets(mask.voxel_mm(), r);
  Volume out = Volume::zeros_like(mask, 1);
  const Dims3& d = mask.dims();
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        bool all = true;
        for (const auto& o : offsets) {
          const std::int64_t a = i + o[0], b = j + o[1], c = k + o[2];
          if (a < 0 || b < 0 || c < 0 || a >= d[0] || b >= d[1] || c >= d[2] || mask.at(a, b, c) < 0.5) {
            all = false;
            break;
          }
        }
        out.at(i, j, k) = all ? 1.0 : 0.0;
      }
  return out;
}

inline std::int64_t differing_voxels(const Volume& a, const Volume& b) {
  std::int64_t n = 0;
  for (std::int64_t v = 0; v < a.voxels(); ++v) n += (a.data()[v] > 0.5) != (b.data()[v] > 0.5) ? 1 : 0;
  return n;
}

// The mean of f over the ball around (i, j, k), which must lie inside the volume.
inline double ball_mean(const Volume& f, const std::vector<std::array<std::int64_t, 3>>& offsets, std::int64_t i,
                        std::int64_t j, std::int64_t k) {
  double s = 0.0;
  for (const auto& o : offsets) s += f.at(i + o[0], j + o[1], k + o[2]);
  return s / static_cast<double>(offsets.size());
}

}  // namespace qsmcore::bgremove
