// The demo's fixed set-ups, shared by `qsm demo` (src/cli/demo_cmd.cpp) and the web page
// (src/wasm/web_api.cpp): the raw scan the whole pipeline runs on (the atlas head as
// `qsm phantom --raw --anatomy atlas` makes it), how a χ map is scored against its truth, and the
// simulated-local-field set-up (the ellipsoid head, one field into a network) that both feed
// exactly the same volumes, so the browser's χ can be checked voxel by voxel against the native
// one.
#pragma once
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"

namespace qsmcore {

/// The demo's head phantom: a cube of `size` 1 mm voxels, B0 along z, one echo (the demo
/// reconstructs from the local field, not the phase) and no background sources (they only shape
/// the total field, unused here). Validated: Error{InvalidInput} for a bad size.
PhantomOptions demo_phantom_options(int size);

/// What a dipole-inversion network gets in the demo: the phantom's local field (ppm), its brain
/// mask, and the B0 strength and direction it was simulated with. The pointers are into `ph`.
NetworkInputs demo_network_inputs(const Phantom& ph, const PhantomOptions& po);

/// The raw demo's scan: the atlas head (physics.md §4.4) as `qsm phantom --raw --anatomy atlas`
/// makes it — scalp, skull and air around the brain, 7 T along z, 4 echoes (4–28 ms), noise at
/// peak SNR 100, seed 0. `size` 0: the atlas's natural grid, 181×217×181 at 1 mm; else a quick
/// version with the same field of view on coarser voxels: `size` voxels across x, 181/size mm
/// isotropic (size × round(size·217/181) × size). Validated: Error{InvalidInput} for a size
/// below 32 (coarser voxels than 5.7 mm leave the pipeline too little brain to work on: at 16,
/// 11 mm voxels, its local field has non-finite values).
PhantomOptions demo_raw_phantom_options(int size = 0);

/// The voxel the raw demo's figures cut through: 19 mm right, 11 mm anterior and 19 mm inferior
/// of the grid's centre, the right globus pallidus of the atlas head (MNI about (19, −7, −1) mm),
/// so that the axial and coronal planes cross the deep grey nuclei (globus pallidus, putamen,
/// caudate), the view QSM is read in; clamped to the grid.
Dims3 demo_raw_figure_point(const PhantomOptions& po);

/// A χ map against its truth inside a mask (above 0.5), the figures the demo prints.
struct ChiScore {
  double nrmse_demeaned = 0.0;              // percent: demeaned_nrmse (metrics.h), QSM-CI's current scorer
  double xsim = 0.0, hfen = 0.0, cc = 0.0;  // compute_metrics (metrics.h) with the mask as ROI
  /// Least squares χ = slope·truth + intercept over the mask (ppm): 1 and 0 for a map that
  /// reproduces the truth's contrast; an inversion that under-estimates χ has slope < 1.
  double slope = 0.0, intercept = 0.0;
};
/// Error{InvalidInput} as compute_metrics and demeaned_nrmse raise it (grids that differ, an
/// empty mask, a constant truth, non-finite values in the mask).
ChiScore score_chi(const Volume& chi, const Volume& truth, const Volume& mask);

/// The χ output of a network run ("chi", else the first output); Error{Internal} when the run
/// returned none.
NetworkOutput& chi_output(NetworkRun& run, std::string_view network_id);

}  // namespace qsmcore
