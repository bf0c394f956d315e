// The geometric multigrid behind LBV (lbv.cpp): the 7-point Laplacian with voxel spacing on the
// voxels of a mask's interior, zero Dirichlet values everywhere else, solved by V-cycles of
// red-black Gauss-Seidel on vertex-centred coarsenings (coarse point I sits on fine point 2I).
#pragma once
#include <cstdint>
#include <functional>

#include "qsmcore/volume.h"

namespace qsmcore::bgremove {

struct LbvSolveOptions {
  double tolerance = 1e-4;  // stop at ‖r‖ ≤ tolerance·‖L·f‖ over the interior
  int max_cycles = 100;
  int pre_sweeps = 2;   // red-black Gauss-Seidel sweeps before the coarse correction, per level
  int post_sweeps = 2;  // and after it
  std::function<void(double fraction)> progress;
};

struct LbvSolveResult {
  int cycles = 0;
  double residual = 0.0;  // the final ‖r‖/‖L·f‖
  int levels = 0;         // grids, the fine one included
};

/// Solves L·x = L·f at the voxels where `interior` is 1, with x = 0 at every other voxel (the
/// Dirichlet condition), for a volume of `dims` and voxel sizes `voxel_mm`. `f` and `x` are
/// column-major on that grid; x is overwritten (it need not be zeroed). Interior voxels must not
/// lie on the volume's outer faces. Work arrays are accounted, about 1.3 B per voxel in all.
LbvSolveResult solve_lbv(const double* f, double* x, const std::uint8_t* interior, const Dims3& dims,
                         const Vec3& voxel_mm, const LbvSolveOptions& o);

}  // namespace qsmcore::bgremove
