// Masks as one byte per voxel (0 = outside, 1 = inside) and their 6-connected morphology, shared
// by the brain masks (src/masking/, behind the Volume functions of qsmcore/masking.h) and the
// phantoms (src/physics/atlas_anatomy.cpp): a mask as f64 would cost 8 bytes a voxel for a bit of
// information. It lives in core, below both, so that physics does not reach up into masking
// (docs/architecture.md, "Folders and what each may use"); the names stay in qsmcore::masking.
// Every work array here is accounted (AccountedArray).
#pragma once
#include <cstdint>

#include "core/accounted_array.h"
#include "qsmcore/volume.h"

namespace qsmcore::masking {

using MaskBytes = AccountedArray<std::uint8_t>;

/// 1 where mask_inside(v), else 0. Error{InvalidInput} for an empty volume.
MaskBytes to_bytes(const Volume& mask, const char* what);
/// A data term's mask: `mask` as bytes eroded by `iterations` voxels, or empty (none allocated)
/// when iterations is 0 — the caller then uses the mask itself (TV-ADMM's and the consistency
/// step's data_erode, methods.md §6.3 and §6.7).
MaskBytes eroded_bytes(const Volume& mask, int iterations, const char* what);
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

}  // namespace qsmcore::masking
