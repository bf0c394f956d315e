// The inversions' FFT grid and half-spectrum tables (see kspace.h).
#include "inversion/kspace.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "physics/fft.h"
#include "qsmcore/error.h"

namespace qsmcore::inversion {
namespace {

// numpy.fft.fftfreq(n, dx) at index p: the spectrum's DC at index 0 (physics.md §2's Corner grid).
double fft_frequency(std::int64_t p, std::int64_t n, double dx) {
  const std::int64_t m = p < (n + 1) / 2 ? p : p - n;
  return static_cast<double>(m) / (static_cast<double>(n) * dx);
}

void fill_axis(std::int64_t n, double dx, std::vector<double>& f, std::vector<double>& fm, std::vector<double>& lap) {
  f.resize(static_cast<std::size_t>(n));
  fm.resize(static_cast<std::size_t>(n));
  lap.resize(static_cast<std::size_t>(n));
  for (std::int64_t p = 0; p < n; ++p) {
    f[static_cast<std::size_t>(p)] = fft_frequency(p, n, dx);
    fm[static_cast<std::size_t>(p)] = fft_frequency((n - p) % n, n, dx);
    const double phase = 2.0 * std::numbers::pi * static_cast<double>(p) / static_cast<double>(n);
    lap[static_cast<std::size_t>(p)] = (2.0 - 2.0 * std::cos(phase)) / (dx * dx);
  }
}

double dipole_at(double kx, double ky, double kz, const Vec3& b) {
  const double k2 = kx * kx + ky * ky + kz * kz;
  if (k2 == 0.0) return 0.0;
  const double kb = kx * b[0] + ky * b[1] + kz * b[2];
  return 1.0 / 3.0 - kb * kb / k2;
}

}  // namespace

Dims3 fft_grid(const Dims3& dims, int pad) {
  if (pad < 0) return dims;
  return {physics::smooth_fft_length(dims[0] + pad, 7, true), physics::smooth_fft_length(dims[1] + pad),
          physics::smooth_fft_length(dims[2] + pad)};
}

SpectrumAxes::SpectrumAxes(const Dims3& grid, const Vec3& voxel_mm, const Vec3& b0_dir) : grid_(grid) {
  const double len = std::sqrt(b0_dir[0] * b0_dir[0] + b0_dir[1] * b0_dir[1] + b0_dir[2] * b0_dir[2]);
  if (!(len > 0.0) || !std::isfinite(len))
    throw Error(ErrorKind::InvalidInput, "dipole inversion: the B0 direction must be a non-zero, finite vector");
  b_ = {b0_dir[0] / len, b0_dir[1] / len, b0_dir[2] / len};
  fill_axis(grid[0], voxel_mm[0], fx_, fxm_, lx_);
  fill_axis(grid[1], voxel_mm[1], fy_, fym_, ly_);
  fill_axis(grid[2], voxel_mm[2], fz_, fzm_, lz_);
}

double SpectrumAxes::dipole(std::int64_t i, std::int64_t j, std::int64_t k) const {
  const auto I = static_cast<std::size_t>(i), J = static_cast<std::size_t>(j), K = static_cast<std::size_t>(k);
  const double d = dipole_at(fx_[I], fy_[J], fz_[K], b_);
  const double dm = dipole_at(fxm_[I], fym_[J], fzm_[K], b_);
  return 0.5 * (d + dm);
}

AccountedArray<float> dipole_table(const SpectrumAxes& axes) {
  AccountedArray<float> d(static_cast<std::size_t>(axes.count()));
  const std::int64_t hx = axes.half_nx(), ny = axes.grid()[1];
  for_spectrum_planes(axes, [&](std::int64_t k) {
    float* out = d.data() + k * axes.plane();
    for (std::int64_t j = 0; j < ny; ++j)
      for (std::int64_t i = 0; i < hx; ++i) *out++ = static_cast<float>(axes.dipole(i, j, k));
  });
  return d;
}

void load_masked_field(physics::RealFft3<float>& fft, const Volume& field, const Volume& mask) {
  const Dims3& g = fft.dims();
  const Dims3& d = field.dims();
  float* r = fft.real();
  const double* f = field.data();
  const double* m = mask.data();
  parallel_for(g[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < g[1]; ++j) {
      float* row = r + g[0] * (j + g[1] * k);
      if (k >= d[2] || j >= d[1]) {
        std::fill(row, row + g[0], 0.0f);
        continue;
      }
      const std::int64_t src = d[0] * (j + d[1] * k);
      for (std::int64_t i = 0; i < d[0]; ++i) row[i] = mask_inside(m[src + i]) ? static_cast<float>(f[src + i]) : 0.0f;
      std::fill(row + d[0], row + g[0], 0.0f);
    }
  });
}

}  // namespace qsmcore::inversion
