// r2star_map: R2* (Hz) per voxel from the echoes' magnitudes, by the log-linear fit or ARLO
// (methods.md §7). Voxels are fitted independently, one row of x per task, so the map does not
// depend on the thread count; z-slabs are processed in turn so that progress can be reported
// from the calling thread. The only volume-sized allocation is the result (8 B per voxel).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "relaxometry/relaxometry_internal.h"

namespace qsmcore::relaxometry {
namespace {

struct Fit {
  R2starOptions o;
  std::vector<double> te;
  double delta_s = 0.0;  // ARLO's echo spacing: the mean gap
  int need = 2;
};

// One voxel: the echoes before the first non-positive magnitude (a magnitude of 0 or below is no
// decay sample; the echoes after it are at the noise floor or masked), 0 if fewer than the
// method needs; the estimate clamped to [0, max], 0 if it is not a number.
double fit_voxel(const Fit& f, const double* s, int n, double* work) {
  int used = 0;
  while (used < n && s[used] > 0.0) ++used;
  if (used < f.need) return 0.0;
  const double r = f.o.method == R2starMethod::Arlo ? arlo_r2star(s, used, f.delta_s, f.o.arlo_simpson_correction)
                                                    : loglinear_r2star(s, f.te.data(), used, f.o.weighting, work);
  if (std::isnan(r)) return 0.0;
  return std::clamp(r, 0.0, f.o.max_r2star_hz);
}

// Rows (j, k) for k in [k0, k1): each task fits one row's voxels.
void fit_slab(const Fit& f, const Volume& mag, const Volume* mask, Volume& out, std::int64_t k0, std::int64_t k1) {
  const std::int64_t nx = mag.nx(), ny = mag.ny(), nvox = mag.voxels();
  const auto n = static_cast<int>(mag.frames());
  parallel_for((k1 - k0) * ny, true, [&](std::int64_t row) {
    const std::int64_t base = (k0 * ny + row) * nx;
    std::vector<double> s(static_cast<std::size_t>(3 * n));  // samples, then the fit's work
    for (std::int64_t i = base; i < base + nx; ++i) {
      if (mask != nullptr && !mask_inside(mask->data()[i])) continue;
      for (int e = 0; e < n; ++e) s[static_cast<std::size_t>(e)] = mag.data()[i + e * nvox];
      out.data()[i] = fit_voxel(f, s.data(), n, s.data() + n);
    }
  });
}

}  // namespace
}  // namespace qsmcore::relaxometry

namespace qsmcore {

Volume r2star_map(const Volume& magnitude, const std::vector<double>& te_s, const Volume* mask,
                  const R2starOptions& o) {
  using namespace relaxometry;
  check_r2star_inputs(magnitude, te_s, mask, o);
  Fit f{o, te_s, (te_s.back() - te_s.front()) / static_cast<double>(te_s.size() - 1), min_echoes(o.method)};
  f.o.progress = nullptr;
  Volume out = Volume::zeros(magnitude.dims(), magnitude.geometry(), 1);
  const std::int64_t nz = magnitude.nz();
  const std::int64_t slabs = std::min<std::int64_t>(nz, 16);
  for (std::int64_t b = 0; b < slabs; ++b) {
    fit_slab(f, magnitude, mask, out, nz * b / slabs, nz * (b + 1) / slabs);
    if (o.progress) o.progress(static_cast<double>(b + 1) / static_cast<double>(slabs));
  }
  return out;
}

}  // namespace qsmcore
