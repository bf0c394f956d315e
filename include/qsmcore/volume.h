// Volume: a 3-D (or 3-D × frames, e.g. echoes) image in f64 with its place in the scanner:
// voxel size (mm) and the voxel-index → scanner-mm affine (NIfTI RAS+). Storage is
// column-major like NIfTI (x fastest, then y, z, frame) so files map onto memory 1:1; wrappers
// that feed networks convert to row-major f32 once, at the network boundary (models.md §4).
// The bytes are an accounted Buffer, so large volumes show up in the memory figures.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "qsmcore/memory.h"

namespace qsmcore {

using Vec3 = std::array<double, 3>;
using Dims3 = std::array<std::int64_t, 3>;

/// Row-major 4×4 matrix mapping voxel indices (i, j, k, 1) to scanner coordinates in mm.
struct Affine {
  std::array<std::array<double, 4>, 4> m{};

  /// diag(voxel, 1): voxel axes along scanner axes, origin at voxel 0.
  static Affine scaling(const Vec3& voxel_mm);
  /// Scanner coordinates (mm) of a (possibly fractional) voxel index.
  Vec3 apply(const Vec3& ijk) const;
  /// Column c (0..2) of the 3×3 part: the scanner-space step of one voxel along axis c.
  Vec3 axis(int c) const { return {m[0][c], m[1][c], m[2][c]}; }
};

/// Where a volume sits: voxel size, affine and the NIfTI xform code the affine came from
/// (1 scanner, 2 aligned, … ; 0 = no orientation was stored, the affine is just scaling).
struct Geometry {
  Vec3 voxel_mm{1.0, 1.0, 1.0};
  Affine affine{{{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}}};  // = scaling(voxel_mm)
  int xform_code = 1;

  static Geometry isotropic(double voxel_mm);
  static Geometry with_voxel(const Vec3& voxel_mm);
};

class Volume {
 public:
  Volume() = default;
  /// Zero-filled volume; `cat` is the accounting category of its bytes.
  static Volume zeros(const Dims3& dims, const Geometry& geometry, std::int64_t frames = 1,
                      MemCategory cat = MemCategory::Other);
  /// Zero-filled volume on the same grid as `o` (frames = 0 keeps o's frame count).
  static Volume zeros_like(const Volume& o, std::int64_t frames = 0, MemCategory cat = MemCategory::Other);

  Volume(Volume&&) noexcept = default;
  Volume& operator=(Volume&&) noexcept = default;
  // Volumes are often hundreds of MB: copies are explicit (clone), never implicit.
  Volume(const Volume&) = delete;
  Volume& operator=(const Volume&) = delete;
  Volume clone() const;

  bool empty() const { return voxels() == 0; }
  const Dims3& dims() const { return dims_; }
  std::int64_t nx() const { return dims_[0]; }
  std::int64_t ny() const { return dims_[1]; }
  std::int64_t nz() const { return dims_[2]; }
  std::int64_t frames() const { return frames_; }
  /// Voxels of one frame.
  std::int64_t voxels() const { return dims_[0] * dims_[1] * dims_[2]; }
  /// Values in all frames.
  std::int64_t size() const { return voxels() * frames_; }

  const Geometry& geometry() const { return geometry_; }
  const Vec3& voxel_mm() const { return geometry_.voxel_mm; }
  const Affine& affine() const { return geometry_.affine; }
  void set_geometry(const Geometry& g) { geometry_ = g; }

  double* data() { return reinterpret_cast<double*>(storage_.data()); }
  const double* data() const { return reinterpret_cast<const double*>(storage_.data()); }
  std::span<double> values() { return {data(), static_cast<std::size_t>(size())}; }
  std::span<const double> values() const { return {data(), static_cast<std::size_t>(size())}; }
  std::span<double> frame(std::int64_t t) {
    return {data() + t * voxels(), static_cast<std::size_t>(voxels())};
  }
  std::span<const double> frame(std::int64_t t) const {
    return {data() + t * voxels(), static_cast<std::size_t>(voxels())};
  }

  /// Its bytes' block (to park while graphs run: spill/parking.h).
  const Buffer& storage() const { return storage_; }

  std::int64_t index(std::int64_t i, std::int64_t j, std::int64_t k) const {
    return i + dims_[0] * (j + dims_[1] * k);
  }
  double& at(std::int64_t i, std::int64_t j, std::int64_t k, std::int64_t t = 0) {
    return data()[index(i, j, k) + t * voxels()];
  }
  double at(std::int64_t i, std::int64_t j, std::int64_t k, std::int64_t t = 0) const {
    return data()[index(i, j, k) + t * voxels()];
  }

 private:
  Dims3 dims_{0, 0, 0};
  std::int64_t frames_ = 0;
  Geometry geometry_;
  Buffer storage_;
};

/// True if both volumes have the same dimensions, and voxel sizes and affines agree to `tol_mm`.
bool same_grid(const Volume& a, const Volume& b, double tol_mm = 1e-4);
/// "a×b×c at x×y×z mm" for messages.
std::string describe_grid(const Volume& v);

/// Whether a mask value counts as inside the brain: above one half, as the networks' authors
/// binarise masks (iQSM inference.py `mask > 0.5`, HD-BET's and the iQSM+ ports' `> 0.5`). A 0/1
/// or label mask reads the same as with "non-zero"; a probability map is cut at 0.5.
inline bool mask_inside(double v) {
  return v > 0.5;
}

}  // namespace qsmcore
