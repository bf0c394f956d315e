// Dipole kernel D(k) = 1/3 − (k·b̂)²/|k|² (physics.md §2) in the conventions the networks use.
#include <cfloat>
#include <cmath>
#include <vector>

#include "qsmcore/error.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace {

// Frequency (1/mm) at array index p of an axis of n voxels of size dx.
double frequency(std::int64_t p, std::int64_t n, double dx, KernelGrid grid) {
  if (grid == KernelGrid::Corner) {
    const std::int64_t half_up = (n + 1) / 2;  // ceil(n/2): numpy.fft.fftfreq
    const std::int64_t m = p < half_up ? p : p - n;
    return static_cast<double>(m) / (static_cast<double>(n) * dx);
  }
  // Centred (QSM.rs NeXtQSM): the value built for centred index idx is stored at its fftshifted
  // position p, so idx = (p + n/2) mod n and r = (idx − n/2)/(n/2)/(2·dx).
  const std::int64_t idx = (p + n / 2) % n;
  return static_cast<double>(idx - n / 2) / (static_cast<double>(n) / 2.0) / (2.0 * dx);
}

std::vector<double> axis_frequencies(std::int64_t n, double dx, KernelGrid grid) {
  std::vector<double> f(static_cast<std::size_t>(n));
  for (std::int64_t p = 0; p < n; ++p) f[static_cast<std::size_t>(p)] = frequency(p, n, dx, grid);
  return f;
}

Vec3 kernel_direction(const Vec3& b, bool normalise) {
  const double len = std::sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
  if (!(len > 0.0) || !std::isfinite(len))
    throw Error(ErrorKind::InvalidInput, "the B0 direction must be a non-zero, finite vector");
  if (!normalise) return b;
  return {b[0] / len, b[1] / len, b[2] / len};
}

double dipole_at(double kx, double ky, double kz, const Vec3& b, const KernelOptions& o) {
  const double k2 = kx * kx + ky * ky + kz * kz;
  if (k2 == 0.0) return o.dc_value;
  const double kb = kx * b[0] + ky * b[1] + kz * b[2];
  return 1.0 / 3.0 - kb * kb / (k2 + o.eps);
}

void check_grid(const Dims3& dims, const Vec3& voxel_mm) {
  for (int a = 0; a < 3; ++a) {
    if (dims[a] <= 0) throw Error(ErrorKind::InvalidInput, "dipole kernel: dimensions must be positive");
    if (!(voxel_mm[a] > 0.0) || !std::isfinite(voxel_mm[a]))
      throw Error(ErrorKind::InvalidInput, "dipole kernel: voxel sizes must be positive and finite");
  }
}

}  // namespace

KernelOptions KernelOptions::lpcnn_modl() { return {KernelGrid::Corner, 0.0, true, 0.0}; }
KernelOptions KernelOptions::nextqsm() { return {KernelGrid::Centred, 1.0 / 3.0, false, FLT_EPSILON}; }
KernelOptions KernelOptions::qsm_forward() { return {KernelGrid::Corner, 1.0 / 3.0, true, 0.0}; }

double dipole_value(const Dims3& dims, const Vec3& voxel_mm, const Vec3& b0_dir, const KernelOptions& o,
                    std::int64_t i, std::int64_t j, std::int64_t k) {
  check_grid(dims, voxel_mm);
  const Vec3 b = kernel_direction(b0_dir, o.normalise_b);
  return dipole_at(frequency(i, dims[0], voxel_mm[0], o.grid), frequency(j, dims[1], voxel_mm[1], o.grid),
                   frequency(k, dims[2], voxel_mm[2], o.grid), b, o);
}

DipoleKernel make_kernel(const Dims3& dims, const Vec3& voxel_mm, const Vec3& b0_dir, const KernelOptions& o) {
  check_grid(dims, voxel_mm);
  const Vec3 b = kernel_direction(b0_dir, o.normalise_b);
  const auto fx = axis_frequencies(dims[0], voxel_mm[0], o.grid);
  const auto fy = axis_frequencies(dims[1], voxel_mm[1], o.grid);
  const auto fz = axis_frequencies(dims[2], voxel_mm[2], o.grid);
  DipoleKernel kern;
  kern.dims_ = dims;
  kern.values_ = Buffer(static_cast<std::size_t>(kern.count()) * sizeof(double), MemCategory::Other);
  double* out = reinterpret_cast<double*>(kern.values_.data());
  const std::int64_t hx = kern.half_nx();
  const auto mirror = [](std::int64_t p, std::int64_t n) { return static_cast<std::size_t>((n - p) % n); };
  for (std::int64_t k = 0; k < dims[2]; ++k) {
    const double kz = fz[static_cast<std::size_t>(k)], kz_m = fz[mirror(k, dims[2])];
    for (std::int64_t j = 0; j < dims[1]; ++j) {
      const double ky = fy[static_cast<std::size_t>(j)], ky_m = fy[mirror(j, dims[1])];
      for (std::int64_t i = 0; i < hx; ++i) {
        // Mirrored index −k differs from −(frequency) only on Nyquist planes of even sizes; the
        // average makes D·F Hermitian there, as c2r requires (see DipoleKernel).
        const double d = dipole_at(fx[static_cast<std::size_t>(i)], ky, kz, b, o);
        const double dm = dipole_at(fx[mirror(i, dims[0])], ky_m, kz_m, b, o);
        *out++ = o.squared ? 0.5 * (d * d + dm * dm) : 0.5 * (d + dm);
      }
    }
  }
  return kern;
}

}  // namespace qsmcore
