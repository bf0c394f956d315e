#include "io/input_check.h"

#include <cmath>
#include <cstdio>

#include "qsmcore/error.h"

namespace qsmcore::io {
namespace {

std::string dims_text(const Dims3& d) {
  return std::to_string(d[0]) + "×" + std::to_string(d[1]) + "×" + std::to_string(d[2]);
}

std::string vec_text(const Vec3& v) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.4g×%.4g×%.4g", v[0], v[1], v[2]);
  return buf;
}

}  // namespace

std::string grid_difference(const Volume& a, const Volume& b, double tol_mm) {
  if (a.dims() != b.dims()) return "dimensions " + dims_text(a.dims()) + " vs " + dims_text(b.dims());
  for (int i = 0; i < 3; ++i)
    if (std::abs(a.voxel_mm()[i] - b.voxel_mm()[i]) > tol_mm)
      return "voxel size " + vec_text(a.voxel_mm()) + " mm vs " + vec_text(b.voxel_mm()) + " mm";
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c)
      if (std::abs(a.affine().m[r][c] - b.affine().m[r][c]) > tol_mm) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "affine element [%d][%d] %.6g vs %.6g (%s)", r, c, a.affine().m[r][c],
                      b.affine().m[r][c], c == 3 ? "origin differs" : "orientation or voxel size differs");
        return buf;
      }
  return "";
}

Volume read_on_grid(const std::string& path, const std::string& what, const Volume& reference,
                    const std::string& reference_what, const std::string& reference_path,
                    const NiftiReadOptions& options) {
  Volume v = read_nifti(path, options);
  const std::string diff = grid_difference(v, reference);
  if (!diff.empty())
    throw Error(ErrorKind::InvalidInput, path + ": the " + what + " (" + describe_grid(v) +
                                             ") is not on the grid of the " + reference_what + " " + reference_path +
                                             " (" + describe_grid(reference) + "): " + diff +
                                             "; resample it onto that grid first");
  return v;
}

Volume read_mask_on_grid(const std::string& path, const Volume& reference, const std::string& reference_what,
                         const std::string& reference_path) {
  Volume m = read_on_grid(path, "mask", reference, reference_what, reference_path);
  std::int64_t inside = 0;
  for (double& x : m.values()) {
    x = mask_inside(x) ? 1.0 : 0.0;
    inside += x != 0.0;
  }
  if (inside == 0) throw Error(ErrorKind::InvalidInput, path + ": the mask is empty (no voxel is above 0.5)");
  return m;
}

}  // namespace qsmcore::io
