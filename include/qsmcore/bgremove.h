// Background field removal (methods.md §5): the field of sources outside the brain is harmonic
// inside it and is removed, leaving the local field of the brain's own χ. The SHARP family (SHARP,
// V-SHARP, RESHARP, iSMV) uses the spherical mean value property and erodes the mask by the
// sphere's radius; PDF (projection onto dipole fields) and LBV (Laplacian boundary value) keep the
// whole mask. Written from the papers; QSM.jl and the MEDI toolbox were read for conventions only.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore {

enum class BfrMethod { Vsharp, Sharp, Resharp, Ismv, Pdf, Lbv };
/// "vsharp" | "sharp" | "resharp" | "ismv" | "pdf" | "lbv"; Error{InvalidInput} otherwise.
BfrMethod parse_bfr_method(const std::string& name);
const char* to_string(BfrMethod m);

// Defaults of the SHARP family (methods.md §5; QSM.rs's, which QSMxT runs): SHARP r = 6 mm;
// V-SHARP r = 12, 11, …, 1 mm (fewer radii lost accuracy on the head phantom), less the radii
// below the largest voxel side (a sphere that misses a face neighbour is flat) and those that fit
// nowhere in the mask (a small volume deconvolves with the largest that fits); both threshold
// 0.05. RESHARP r = 6 mm, λ = 1e-4, tolerance 1e-6, 30 iterations. iSMV r = 5 mm, tolerance 1e-6,
// 50 iterations. The SHARP family's output mask is the mask eroded by the (smallest) radius:
// the voxels whose whole sphere lies inside the mask, voxels beyond the border counting as outside.
struct BfrOptions {
  BfrMethod method = BfrMethod::Vsharp;
  /// Sphere radii in mm. V-SHARP: its radii in any order (empty = its default); the others use
  /// the first (empty = their default). A radius must hold more than its centre voxel.
  std::vector<double> radii_mm;
  double threshold = 0.05;  // SHARP, V-SHARP: 1/(1 − Ŝ) is truncated where |1 − Ŝ| < threshold
  double lambda = 0.0;      // RESHARP's Tikhonov weight (0 = its default)
  /// Iterative methods' relative tolerance (0 = the method's default): RESHARP stops when the CG
  /// residual is below tolerance·‖b‖; iSMV when ‖Δb‖ ≤ tolerance·‖M_e·f‖ (f less its mean in
  /// the mask, as a constant is harmonic and changes no result).
  double tolerance = 0.0;
  int max_iterations = 0;           // iterative methods (0 = the method's default)
  const Volume* weights = nullptr;  // PDF's data weights on the field's grid (e.g. 1/noise); null = 1
  std::function<void(double fraction)> progress;
};

struct BfrResult {
  Volume local_field;              // the input's unit; 0 outside `mask`
  Volume mask;                     // where local_field is valid: the input mask, eroded by the SHARP family
  std::int64_t eroded_voxels = 0;  // voxels of the input mask not in `mask`
  int iterations = 0;              // iterative methods
  double residual = 0.0;           // iterative methods: the final relative residual (as `tolerance` measures it)
};

/// Removes the background of `total_field` (any unit: the methods are linear) inside `mask`
/// (above 0.5 = inside). `b0_dir` (voxel axes) is used by PDF's dipole kernel. Error{InvalidInput}
/// for grids that differ, an empty mask, or options out of range.
BfrResult remove_background(const Volume& total_field, const Volume& mask, const Vec3& b0_dir,
                            const BfrOptions& o = {});

/// The grid the SHARP family's FFTs run on for a volume of `dims`: each axis rounded up to an
/// even 2,3,5,7-smooth size, no further padding. Their work arrays scale with it.
Dims3 smv_fft_grid(const Dims3& dims);

/// The grid `o.method`'s FFTs run on for a volume of `dims` (the SHARP family's smv_fft_grid,
/// PDF's padded grid), or {0, 0, 0} for a method without FFTs (LBV): what its memory scales with
/// besides the volume, for predictions made before it runs.
Dims3 bfr_fft_grid(const Dims3& dims, const BfrOptions& o);

}  // namespace qsmcore
