// Pre- and post-processing shared by the wrappers: input validation, unit conversion, masks,
// flips, morphology, and the boundary between column-major f64 volumes and f32 tensors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "qsmcore/networks.h"
#include "qsmcore/tensor.h"
#include "tiling/tiles.h"

namespace qsmcore::networks {

/// Checks what network_needs(spec) requires is given, every given volume is on the primary
/// input's grid, has the frames it may have, holds only finite values, and TE/B0 are positive
/// where needed. Error{InvalidInput} naming the network, the input and the problem.
void validate_inputs(const ModelSpec& spec, const NetworkInputs& in);

/// The primary volume (field, or magnitude/r2star for networks without a field).
const Volume& primary_input(const ModelSpec& spec, const NetworkInputs& in);

/// `field` frame 0 in ppm (converted with field_unit, TE and B0).
Volume field_ppm(const NetworkInputs& in);

/// `field` frame 0 in ppm for reading: the input's own values when they are in ppm already,
/// else a converted copy. A whole f64 volume less is what lets a field network's whole-volume
/// run fit the tightest budgets (xQSM at 181x217x181: 57 MB of the 434 MB that are 1/8 of
/// its peak).
class FieldPpm {
 public:
  explicit FieldPpm(const NetworkInputs& in);
  const double* data() const { return data_; }
  /// Whether it reads `in`'s field, holding no copy of its own.
  static bool reads_input(const NetworkInputs& in);
  /// The bytes it holds of its own (what a reservation adds for it).
  static std::int64_t own_bytes(const NetworkInputs& in);
  /// That copy (empty when it reads `in`), to park while graphs run.
  const Volume& copy() const { return converted_; }

 private:
  Volume converted_;
  const double* data_ = nullptr;
};

/// B0 direction in voxel axes: the given one (normalised) or the affine's.
Vec3 b0_direction(const NetworkInputs& in, const Volume& grid);

/// Whether mask voxel i is inside (mask_inside: above one half).
inline bool inside(const Volume* mask, std::int64_t i) {
  return mask == nullptr || mask_inside(mask->data()[i]);
}

/// Reverses volume (frame-wise) along `axis` in place: an involution.
void flip_axis(Volume& v, int axis);

/// Erodes a 0/1 mask with a sphere of `radius` voxels (out of bounds counts as outside, as
/// scipy.ndimage.binary_erosion).
Volume erode_sphere(const Volume& mask, int radius);

/// Root-sum-of-squares over frames (one frame: a copy).
Volume rss_frames(const Volume& v);

/// Bounding box of voxels with value ≠ 0 (frame 0); an empty box if none.
tiling::Box nonzero_bbox(const Volume& v);

/// Frame 0's voxels in `box` (inside the volume), as a volume of the box's size; the geometry is
/// kept (only the dimensions change).
Volume crop_box(const Volume& v, const tiling::Box& box);

/// Mean and population standard deviation of frame 0 (optionally only where mask ≠ 0).
std::pair<double, double> mean_std(const Volume& v, const Volume* mask = nullptr);

/// A volume on `like`'s grid filled from a function of the voxel index.
Volume make_like(const Volume& like);

}  // namespace qsmcore::networks
