// Analytic oracles for the background-removal tests (physics.md §2): the field of a uniformly
// magnetised sphere, a ball mask, and the demeaned NRMSE the background-removal task reports.
// A sphere outside the mask gives a harmonic field inside it, which a method must remove; a sphere
// inside the mask gives a field the method must keep.
#pragma once
#include <cmath>

#include "qsmcore/volume.h"

namespace qsmtest {

struct SphereSource {
  qsmcore::Vec3 centre_mm;  // in the volume's voxel-centre frame: voxel (i, j, k) sits at (i, j, k)·voxel_mm
  double radius_mm;
  double dchi;  // the field comes out in this unit (ppm in, ppm out)
};

/// The Lorentz-corrected field of a uniformly magnetised sphere at `p_mm`:
/// (Δχ/3)·(a/r)³·(3cos²θ − 1) outside it, θ from B0, and 0 inside (physics.md §2).
inline double sphere_field_at(const qsmcore::Vec3& p_mm, const SphereSource& s, const qsmcore::Vec3& b0) {
  const double bn = std::sqrt(b0[0] * b0[0] + b0[1] * b0[1] + b0[2] * b0[2]);
  const double dx = p_mm[0] - s.centre_mm[0], dy = p_mm[1] - s.centre_mm[1], dz = p_mm[2] - s.centre_mm[2];
  const double r2 = dx * dx + dy * dy + dz * dz;
  if (r2 <= s.radius_mm * s.radius_mm) return 0.0;
  const double r = std::sqrt(r2);
  const double cos_t = (dx * b0[0] + dy * b0[1] + dz * b0[2]) / (bn * r);
  const double a_r = s.radius_mm / r;
  return s.dchi / 3.0 * a_r * a_r * a_r * (3.0 * cos_t * cos_t - 1.0);
}

/// Adds the sphere's field at every voxel centre of `field` (frame 0).
inline void add_sphere_field(qsmcore::Volume& field, const SphereSource& s, const qsmcore::Vec3& b0) {
  const qsmcore::Vec3& v = field.voxel_mm();
  for (std::int64_t k = 0; k < field.nz(); ++k)
    for (std::int64_t j = 0; j < field.ny(); ++j)
      for (std::int64_t i = 0; i < field.nx(); ++i)
        field.at(i, j, k) += sphere_field_at({i * v[0], j * v[1], k * v[2]}, s, b0);
}

/// 1 at voxel centres within `radius_mm` of `centre_mm`, else 0.
inline qsmcore::Volume ball_mask(const qsmcore::Dims3& dims, const qsmcore::Vec3& voxel_mm,
                                 const qsmcore::Vec3& centre_mm, double radius_mm) {
  qsmcore::Volume m = qsmcore::Volume::zeros(dims, qsmcore::Geometry::with_voxel(voxel_mm));
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i) {
        const double dx = i * voxel_mm[0] - centre_mm[0], dy = j * voxel_mm[1] - centre_mm[1],
                     dz = k * voxel_mm[2] - centre_mm[2];
        m.at(i, j, k) = dx * dx + dy * dy + dz * dz <= radius_mm * radius_mm ? 1.0 : 0.0;
      }
  return m;
}

/// 100·‖(r − r̄) − (t − t̄)‖/‖t − t̄‖ over the voxels of `mask` (above 0.5), both demeaned there;
/// NaN when the truth is constant there. NaN or Inf in the result make the figure NaN, which
/// fails any bound.
inline double demeaned_nrmse(const qsmcore::Volume& result, const qsmcore::Volume& truth, const qsmcore::Volume& mask) {
  double n = 0.0, rs = 0.0, ts = 0.0;
  for (std::int64_t v = 0; v < mask.voxels(); ++v)
    if (qsmcore::mask_inside(mask.data()[v])) {
      n += 1.0;
      rs += result.data()[v];
      ts += truth.data()[v];
    }
  const double rm = rs / n, tm = ts / n;
  double e = 0.0, t = 0.0;
  for (std::int64_t v = 0; v < mask.voxels(); ++v)
    if (qsmcore::mask_inside(mask.data()[v])) {
      const double tv = truth.data()[v] - tm;
      const double ev = (result.data()[v] - rm) - tv;
      e += ev * ev;
      t += tv * tv;
    }
  return t > 0.0 ? 100.0 * std::sqrt(e / t) : std::nan("");
}

}  // namespace qsmtest
