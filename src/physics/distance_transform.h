// The exact Euclidean distance transform of a binary volume (Felzenszwalb & Huttenlocher,
// "Distance transforms of sampled functions", Theory of Computing 8:415, 2012): one pass of the
// 1-D lower envelope of parabolas per axis, with each axis's voxel spacing, so distances are in
// mm on anisotropic grids. The atlas phantom uses it for depths below the brain's surface (the
// cortical ribbon, sulci) and for the shells of the head around it (CSF, skull, scalp).
#pragma once
#include <cstdint>

#include "core/accounted_array.h"
#include "qsmcore/volume.h"

namespace qsmcore::physics {

/// Squared distance (mm²) from each voxel's centre to the nearest voxel whose `feature` byte is
/// non-zero (0 on the feature itself); kNoFeature where the volume holds none. f32: squared
/// distances of whole-voxel offsets are exact below 2^24 mm².
AccountedArray<float> squared_distance(const AccountedArray<std::uint8_t>& feature, const Dims3& dims,
                                       const Vec3& spacing_mm);

inline constexpr float kNoFeature = 3.0e38f;

}  // namespace qsmcore::physics
