// PDF's FFT grid: how far the volume is padded so that background sources inside the volume do
// not wrap around onto the mask, and the 2,3,5-smooth sizes the FFTs transform fast.
#pragma once
#include <cstdint>

#include "qsmcore/volume.h"

namespace qsmcore::bgremove {

/// Voxels PDF adds after the volume along an axis of n voxels: ⌈n/16⌉, at least 4 (see
/// pdf_grid.cpp for the measurement behind it).
std::int64_t pdf_padding(std::int64_t n);

/// PDF's periodic grid for a volume of `dims`: each axis padded by pdf_padding, then grown to the
/// next size whose prime factors are all 2, 3 or 5.
Dims3 pdf_fft_grid(const Dims3& dims);

}  // namespace qsmcore::bgremove
