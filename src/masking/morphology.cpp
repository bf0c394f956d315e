// The Volume face of the mask morphology (qsmcore/masking.h): each function converts to one byte
// per voxel, runs the byte operation of core/mask_bytes.h (where the algorithms and their
// references are) and converts back.
#include "core/mask_bytes.h"
#include "qsmcore/masking.h"

namespace qsmcore {

Volume erode_mask(const Volume& mask, int iterations) {
  auto m = masking::to_bytes(mask, "erode_mask");
  masking::erode(m, mask.dims(), iterations);
  return masking::to_volume(m, mask);
}

Volume dilate_mask(const Volume& mask, int iterations) {
  auto m = masking::to_bytes(mask, "dilate_mask");
  masking::dilate(m, mask.dims(), iterations);
  return masking::to_volume(m, mask);
}

Volume fill_holes(const Volume& mask, std::int64_t max_voxels) {
  auto m = masking::to_bytes(mask, "fill_holes");
  masking::fill_holes(m, mask.dims(), max_voxels);
  return masking::to_volume(m, mask);
}

Volume largest_component(const Volume& mask) {
  auto m = masking::to_bytes(mask, "largest_component");
  masking::keep_largest(m, mask.dims());
  return masking::to_volume(m, mask);
}

std::int64_t count_inside(const Volume& mask) {
  std::int64_t n = 0;
  for (const double v : mask.frame(0)) n += mask_inside(v) ? 1 : 0;
  return n;
}

}  // namespace qsmcore
