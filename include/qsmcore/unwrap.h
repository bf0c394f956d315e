// Phase unwrapping (methods.md §4): ROMEO, a quality-guided region growing (Dymerska et al. 2021,
// doi:10.1002/mrm.28563) whose result differs from its input by whole multiples of 2π in every
// voxel, with temporal unwrapping across echoes; and Laplacian unwrapping (Schofield & Zhu 2003),
// which is smooth but not congruent with its input. Written from the papers; ROMEO.jl was read for
// its conventions (edge weights, 256 bins, seed choice), not copied.
#pragma once
#include <functional>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore {

/// Which terms make ROMEO's edge weights (methods.md §4.1; each enabled term t contributes a
/// factor 0.1 + 0.9·t). The second-echo term needs `second_phase`, the magnitude term a magnitude.
struct RomeoWeights {
  bool phase_coherence = true;
  bool phase_gradient_coherence = true;
  bool phase_linearity = true;
  bool magnitude_coherence = true;
};

struct RomeoOptions {
  RomeoWeights weights;
  /// Seeds per growth (1 = one seed per connected region). With more, ROMEO's rule plants another
  /// seed (the best unvisited voxel) when the queue's best edge is worse than halfway from the
  /// last seed's mean bin to the worst bin. Must be ≥ 1.
  int max_seeds = 1;
  std::function<void(double fraction)> progress;  // may be empty
};

/// What one spatial unwrapping sees. `phase` (rad) frame `echo` is unwrapped. Optional: the
/// magnitude (same grid, frame `magnitude_echo`), a second echo's phase (frame `second_echo`,
/// which must exist: set it when the second phase is a one-frame volume) with the TE ratio
/// TE(echo)/TE(second echo) > 0, used by the gradient-coherence term and to choose the seed's 2π
/// class; and a mask (one frame, above 0.5 = inside): voxels outside it are not visited, edges to
/// them are invalid, and the output is 0 there. Without a mask every voxel with a finite phase is
/// unwrapped (each connected region of valid edges from its own seed). Non-finite values make the
/// edges they touch invalid; a voxel with a non-finite phase is not visited.
struct RomeoInput {
  const Volume* phase = nullptr;
  std::int64_t echo = 0;
  const Volume* magnitude = nullptr;
  std::int64_t magnitude_echo = 0;
  const Volume* second_phase = nullptr;
  std::int64_t second_echo = 1;
  double te_ratio = 0.0;  // TE(echo) / TE(second_echo)
  const Volume* mask = nullptr;
};

/// Spatially unwrapped phase, one frame: unwrapped − phase is a multiple of 2π in every visited
/// voxel (to rounding), 0 where not visited (outside the mask, non-finite phase). Error{InvalidInput}
/// naming the input for grids that differ, a frame out of range, a second phase without a TE
/// ratio, max_seeds < 1. Memory above the inputs: at most ~23.2 bytes per voxel (the f64 output,
/// 3 bytes of edge bins, ≤ 12 bytes of queue, a visited bit).
Volume romeo_unwrap(const RomeoInput& in, const RomeoOptions& o = {});

/// ROMEO's voxel quality in [0, 1]: the mean of the weights of the voxel's 6 edges (an edge that
/// leaves the volume or the mask counts 0, so an isolated voxel has 0). QSMxT masks with an Otsu
/// threshold of it. Memory above the inputs: the output alone (8 bytes per voxel).
Volume romeo_voxel_quality(const RomeoInput& in, const RomeoWeights& w = {});

struct EchoUnwrapOptions {
  RomeoOptions romeo;
  std::int64_t template_echo = 0;  // unwrapped spatially; every other echo temporally from it
  /// Each echo spatially on its own, then each shifted by the 2π multiple that best matches the
  /// previous echo scaled by TE (the median over the mask), instead of temporal unwrapping.
  bool individual = false;
};

/// Every echo of `phase` (rad, frames = echoes) unwrapped: the template echo with ROMEO (weights
/// from the next echo — the previous one for the last — and the magnitude), then each other echo e
/// from its already unwrapped neighbour r: φ_e − 2π·round((φ_e − φ_r·TE_e/TE_r)/2π). This assumes
/// φ ∝ TE: remove the phase offset first (MCPC-3D-S). `magnitude` (one frame, or one per echo) and
/// `mask` may be null; te_s has one positive time per echo. In individual mode echo 0 is brought
/// to the 2π class where the median of round(φ/2π) over the mask is 0. 0 outside the mask.
Volume romeo_unwrap_echoes(const Volume& phase, const Volume* magnitude, const std::vector<double>& te_s,
                           const Volume* mask, const EchoUnwrapOptions& o = {});

struct LaplacianUnwrapOptions {
  /// Bring the smooth estimate back to the input's congruence class: φ + 2π·round((est − φ)/2π),
  /// exact wherever the estimate is within π of the truth.
  bool congruent = false;
  std::function<void(double fraction)> progress;
};

/// Laplacian unwrapping of frame `echo`, in its least-squares form: the Laplacian of the wrapped
/// neighbour differences (equal to cos φ·∇²sin φ − sin φ·∇²cos φ to first order, and exact where
/// neighbours differ by less than π), solved by a DCT (reflecting borders) without a mask, or by
/// DCT-preconditioned conjugate gradients on the mask's edges with one. Each connected piece's
/// constant is chosen so that the result agrees with φ modulo 2π on circular average. On a
/// residue-free phase the result is the truth plus a multiple of 2π per piece. 0 outside the mask
/// (and where φ is not finite). Memory above the input: ~12 bytes per voxel without a mask, ~24
/// with one (a little more when a side has a prime factor above 7: the solver's box is padded).
Volume laplacian_unwrap(const Volume& phase, std::int64_t echo = 0, const Volume* mask = nullptr,
                        const LaplacianUnwrapOptions& o = {});

}  // namespace qsmcore
