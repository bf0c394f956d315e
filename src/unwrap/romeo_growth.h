// ROMEO's quality-guided region growing (Dymerska et al. 2021) into a caller's frame, so that the
// multi-echo unwrapping writes each echo straight into its output without a second copy.
#pragma once
#include <span>

#include "qsmcore/unwrap.h"

namespace qsmcore::unwrap {

/// romeo_unwrap(in, o) written into `out` (one frame of in.phase's grid): every usable voxel
/// (in the mask, finite phase) unwrapped, 0 elsewhere. Error{InvalidInput} as romeo_unwrap.
void romeo_unwrap_into(const RomeoInput& in, const RomeoOptions& o, std::span<double> out);

}  // namespace qsmcore::unwrap
