// QSM quality metrics as QSM-CI's metrics/metrics.py computes them (physics.md §5), in f64.
// The ROI (default: pred ≠ 0) selects the voxels of RMSE, NRMSE, MAD and CC; prediction,
// reference and ROI are first cropped to the ROI's bounding box, and HFEN, XSIM and GXE use the
// whole box, voxels outside the ROI included.
#pragma once
#include "qsmcore/volume.h"

namespace qsmcore {

struct QsmMetrics {
  double rmse = 0.0;   // √mean(e²), e = pred − ref, ROI
  double nrmse = 0.0;  // 100·‖e‖/‖ref‖, ROI (percent)
  double hfen = 0.0;   // ‖LoG(ref) − LoG(pred)‖/‖LoG(ref)‖, σ = 1.5, scipy gaussian_laplace, box
  double mad = 0.0;    // mean|e|, ROI
  double xsim = 0.0;   // skimage SSIM, win 3, K1 0.01, K2 0.001, data_range 1, box
  double cc = 0.0;     // Pearson r, ROI
  double gxe = 0.0;    // √mean((∇pred − ∇ref)²) over 3 components, numpy.gradient, box
  std::int64_t roi_voxels = 0;
  Dims3 box_begin{0, 0, 0};  // bounding box of the ROI, half-open [begin, end)
  Dims3 box_end{0, 0, 0};
};

/// pred and ref (and roi, when given) must share a grid; frame 0 is used. Error{InvalidInput}
/// for mismatched grids, an empty ROI, a box thinner than 3 voxels (XSIM's window) or a zero
/// reference in the ROI (NRMSE undefined).
QsmMetrics compute_metrics(const Volume& pred, const Volume& ref, const Volume* roi = nullptr);

/// NRMSE in percent as QSM-CI's current scorer computes it (methods.md §8), over every voxel of
/// `mask` (above 0.5): 100·‖(p − p̄) − (r − r̄)‖/‖r − r̄‖, the means taken over the mask. A voxel the
/// prediction left at 0 (a background removal's eroded rim) counts as error, unlike
/// compute_metrics' ROI. Error{InvalidInput} for grids that differ, an empty mask, a constant
/// reference, or a non-finite value inside the mask.
double demeaned_nrmse(const Volume& pred, const Volume& ref, const Volume& mask);

}  // namespace qsmcore
