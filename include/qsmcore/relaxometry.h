// More maps from the same multi-echo scan (methods.md §7): R2* and T2* from the magnitudes
// (log-linear least squares, or ARLO — Pei et al. 2015, doi:10.1002/mrm.25137, with its erratum
// doi:10.1002/mrm.27807), and a susceptibility-weighted image (SWI) from magnitude and field map
// (CLEAR-SWI's recipe, Eckstein et al. 2021, doi:10.1016/j.neuroimage.2021.118175). Written from
// the papers.
#pragma once
#include <functional>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore {

enum class R2starMethod {
  LogLinear,  // least squares of ln S against TE (≥ 2 echoes)
  Arlo,       // auto-regression on linear operations (≥ 3 echoes, equally spaced within 1 %)
};

/// The log-linear fit's weights. Both are exact on noise-free decays. Under noise S² weighting
/// (the inverse variance of ln S, as σ_lnS ≈ σ/S) reaches the Cramér–Rao bound where unweighted
/// least squares (QSM.jl's r2star_ll) lets the noisy late echoes dominate.
enum class LogLinearWeighting {
  SignalSquared,  // w_e = S_e², then one refit with the fitted decay's S_e² (removes the bias
                  // that weights taken from noisy samples bring)
  Unweighted,     // w_e = 1
};

struct R2starOptions {
  R2starMethod method = R2starMethod::LogLinear;
  LogLinearWeighting weighting = LogLinearWeighting::SignalSquared;
  /// ARLO's closed form rests on Simpson's rule, which is not exact for an exponential: on a
  /// noise-free decay it returns T2*·(1 + O((R2*·Δ)⁴/180)). When true, that closed form's value
  /// is mapped through the exact Simpson relation of a mono-exponential (one closed-form step),
  /// which makes ARLO exact on noise-free decays; false gives the published estimator.
  bool arlo_simpson_correction = true;
  double max_r2star_hz = 500.0;  // estimates are clamped to [0, max]; non-finite ones set to 0
  std::function<void(double fraction)> progress;
};

/// R2* in Hz (1/s) from the magnitudes (frames = echoes) and their echo times (s), inside the
/// mask (above 0.5; null = everywhere), 0 outside. A voxel whose magnitude is not positive in
/// some echo is fitted on the echoes before the first such echo, and set to 0 when fewer than
/// the method's minimum remain. Error{InvalidInput} for too few echoes, TEs not positive and
/// increasing (or ≥ 1 s: seconds are expected), ARLO on unequal spacing, grids that differ,
/// NaN/Inf magnitudes inside the mask.
Volume r2star_map(const Volume& magnitude, const std::vector<double>& te_s, const Volume* mask = nullptr,
                  const R2starOptions& o = {});
/// T2* in s = 1/R2* (0 where R2* is 0, negative or not finite).
Volume t2star_from_r2star(const Volume& r2star_hz);

/// How the high-passed phase φ becomes a phase mask in [0, 1].
enum class SwiPhaseScaling {
  /// CLEAR-SWI's default: (1 + tanh(1 − φ/m))/2 with m = median(positive in-mask φ)·10/strength.
  /// Scale-free: the same image for any echo time, field strength or unit of φ.
  Tanh,
  /// Haacke's classic positive mask: (1 − φ/π)^strength for φ > 0 (0 beyond π), 1 for φ ≤ 0;
  /// φ in rad at the chosen echo, so it depends on TE and B0.
  Classic,
};

struct SwiOptions {
  Vec3 highpass_sigma_voxels{4.0, 4.0, 0.0};  // Gaussian high-pass of the field (0 = that axis not smoothed;
                                              // all 0 = no high-pass)
  SwiPhaseScaling scaling = SwiPhaseScaling::Tanh;
  double strength = 4.0;  // the phase mask's strength (tanh) or power (classic)
  int phase_echo = -1;    // φ = 2π·field·TE of this echo (from 0; −1 = the last); only Classic depends on it
  int mip_slices = 7;     // minimum-intensity projection window (slices along z)
  std::function<void(double fraction)> progress;
};

struct SwiResult {
  Volume swi;  // magnitude × phase mask (the magnitude's units) inside the mask, 0 outside
  Volume mip;  // on swi's grid: the minimum of swi over mip_slices slices centred on each slice
               // (slices k − ⌊n/2⌋ … k − ⌊n/2⌋ + n − 1, cut at the volume's ends)
};

/// SWI from the magnitude (one frame, or one per echo: combined by root-sum-of-squares, CLEAR-SWI's
/// "SNR" combination) and a field map (Hz, e.g. the pipeline's total field) inside the mask:
/// paramagnetic (positive, venous) frequency darkens the image. The field is high-passed by
/// subtracting its Gaussian smoothing normalised inside the mask, Σ g·f·m / Σ g·m.
SwiResult swi(const Volume& magnitude, const Volume& field_hz, const Volume& mask, const std::vector<double>& te_s,
              const SwiOptions& o = {});

}  // namespace qsmcore
