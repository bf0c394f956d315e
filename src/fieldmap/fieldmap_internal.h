// The steps map_field is made of (methods.md §3), shared by its files: input checks, MCPC-3D-S's
// offset as an f32 work array, the complex Gaussian smoothing it needs, the weighted fit over the
// echoes and the noise estimate. Internal to src/fieldmap/.
#pragma once
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "core/accounted_array.h"
#include "qsmcore/fieldmap.h"

namespace qsmcore::fieldmap {

inline constexpr double kTwoPi = 2.0 * std::numbers::pi;

/// Wraps to [−π, π] (the sign at ±π does not matter to any caller here).
inline double wrap(double x) {
  return std::remainder(x, kTwoPi);
}

[[noreturn]] void invalid(const std::string& what, const std::string& message);

/// Magnitude and phase on one grid with one frame per echo, one finite positive TE per echo, a
/// non-empty mask on their grid, finite values. `what` names the caller in messages.
void check_scan(const Volume& magnitude, const Volume& phase, const std::vector<double>& te_s, const Volume& mask,
                const std::string& what);
/// The offset options: two distinct echoes in range with different TEs, a usable σ.
void check_offset_options(const Volume& phase, const std::vector<double>& te_s, const FieldMapOptions& o,
                          const std::string& what);

/// MCPC-3D-S's smoothed offset φ₀ (rad) inside the mask, 0 outside (f32: a smooth angle needs no
/// more). The checks above must have passed.
AccountedArray<float> mcpc3ds_offset(const Volume& magnitude, const Volume& phase, const std::vector<double>& te_s,
                                     const Volume& mask, const FieldMapOptions& o);

/// The median of `values` (reordered); 0 for none.
double median_of(AccountedArray<float>& values);

/// 2π·round(median/2π) of an unwrapped phase over the mask: the global 2π multiple to subtract so
/// that its median lies in (−π, π].
double centring_shift(const Volume& unwrapped, const Volume& mask);

/// Smooths the complex field re + i·im (zero outside the mask) with a separable Gaussian of
/// sigma_vox per axis (truncated at 3σ, zero beyond the volume), in place.
void smooth_complex(AccountedArray<float>& re, AccountedArray<float>& im, const Dims3& dims, const Vec3& sigma_vox);

/// The weight of echo e in the fit: w_e(mag_e, TE_e) of EchoWeighting.
inline double echo_weight(EchoWeighting w, double mag, double te) {
  switch (w) {
    case EchoWeighting::PhaseSnr:
      return mag * te;
    case EchoWeighting::PhaseVariance:
      return mag * mag * te * te;
    case EchoWeighting::Average:
      return 1.0;
    case EchoWeighting::Te:
      return te;
  }
  return 1.0;
}

/// Reads the offset-free wrapped phase of echo e at voxel i: wrap(φ_e − φ₀), φ₀ = 0 without one.
struct CorrectedPhase {
  const Volume* phase = nullptr;
  const float* offset = nullptr;  // null: no offset removed
  double at(std::int64_t e, std::int64_t i) const {
    const double p = phase->data()[i + e * phase->voxels()];
    return offset == nullptr ? p : wrap(p - static_cast<double>(offset[i]));
  }
};

/// The echo whose phase shapes echo e's ROMEO weights: the next one (the previous for the last);
/// −1 for a single echo.
std::int64_t partner_echo(std::int64_t e, std::int64_t echoes);
/// Frames (e, partner) of the offset-free wrapped phase inside the mask, 0 outside (one frame
/// when partner < 0).
Volume corrected_pair(const CorrectedPhase& cp, const Volume& mask, std::int64_t e, std::int64_t partner);
/// The global 2π multiple to subtract from an echo's spatially unwrapped phase: its median
/// centred (centring_shift), moved by whole turns where the partner (frame 1 of `pair`, at
/// TE ratio partner/echo) agrees better.
double template_shift(const Volume& unwrapped, const Volume& pair, const Volume& mask, double te_ratio);

/// The field (Hz) from every echo unwrapped on its own by ROMEO (its individual mode), streamed
/// echo by echo into the weighted sum.
Volume per_echo_field(const Volume& magnitude, const CorrectedPhase& cp, const std::vector<double>& te_s,
                      const Volume& mask, const FieldMapOptions& o);

/// σ of the magnitude noise (per real/imaginary channel) and how it was found (a note).
struct NoiseLevel {
  double sigma = 0.0;
  std::string how;
};

/// The noise map: the standard error of the weighted field estimate, σ_B = √(Σ w_e²·s_e²)/Σ w_e
/// with s_e = min(σ/mag_e, π/√3)/(2π·TE_e) (a phase noise no larger than a uniform phase's),
/// inside the mask. Estimates σ first (from the fit's residuals with ≥ 3 echoes, else from the
/// magnitude outside the mask) and says how in `notes`. `noise` is on the scan's grid.
void noise_map(const Volume& magnitude, const CorrectedPhase& phase, const std::vector<double>& te_s,
               const Volume& mask, const Volume& field_hz, EchoWeighting weighting, Volume& noise,
               std::vector<std::string>& notes);

}  // namespace qsmcore::fieldmap
