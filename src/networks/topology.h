// SynthSeg's topology clean-up (models.md §5 SynthSeg step 8) on posteriors held as the frames
// of a Volume (frame l = label channel l, channel 0 = background).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore::networks {

/// Keeps only the largest 6-connected component of the non-zero voxels of `mask` (column-major
/// on `dims`), as scipy.ndimage.label + argmax(bincount): on a tie the component met first in
/// scan order wins. Returns the number of voxels kept.
std::int64_t keep_largest_component(std::vector<std::uint8_t>& mask, const Dims3& dims);

/// Zeroes the foreground posteriors (channels ≥ 1) outside the largest 6-connected component of
/// Σ_{c≥1} p > 0.25; then, for each non-zero topology class, zeroes its channels outside the
/// largest component of "any member > 0.25". `classes[c]` is channel c's class (0 = exempt);
/// empty = only the foreground step.
void synthseg_topology_cleanup(Volume& post, std::span<const int> classes);

}  // namespace qsmcore::networks
