// The steps the relaxometry maps are made of (methods.md §7), shared by the files of
// src/relaxometry/: input checks, the per-voxel R2* estimators, the masked Gaussian high-pass of
// the field and the minimum-intensity projection. Internal to src/relaxometry/ (and its tests).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/accounted_array.h"
#include "qsmcore/relaxometry.h"

namespace qsmcore::relaxometry {

[[noreturn]] void invalid(const std::string& what, const std::string& message);

/// Magnitude, echo times, mask and options fit together for r2star_map (see its contract).
void check_r2star_inputs(const Volume& magnitude, const std::vector<double>& te_s, const Volume* mask,
                         const R2starOptions& o);
/// Magnitude, field, mask, echo times and options fit together for swi (see its contract).
void check_swi_inputs(const Volume& magnitude, const Volume& field_hz, const Volume& mask,
                      const std::vector<double>& te_s, const SwiOptions& o);

/// The fewest echoes a method fits: 2 for log-linear, 3 for ARLO.
int min_echoes(R2starMethod m);

/// Least-squares slope of ln s[e] on te[e] over n ≥ 2 echoes (all s > 0), negated: R2* in Hz,
/// unclamped. `work` holds 2n doubles.
double loglinear_r2star(const double* s, const double* te, int n, LogLinearWeighting w, double* work);

/// ARLO's R2* (Hz, unclamped; ±inf where the closed form leaves every exponential's range) from
/// n ≥ 3 echoes spaced by delta_s, with or without the Simpson correction (R2starOptions).
double arlo_r2star(const double* s, int n, double delta_s, bool simpson_correction);

/// ARLO's published closed form's raw rate Δ·R (dimensionless) mapped to the exact R2*·Δ of a
/// mono-exponential whose samples give that value (|x| < 3; ±inf beyond).
double simpson_corrected_rate(double x);

/// The field high-passed inside the mask (f32, Hz, 0 outside): f − Σ g·f·m / Σ g·m with a
/// separable Gaussian of sigma_vox per axis (truncated at 3σ, zero beyond the volume; σ = 0
/// leaves an axis alone; all 0 returns the field itself). progress(f) for f in [0, 1].
AccountedArray<float> highpass_in_mask(const Volume& field_hz, const Volume& mask, const Vec3& sigma_vox,
                                       const std::function<void(double)>& progress);

/// The median of the positive values of hp at voxels inside the mask (mean of the two middle
/// ones for an even count); 0 when there are none.
double median_positive(const AccountedArray<float>& hp, const Volume& mask);

/// On v's grid: the minimum of v over `slices` slices along z centred on each slice (slices
/// k − ⌊n/2⌋ … k − ⌊n/2⌋ + n − 1, cut at the ends). Frame 0.
Volume min_projection_z(const Volume& v, int slices);

}  // namespace qsmcore::relaxometry
