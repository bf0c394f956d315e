// Brain masks from the scan itself (methods.md §2): a threshold of ROMEO's phase quality or of the
// magnitude (Otsu), then morphology (6-connected erosion and dilation, hole filling, the largest
// connected component), as QSMxT's default does. Masks are volumes of 0 and 1.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore {

enum class MaskMethod {
  PhaseQuality,  // Otsu threshold of ROMEO's voxel quality (echo 1, echo 2 as second phase, magnitude)
  Magnitude,     // Otsu threshold of the echoes' root-sum-of-squares magnitude
};

struct MaskOptions {
  MaskMethod method = MaskMethod::PhaseQuality;
  int dilate = 1;                     // voxels, before filling holes
  double fill_holes_fraction = 0.05;  // holes up to this share of the volume are filled (0: none, ≥ 1: any)
  int erode = 1;                      // voxels, after filling holes
  bool largest_component = true;      // keep one connected brain
  std::function<void(double fraction)> progress;
};

/// Otsu's threshold of `values` over `bins` equal bins spanning their range (the value at the
/// upper edge of the best lower class). Error{InvalidInput} for no values or a constant range.
double otsu_threshold(std::span<const double> values, int bins = 256);

/// A brain mask (0/1, one frame) from magnitude and phase (frames = echoes, rad) and their echo
/// times: the method's Otsu threshold, then dilate → fill holes → erode → largest component.
/// One echo: the quality without its second-echo term. Error{InvalidInput} naming the problem
/// for grids or echo counts that differ, bad echo times (TE₁ = TE₂ for the quality), negative
/// morphology, or data with nothing to threshold. Peak above the inputs: 9 bytes a voxel.
Volume brain_mask(const Volume& magnitude, const Volume& phase, const std::vector<double>& te_s,
                  const MaskOptions& o = {});

// Morphology on 0/1 masks (frame 0; 6-connected structuring element, voxels beyond the border
// count as outside), each returning a new mask on the same grid. Work arrays: a byte per voxel
// (two for erosion and dilation), and an int32 queue per voxel for the flood fills.
Volume erode_mask(const Volume& mask, int iterations = 1);
Volume dilate_mask(const Volume& mask, int iterations = 1);
/// Fills background regions not connected (6-connectivity) to the volume's border, of at most
/// `max_voxels` voxels each (0 = any size).
Volume fill_holes(const Volume& mask, std::int64_t max_voxels = 0);
/// The largest 6-connected component.
Volume largest_component(const Volume& mask);
/// Voxels inside (above 0.5).
std::int64_t count_inside(const Volume& mask);

}  // namespace qsmcore
