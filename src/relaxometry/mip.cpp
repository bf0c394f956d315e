// The SWI's minimum-intensity projection along z (CLEAR-SWI's createMIP, 7 slices by default),
// kept on the input's grid: each slice takes the minimum over a window centred on it, cut at the
// volume's ends, so the projection overlays the SWI and shares its affine (CLEARSWI.jl and QSM.rs
// return nz − n + 1 slices instead, starting at the first full window).
#include <algorithm>

#include "core/parallel.h"
#include "relaxometry/relaxometry_internal.h"

namespace qsmcore::relaxometry {

Volume min_projection_z(const Volume& v, int slices) {
  Volume out = Volume::zeros_like(v, 1);
  const std::int64_t plane = v.nx() * v.ny(), nz = v.nz(), half = slices / 2;
  const double* in = v.data();
  double* o = out.data();
  parallel_for(v.voxels(), true, [&](std::int64_t i) {
    const std::int64_t k = i / plane, xy = i - k * plane;
    const std::int64_t k0 = std::max<std::int64_t>(0, k - half);
    const std::int64_t k1 = std::min<std::int64_t>(nz - 1, k - half + slices - 1);
    double m = in[xy + k0 * plane];
    for (std::int64_t kk = k0 + 1; kk <= k1; ++kk) m = std::min(m, in[xy + kk * plane]);
    o[i] = m;
  });
  return out;
}

}  // namespace qsmcore::relaxometry
