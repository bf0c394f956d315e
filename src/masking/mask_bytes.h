// Internal mask operations on one byte per voxel (0 = outside, 1 = inside), which the public
// Volume functions of qsmcore/masking.h and brain_mask share: a mask as f64 would cost 8 bytes a
// voxel for a bit of information. Every work array here is accounted (AccountedArray).
#pragma once
#include <cstdint>
#include <span>

#include "core/accounted_array.h"
#include "qsmcore/volume.h"

namespace qsmcore::masking {

using MaskBytes = AccountedArray<std::uint8_t>;

/// 1 where mask_inside(v), else 0. Error{InvalidInput} for an empty volume.
MaskBytes to_bytes(const Volume& mask, const char* what);
/// A 0/1 Volume on `like`'s grid, one frame.
Volume to_volume(const MaskBytes& m, const Volume& like);
std::int64_t count(const MaskBytes& m);

// 6-connected morphology; a voxel beyond the border counts as outside.
void erode(MaskBytes& m, const Dims3& d, int iterations);
void dilate(MaskBytes& m, const Dims3& d, int iterations);
/// Background components not 6-connected to the border, of at most max_voxels (0 = any), set 1.
void fill_holes(MaskBytes& m, const Dims3& d, std::int64_t max_voxels);
/// Keeps the largest 6-connected component (the first in index order on a tie).
void keep_largest(MaskBytes& m, const Dims3& d);

/// Otsu's threshold over `bins` equal bins of [min, max] of the values (Otsu 1979,
/// doi:10.1109/TSMC.1979.4310076): the upper edge of the lower class that maximises the
/// between-class variance. Error{InvalidInput} naming `what` for no values, NaN/Inf, or a
/// constant range.
template <class T>
double otsu(std::span<const T> values, int bins, const char* what);

extern template double otsu<float>(std::span<const float>, int, const char*);
extern template double otsu<double>(std::span<const double>, int, const char*);

}  // namespace qsmcore::masking
