// QSM physics (spec physics.md §1–§3): units and conversions, the B0 direction in voxel axes,
// the dipole kernel in the variants the networks use, the forward field model and a TKD
// inversion. Internal units everywhere: χ and field in ppm, phase in rad, TE in s, B0 in T,
// voxel in mm. Volumes are column-major f64 (see volume.h).
#pragma once
#include <cmath>
#include <numbers>
#include <optional>
#include <span>
#include <string>

#include "qsmcore/volume.h"

namespace qsmcore {

// ---- units (physics.md §1) ---------------------------------------------------------------

/// γ̄ = 42.58 MHz/T, the value qsm-forward's generate_signal and QSM.jl use. γ is derived from it
/// (2π·γ̄ = 267.54e6 rad/s/T; the spec's "267.52" differs in the 5th digit) so that every
/// conversion below round-trips exactly.
inline constexpr double kGammaBarHzPerT = 42.58e6;
inline constexpr double kGammaRadPerSPerT = 2.0 * std::numbers::pi * kGammaBarHzPerT;

/// Hz per ppm of field at B0 (127.74 at 3 T, 298.06 at 7 T).
inline double hz_per_ppm(double b0_t) { return kGammaBarHzPerT * b0_t * 1e-6; }
/// Δf = φ/(2π·TE).
inline double phase_to_hz(double phase_rad, double te_s) { return phase_rad / (2.0 * std::numbers::pi * te_s); }
inline double hz_to_phase(double hz, double te_s) { return hz * 2.0 * std::numbers::pi * te_s; }
inline double hz_to_ppm(double hz, double b0_t) { return hz / hz_per_ppm(b0_t); }
inline double ppm_to_hz(double ppm, double b0_t) { return ppm * hz_per_ppm(b0_t); }
/// Unwrapped phase ↔ field: φ = 2π·field·B0·γ̄·TE (field in ppm).
inline double phase_to_ppm(double phase_rad, double te_s, double b0_t) {
  return hz_to_ppm(phase_to_hz(phase_rad, te_s), b0_t);
}
inline double ppm_to_phase(double ppm, double te_s, double b0_t) { return hz_to_phase(ppm_to_hz(ppm, b0_t), te_s); }
/// UK Biobank and OpenRecon write χ in ppb.
inline double ppb_to_ppm(double ppb) { return ppb * 1e-3; }
inline double ppm_to_ppb(double ppm) { return ppm * 1e3; }
/// Wraps to (−π, π].
double wrap_phase(double phase_rad);

/// The unit a field map comes in; the factor to ppm needs B0 (Hz) or B0 and TE (rad).
enum class FieldUnit { Ppm, Ppb, Hz, Rad };
/// "ppm" | "ppb" | "hz" | "rad" (case-insensitive); Error{InvalidInput} otherwise.
FieldUnit parse_field_unit(const std::string& s);
const char* to_string(FieldUnit u);
/// Multiply a field in `unit` by this to get ppm. B0/TE are needed only by Hz/Rad; a missing
/// or non-positive one is Error{InvalidInput} naming it.
double field_to_ppm_factor(FieldUnit unit, std::optional<double> b0_t, std::optional<double> te_s);

/// Factor that brings raw phase values in [lo, hi] to radians: 1 if they already lie in
/// [−π, π] (1e-3 slack), π/4096 for Siemens-style integers in [−4096, 4095] (after the header's
/// scl_slope = 2, scl_inter = −4096), else Error{InvalidInput} naming `what` and the range.
double phase_to_rad_factor(double lo, double hi, const std::string& what);

/// Z-score normalisation used by several networks: (x − mean)/std and its inverse.
struct ZScore {
  double mean = 0.0;
  double std = 1.0;
};
void normalise(std::span<double> values, const ZScore& z);
void denormalise(std::span<double> values, const ZScore& z);

// ---- B0 direction (physics.md §2) ----------------------------------------------------------

/// Unit B0 direction (scanner z) in voxel axes, from the affine's direction cosines:
/// b_c = (column c of the 3×3 part, normalised) · ẑ. Error{InvalidInput} for a singular affine.
Vec3 b0_dir_from_affine(const Affine& affine);
/// Parses "x,y,z" (voxel axes) into a unit vector; Error{InvalidInput} for a bad or zero vector.
Vec3 parse_b0_dir(const std::string& text);
/// Angle (degrees) between B0 and the third voxel axis: 0 for an axial acquisition.
double b0_obliquity_deg(const Vec3& b0_dir_voxel);
/// A warning when `network` assumes axial data (B0 along voxel z) and B0 is more than
/// `tolerance_deg` away from it; std::nullopt when the volume is axial enough.
std::optional<std::string> axial_only_warning(const Vec3& b0_dir_voxel, const std::string& network,
                                              double tolerance_deg = 1.0);

// ---- dipole kernel (physics.md §2) ---------------------------------------------------------

/// Where the spectrum's DC sits. For even sizes both place frequency m/(N·Δx) at the same array
/// index; Centred follows QSM.rs's NeXtQSM arithmetic ((idx − n/2)/(n/2)/(2·voxel), written at
/// fftshifted positions) so its values match that code to the last bit of f64.
enum class KernelGrid { Corner, Centred };

struct KernelOptions {
  KernelGrid grid = KernelGrid::Corner;
  double dc_value = 0.0;     // D at k = 0: 0 (LPCNN, MoDL, xQSM) or 1/3 (NeXtQSM, qsm-forward)
  bool normalise_b = true;   // NeXtQSM uses b̂ as given
  double eps = 0.0;          // added to |k|² in the denominator (NeXtQSM: FLT_EPSILON)
  /// The kernel of D² (LPCNN's dk·dk in one FFT pass): symmetrised as (D(k)² + D(−k)²)/2, which
  /// differs from the square of D's on the Nyquist planes of even sizes.
  bool squared = false;

