// PDF's padded FFT grid (see pdf_grid.h).
//
// Why pad at all: the dipole convolution is done by FFT, so it is periodic. Sources beyond one face
// of the volume (the neck, the sinuses below a slab that cuts the brain) must be fitted somewhere
// outside the mask; without padding the only room "below the first slice" is the top of the volume,
// which is the same unknown as a source above the last slice, and inside the mask where the mask
// reaches both faces. Likewise a source inside the volume near one face acts, through the wrap, on
// the mask near the opposite face as if it lay just beyond it; the padding puts N/16 voxels or more
// between the two (a dipole's field 6 voxels away is under 1/200 of its value at 1). Measured on an analytic case (a
// mask that touches both z faces of a 96³ volume, a sphere source just below it; 30 / 100 CGLS iterations): the field
// left in the mask is 87 % / 87 % of the source's with no padding, 0.25 % / 0.12 % on the grid chosen here (96 + 6,
// rounded up to 108), 0.13 % / 0.08 % with N/4 and 0.11 % / 0.08 % with N/2. Where the mask keeps
// clear of the faces, padding changes nothing measurable (a sphere source 24 voxels from a
// spherical mask: 0.085 % left with 0, N/8, N/4 or N). So each axis gets N/16 voxels (at least 4),
// then grows to a 2,3,5-smooth size: FFTW's fast radices, and the portable FFT's (WebAssembly),
// which would fall back to Bluestein's algorithm for a factor of 7. At 181×217×181 the grid is
// 200×240×200, 1.35 volumes.
#include "bgremove/pdf_grid.h"

#include "physics/fft.h"

namespace qsmcore::bgremove {
std::int64_t pdf_padding(std::int64_t n) {
  const std::int64_t p = (n + 15) / 16;
  return p < 4 ? 4 : p;
}

Dims3 pdf_fft_grid(const Dims3& dims) {
  Dims3 g{};
  for (int a = 0; a < 3; ++a) g[a] = physics::smooth_fft_length(dims[a] + pdf_padding(dims[a]), 5);
  return g;
}

}  // namespace qsmcore::bgremove
