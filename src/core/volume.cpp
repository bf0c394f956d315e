// Volume, Affine and Geometry implementations.
#include "qsmcore/volume.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "qsmcore/error.h"

namespace qsmcore {

Affine Affine::scaling(const Vec3& voxel_mm) {
  Affine a;
  for (int r = 0; r < 3; ++r) a.m[r][r] = voxel_mm[r];
  a.m[3][3] = 1.0;
  return a;
}

Vec3 Affine::apply(const Vec3& ijk) const {
  Vec3 out{};
  for (int r = 0; r < 3; ++r) out[r] = m[r][0] * ijk[0] + m[r][1] * ijk[1] + m[r][2] * ijk[2] + m[r][3];
  return out;
}

Geometry Geometry::isotropic(double voxel_mm) { return with_voxel({voxel_mm, voxel_mm, voxel_mm}); }

Geometry Geometry::with_voxel(const Vec3& voxel_mm) {
  Geometry g;
  g.voxel_mm = voxel_mm;
  g.affine = Affine::scaling(voxel_mm);
  return g;
}

Volume Volume::zeros(const Dims3& dims, const Geometry& geometry, std::int64_t frames, MemCategory cat) {
  for (std::int64_t d : dims)
    if (d <= 0) throw Error(ErrorKind::InvalidInput, "a volume needs positive dimensions");
  if (frames <= 0) throw Error(ErrorKind::InvalidInput, "a volume needs at least one frame");
  for (double v : geometry.voxel_mm)
    if (!(v > 0.0) || !std::isfinite(v))
      throw Error(ErrorKind::InvalidInput, "a voxel size must be positive and finite");
  Volume v;
  v.dims_ = dims;
  v.frames_ = frames;
  v.geometry_ = geometry;
  const std::size_t bytes = static_cast<std::size_t>(v.size()) * sizeof(double);
  v.storage_ = Buffer(bytes, cat);
  std::memset(v.storage_.data(), 0, bytes);
  return v;
}

Volume Volume::zeros_like(const Volume& o, std::int64_t frames, MemCategory cat) {
  return zeros(o.dims_, o.geometry_, frames > 0 ? frames : o.frames_, cat);
}

Volume Volume::clone() const {
  if (frames_ == 0) return Volume();
  Volume v = zeros(dims_, geometry_, frames_, storage_.category());
  std::memcpy(v.data(), data(), static_cast<std::size_t>(size()) * sizeof(double));
  return v;
}

bool same_grid(const Volume& a, const Volume& b, double tol_mm) {
  if (a.dims() != b.dims()) return false;
  for (int i = 0; i < 3; ++i)
    if (std::abs(a.voxel_mm()[i] - b.voxel_mm()[i]) > tol_mm) return false;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c)
      if (std::abs(a.affine().m[r][c] - b.affine().m[r][c]) > tol_mm) return false;
  return true;
}

std::string describe_grid(const Volume& v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lld×%lld×%lld at %.4g×%.4g×%.4g mm", static_cast<long long>(v.nx()),
                static_cast<long long>(v.ny()), static_cast<long long>(v.nz()), v.voxel_mm()[0], v.voxel_mm()[1],
                v.voxel_mm()[2]);
  std::string s = buf;
  if (v.frames() > 1) s += " × " + std::to_string(v.frames()) + " frames";
  return s;
}

}  // namespace qsmcore
