// Resampling between voxel grids that cover the same field of view, for the networks that run at
// a fixed voxel size (models.md §5: HD-BET, RS2-Net, SynthSeg). All maps are axis-aligned, so
// every resampling is separable: one 1-D pass per axis, output index i along an axis sampling
// the input at the fractional index scale·i + offset. Kernels follow scipy.ndimage (as skimage
// and nnU-Net call it): nearest = floor(x + 0.5), linear and cubic B-spline with edge
// extension (the cubic prefilter runs on a 12-voxel edge-padded line, as scipy ≥ 1.6 does).
#pragma once
#include <array>

#include "qsmcore/volume.h"

namespace qsmcore::networks {

enum class Interp { Nearest, Linear, Cubic };

/// Output index i along one axis samples the input at scale·i + offset.
struct AxisMap {
  double scale = 1.0;
  double offset = 0.0;
};
using GridMap = std::array<AxisMap, 3>;

/// skimage.transform.resize's map from `in` voxels to `out` voxels over the same field of view:
/// the voxel boxes' outer edges coincide, x = (i + 0.5)·n/m − 0.5.
GridMap fov_map(const Dims3& in, const Dims3& out);

/// Round-half-even(n·voxel/target) per axis (at least 1): nnU-Net's shape at a new spacing.
Dims3 dims_at_spacing(const Dims3& dims, const Vec3& voxel_mm, const Vec3& target_mm);

/// The geometry of the output grid of `map` from a grid with geometry `g`: the affine is
/// composed with the map (so both grids place the same scanner point at matching positions)
/// and voxel sizes scale with it.
Geometry mapped_geometry(const Geometry& g, const GridMap& map);

/// Resamples one axis of every frame of `v` to `m` voxels with `kind`; the geometry follows.
Volume resample_axis(const Volume& v, int axis, std::int64_t m, const AxisMap& map, Interp kind);

/// Resamples all three axes (axis 0 first) onto `out_dims`; the geometry follows `map`.
/// `clip` bounds each frame's result to that frame's input range (skimage's clip=True).
Volume resample(const Volume& v, const Dims3& out_dims, const GridMap& map, const std::array<Interp, 3>& kind,
                bool clip = false);

/// nnU-Net v2's resample_data_or_seg_to_shape for data (not segmentations), from spacing
/// `from_mm` to `out_dims` at spacing `to_mm`: unchanged if the dims already match; else cubic
/// (order 3, clipped to the input range) or linear (order 1) over the whole volume, or, with a
/// separate-z axis, that axis nearest and the other two in-plane per slice (cubic: each slice
/// clipped to its own input range).
Volume nnunet_resample(const Volume& v, const Dims3& out_dims, Interp in_plane, const Vec3& from_mm, const Vec3& to_mm);

/// nnU-Net's separate-z axis: the unique coarsest axis of `from_mm` if its max/min spacing
/// exceeds 3, else that of `to_mm` if it does, else −1 (also −1 when the coarsest is not unique).
int separate_z_axis(const Vec3& from_mm, const Vec3& to_mm);

/// scipy.ndimage.gaussian_filter per axis (σ in voxels, 0 = skip), mode "reflect", truncate 4.
Volume gaussian_blur(const Volume& v, const Vec3& sigma_vox);

}  // namespace qsmcore::networks
