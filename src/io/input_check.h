// Checks on the volumes a command is given, made before any work starts so that a bad input
// is reported (naming the file and what is wrong) while nothing has been written yet. Reading
// itself (truncation, dimensionality, NaN/Inf with count and first voxel) is read_nifti's; this
// adds the checks between files: one grid for all inputs, a mask that selects something.
#pragma once
#include <string>

#include "io/nifti.h"
#include "qsmcore/volume.h"

namespace qsmcore::io {

/// Reads `path` as `what` ("magnitude", "R2* map", ...) and requires it to lie on the spatial
/// grid of `reference` (dimensions, voxel size and affine; frames may differ when
/// options.allow_frames), the reference being `reference_what` read from `reference_path`.
/// A mismatch is Error{InvalidInput} "PATH: the WHAT (grid) is not on the grid of the
/// REFERENCE_WHAT REFERENCE_PATH (grid)" with what differs.
Volume read_on_grid(const std::string& path, const std::string& what, const Volume& reference,
                    const std::string& reference_what, const std::string& reference_path,
                    const NiftiReadOptions& options = {});

/// As read_on_grid, then binarised (mask_inside: above 0.5 = 1); a mask with no voxel inside is
/// Error{InvalidInput}.
Volume read_mask_on_grid(const std::string& path, const Volume& reference, const std::string& reference_what,
                         const std::string& reference_path);

/// What differs between two grids, for messages: "dimensions 64×64×64 vs 64×64×48",
/// "voxel size ...", "affine ..." ("" when they agree within tol_mm).
std::string grid_difference(const Volume& a, const Volume& b, double tol_mm = 1e-3);

}  // namespace qsmcore::io
