// What the SHARP family (sharp.cpp, vsharp.cpp, resharp.cpp, ismv.cpp) shares: the spherical
// mean value (SMV) kernel and the spectrum of δ − S on the FFT grid, the mask eroded by a ball
// (computed exactly from a Euclidean distance transform), the FFT grid itself, moves between the
// f64 volumes and the f32/f64 FFT buffers, and deterministic sums over planes.
//
// The grid: every method here reads f − S∗f only where the whole ball lies inside the mask, and
// voxels beyond the volume's border count as outside, so a ball never reaches past the border and
// the circular convolution equals the linear one there whatever the padding. The FFT grid is the
// volume rounded up to a fast size (even and 2,3,5,7-smooth), not padded by r: SHARP's and
// V-SHARP's deconvolution does depend on the grid, but padding by 12 to 64 voxels moved the
// phantom's NRMSE by under 3 points either way (128³: worse; 181×217×181: better), for SHARP's
// bytes up 40 % at 128³ (24 voxels).
#pragma once
#include <algorithm>
#include <complex>
#include <cstdint>
#include <vector>

#include "core/accounted_array.h"
#include "core/parallel.h"
#include "physics/fft.h"
#include "qsmcore/bgremove.h"
#include "qsmcore/volume.h"

namespace qsmcore::bgremove {

/// The ball's bound on the squared offset (mm²): an offset d lies in the sphere of radius r when
/// |d|² ≤ r²·(1 + 1e-9). The slack makes an offset exactly on the sphere count as inside even
/// when the voxel size has no exact binary form, and the kernel and the erosion share it, so the
/// two agree voxel for voxel.
double ball_bound_sq(double radius_mm);

/// |(i, j, k)·voxel|² in mm², summed x, then y, then z: the order the distance transform sums in.
inline double offset_sq(std::int64_t i, std::int64_t j, std::int64_t k, const Vec3& voxel_mm) {
  const double x = static_cast<double>(i) * voxel_mm[0];
  const double y = static_cast<double>(j) * voxel_mm[1];
  const double z = static_cast<double>(k) * voxel_mm[2];
  return (x * x + y * y) + z * z;
}

/// Voxel centres within the ball of `radius_mm` around a voxel centre (the centre included).
std::int64_t ball_voxels(const Vec3& voxel_mm, double radius_mm);

/// Error{InvalidInput} when the ball of `radius_mm` holds only its centre (S = δ, so δ − S = 0).
void check_radius(const Vec3& voxel_mm, double radius_mm);

/// The smallest 2,3,5,7-smooth size ≥ n (even when `even`).

/// The FFT grid of the SHARP family: each axis rounded up to an even fast size.
Dims3 smv_grid(const Dims3& dims);

/// Squared distance (mm²) from each voxel centre to the nearest voxel centre outside the mask,
/// voxels beyond the border counting as outside; 0 outside. Felzenszwalb & Huttenlocher 2012
/// (doi:10.4086/toc.2012.v008a019): exact, separable, linear in the voxels.
AccountedArray<double> squared_distance_to_outside(const Volume& mask);

/// The mask eroded by the ball of `radius_mm`: the voxels whose whole ball lies inside the mask
/// (a 0/1 volume on the mask's grid, one frame).
Volume erode_by_ball(const Volume& mask, double radius_mm);

/// Error{InvalidInput} unless the field is one finite frame inside the mask (and the mask one
/// frame). Returns the field's mean inside the mask, which the methods subtract before going to
/// f32: constants are harmonic and removed anyway, and a large offset would cost f32 precision.
double checked_mean_inside(const Volume& field, const Volume& mask);

/// fft.real() = value(v) at each voxel v of the volume (`dims`, in the grid's corner), 0 in the
/// padding.
template <class T, class F>
void load_volume(physics::RealFft3<T>& fft, const Dims3& dims, F&& value) {
  const Dims3& g = fft.dims();
  T* r = fft.real();
  parallel_for(g[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < g[1]; ++j) {
      T* row = r + g[0] * (j + g[1] * k);
      if (k >= dims[2] || j >= dims[1]) {
        for (std::int64_t i = 0; i < g[0]; ++i) row[i] = T(0);
        continue;
      }
      const std::int64_t base = dims[0] * (j + dims[1] * k);
      for (std::int64_t i = 0; i < dims[0]; ++i) row[i] = static_cast<T>(value(base + i));
      for (std::int64_t i = dims[0]; i < g[0]; ++i) row[i] = T(0);
    }
  });
}

/// Runs visit(v, p) for each voxel v of plane k of the volume (`dims`) and its place p in an FFT
/// buffer of `grid`.
template <class F>
void plane_voxels(const Dims3& grid, const Dims3& dims, std::int64_t k, F&& visit) {
  for (std::int64_t j = 0; j < dims[1]; ++j) {
    const std::int64_t v = dims[0] * (j + dims[1] * k);
    const std::int64_t p = grid[0] * (j + grid[1] * k);
    for (std::int64_t i = 0; i < dims[0]; ++i) visit(v + i, p + i);
  }
}

