// t2star_from_r2star: T2* (s) = 1/R2* (Hz) per voxel, 0 where R2* is 0, negative or not a
// number (no decay was measured there; an infinite T2* would poison every mean taken later).
#include <cmath>

#include "core/parallel.h"
#include "qsmcore/relaxometry.h"

namespace qsmcore {

Volume t2star_from_r2star(const Volume& r2star_hz) {
  Volume out = Volume::zeros_like(r2star_hz);
  const double* r = r2star_hz.data();
  double* t = out.data();
  parallel_for(r2star_hz.size(), true, [&](std::int64_t i) {
    const double ti = r[i] > 0.0 ? 1.0 / r[i] : 0.0;  // a subnormal R2* would give inf
    t[i] = std::isfinite(ti) ? ti : 0.0;
  });
  return out;
}

}  // namespace qsmcore