  /// LPCNN / MoDL glue in QSM.rs and deepMRI's xQSM forward model.
  static KernelOptions lpcnn_modl();
  /// QSM.rs NeXtQSM glue.
  static KernelOptions nextqsm();
  /// qsm-forward (on its 2N grid).
  static KernelOptions qsm_forward();
};

/// D at full-spectrum index (i, j, k) of a grid of `dims` (column-major, x fastest):
/// D = 1/3 − (k·b)²/(|k|² + eps), kᵢ = mᵢ/(Nᵢ·Δxᵢ).
double dipole_value(const Dims3& dims, const Vec3& voxel_mm, const Vec3& b0_dir, const KernelOptions& o,
                    std::int64_t i, std::int64_t j, std::int64_t k);

/// The kernel on FFTW's half spectrum (x from 0 to nx/2, all of y and z), symmetrised as
/// (D(k) + D(−k))/2. Multiplying a real-to-complex spectrum by it and transforming back gives
/// exactly real(ifft(D·fft(v))), which is what the networks' glue computes with full FFTs.
class DipoleKernel {
 public:
  DipoleKernel() = default;
  const Dims3& dims() const { return dims_; }
  std::int64_t half_nx() const { return dims_[0] / 2 + 1; }
  std::int64_t count() const { return half_nx() * dims_[1] * dims_[2]; }
  const double* data() const { return reinterpret_cast<const double*>(values_.data()); }
  /// Its values' block (an unrolled network parks it while its graphs run).
  const Buffer& storage() const { return values_; }
  double half(std::int64_t i, std::int64_t j, std::int64_t k) const {
    return data()[i + half_nx() * (j + dims_[1] * k)];
  }

 private:
  friend DipoleKernel make_kernel(const Dims3&, const Vec3&, const Vec3&, const KernelOptions&);
  Dims3 dims_{0, 0, 0};
  Buffer values_;
};

DipoleKernel make_kernel(const Dims3& dims, const Vec3& voxel_mm, const Vec3& b0_dir, const KernelOptions& o);

// ---- forward model and inversion (physics.md §3) -------------------------------------------

enum class Padding {
  None,             // periodic: the FFT grid is the volume
  ZeroTo2N,         // 2N per axis, data first, zeros after
  CornerValueTo2N,  // 2N per axis, filled with χ[−1,−1,−1] (qsm-forward)
};

struct ForwardOptions {
  KernelOptions kernel = KernelOptions::qsm_forward();
  Padding padding = Padding::CornerValueTo2N;
};

/// field = real(F⁻¹{D·F{χ}}) on the padded grid, cropped back to χ's grid. χ in ppm → field in
/// ppm relative to B0; `b0_dir` in voxel axes. Only frame 0 of χ is used.
Volume forward_field(const Volume& chi, const Vec3& b0_dir, const ForwardOptions& o = {});

struct TkdOptions {
  double threshold = 0.19;  // |D| below this is replaced by sign(D)·threshold
  KernelOptions kernel = KernelOptions::lpcnn_modl();
  Padding padding = Padding::None;
};

/// Thresholded k-space division: χ = F⁻¹{F{field}/D_t} · mask, D_t = D where |D| ≥ t, else
/// sign(D)·t, and 1/D_t = 0 at k = 0 (the mean of χ is not determined by the field). The field
/// is multiplied by the mask first. Error{InvalidInput} if the mask is not on the field's grid.
Volume tkd(const Volume& local_field, const Volume& mask, const Vec3& b0_dir, const TkdOptions& o = {});

}  // namespace qsmcore