/// plane_voxels over every plane, planes in parallel.
template <class F>
void for_volume(const Dims3& grid, const Dims3& dims, F&& visit) {
  parallel_for(dims[2], true, [&](std::int64_t k) { plane_voxels(grid, dims, k, visit); });
}

/// fft.spectrum() = Ŝ, the transform of the normalised ball of `radius_mm` (centre at voxel 0,
/// wrapped); fft.real() is overwritten. Ŝ is real (the ball is symmetric) and Ŝ(0) = 1.
template <class T>
void smv_transform(physics::RealFft3<T>& fft, const Vec3& voxel_mm, double radius_mm);

/// 1 − Ŝ over the half spectrum (through smv_transform: both fft buffers are overwritten).
template <class T>
AccountedArray<T> smv_complement(physics::RealFft3<T>& fft, const Vec3& voxel_mm, double radius_mm);

/// fft.real() = (field − mean) inside the mask, 0 elsewhere (NaN outside the mask reads as 0).
template <class T>
void load_field(physics::RealFft3<T>& fft, const Volume& field, const Volume& mask, double mean) {
  const double* f = field.data();
  const double* m = mask.data();
  load_volume(fft, field.dims(), [&](std::int64_t v) { return mask_inside(m[v]) ? f[v] - mean : 0.0; });
}

/// fft.real() = 0 in the padding (outside the volume's `dims` corner).
template <class T>
void zero_padding(physics::RealFft3<T>& fft, const Dims3& dims) {
  T* r = fft.real();
  const Dims3& g = fft.dims();
  parallel_for(g[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < g[1]; ++j) {
      T* row = r + g[0] * (j + g[1] * k);
      std::fill(row + ((k >= dims[2] || j >= dims[1]) ? 0 : dims[0]), row + g[0], T(0));
    }
  });
}

/// 1 inside the mask, else 0: one byte a voxel for the loops that read a mask every iteration.
AccountedArray<std::uint8_t> mask_bytes(const Volume& mask);

/// fft.real() = 0 where keep[v] == 0 and in the padding.
template <class T>
void keep_inside(physics::RealFft3<T>& fft, const Dims3& dims, const std::uint8_t* keep) {
  T* r = fft.real();
  const Dims3& g = fft.dims();
  parallel_for(g[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < g[1]; ++j) {
      T* row = r + g[0] * (j + g[1] * k);
      if (k >= dims[2] || j >= dims[1]) {
        std::fill(row, row + g[0], T(0));
        continue;
      }
      const std::uint8_t* mrow = keep + dims[0] * (j + dims[1] * k);
      for (std::int64_t i = 0; i < dims[0]; ++i)
        if (mrow[i] == 0) row[i] = T(0);
      std::fill(row + dims[0], row + g[0], T(0));
    }
  });
}

/// out = fft.real() inside `keep`, 0 elsewhere.
template <class T>
void store_inside(physics::RealFft3<T>& fft, const Volume& keep, Volume& out) {
  const double* m = keep.data();
  const T* r = fft.real();
  double* o = out.data();
  for_volume(fft.dims(), keep.dims(),
             [&](std::int64_t v, std::int64_t p) { o[v] = mask_inside(m[v]) ? static_cast<double>(r[p]) : 0.0; });
}

/// The mask eroded by `radius_mm`; Error{InvalidInput} naming `method` when nothing is left.
Volume eroded_or_throw(const Volume& mask, double radius_mm, const char* method);

/// spectrum *= c (a real half spectrum).
template <class T>
void multiply_spectrum(physics::RealFft3<T>& fft, const T* c);

/// spectrum /= c where |c| ≥ threshold, else 0: the truncated inverse of SHARP's deconvolution.
template <class T>
void divide_spectrum_truncated(physics::RealFft3<T>& fft, const T* c, double threshold);

/// fft.real() = (δ − S)∗(fft.real()) on the grid, given c = 1 − Ŝ.
template <class T>
void apply_complement(physics::RealFft3<T>& fft, const T* c);

extern template void smv_transform(physics::RealFft3<float>&, const Vec3&, double);
extern template void smv_transform(physics::RealFft3<double>&, const Vec3&, double);
extern template AccountedArray<float> smv_complement(physics::RealFft3<float>&, const Vec3&, double);
extern template AccountedArray<double> smv_complement(physics::RealFft3<double>&, const Vec3&, double);
extern template void multiply_spectrum(physics::RealFft3<float>&, const float*);
extern template void multiply_spectrum(physics::RealFft3<double>&, const double*);
extern template void divide_spectrum_truncated(physics::RealFft3<float>&, const float*, double);
extern template void divide_spectrum_truncated(physics::RealFft3<double>&, const double*, double);
extern template void apply_complement(physics::RealFft3<float>&, const float*);
extern template void apply_complement(physics::RealFft3<double>&, const double*);

/// o.progress(fraction) when a callback is set.
inline void report(const BfrOptions& o, double fraction) {
  if (o.progress) o.progress(fraction);
}

}  // namespace qsmcore::bgremove
