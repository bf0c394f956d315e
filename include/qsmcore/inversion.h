// Dipole inversions (methods.md §6): the local field (ppm) to χ (ppm) inside a mask. Direct:
// TKD and Tikhonov (closed form in k-space); iterative: TV-ADMM (Bilgic et al. 2014), RTS (Kames
// et al. 2018) and iLSQR (Li et al. 2015). Written from the papers; QSM.jl and QSM.rs were read
// for conventions and defaults only. χ is referenced to the mean inside the mask by default.
//
// Every method works in f32 on one FFT grid: the volume zero-padded to a fast FFT size (see
// `pad`), with the dipole kernel D = 1/3 − (k·b̂)²/|k|², D(0) = 0, as physics.h's tkd uses it.
// Defaults (options left at 0): TKD threshold 0.15; Tikhonov λ 3e-3; TV-ADMM λ 2e-4, ρ = 100λ,
// tol 1e-3, 250 iterations; RTS δ 0.15, μ 1e5, ρ 10, tol 1e-2, 20 iterations, 4 LSMR iterations;
// iLSQR λ 1e-3, tol 3e-3, 100 iterations. The default method, TV-ADMM, measured best on our
// phantoms (src/inversion/methods.h has the figures).
//
// iLSQR here is iLSQR-class: LSQR on the data term inside the mask (optionally weighted by Li et
// al.'s Laplacian weights) with χ constrained to the mask (optionally not) and a gradient
// (Tikhonov) penalty in place of their streaking-removal steps 2–4 (src/inversion/ilsqr.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "qsmcore/physics.h"
#include "qsmcore/volume.h"

namespace qsmcore {

enum class InversionMethod { Tkd, Tikhonov, TvAdmm, Rts, Ilsqr };
/// "tkd" | "tikhonov" | "tv" | "rts" | "ilsqr"; Error{InvalidInput} otherwise.
InversionMethod parse_inversion_method(const std::string& name);
const char* to_string(InversionMethod m);

enum class Reference {
  MaskMean,  // subtract the mean inside the mask (QSMxT's default)
  None,      // as the inversion leaves it
  Region,    // subtract the mean inside InversionOptions::reference_region (e.g. CSF)
};

/// Tikhonov's prior Γ in D/(D² + λΓ) (QSM.jl's `reg`): the identity, or the symbol of −Δ (the
/// squared norm of the voxel-scaled forward-difference gradient).
enum class TikhonovPrior { Identity, Gradient };

struct InversionOptions {
  InversionMethod method = InversionMethod::TvAdmm;
  double threshold = 0.0;   // TKD's |D| threshold; RTS's δ (|D| > δ is well conditioned). 0 = default
  double lambda = 0.0;      // Tikhonov / TV regularisation weight (0 = the method's default)
  double rho = 0.0;         // ADMM penalty, TV and RTS (0 = the method's default)
  double mu = 0.0;          // RTS: the data weight of its second step (0 = its default, 1e5)
  double tolerance = 0.0;   // iterative methods' relative-change tolerance (0 = default)
  int max_iterations = 0;   // iterative methods (0 = default)
  int lsmr_iterations = 0;  // RTS: LSMR iterations of its first step (0 = its default, 4)
  TikhonovPrior tikhonov_prior = TikhonovPrior::Identity;
  /// iLSQR: weight the data term by Li et al.'s Laplacian weights (else by the mask alone).
  bool laplacian_weights = false;
  /// iLSQR: constrain χ to the mask, the premise of a local field (the field of the sources inside
  /// it). Far more accurate on a true local field, far less on one a background removal left
  /// residuals in; src/inversion/ilsqr.cpp has the figures.
  bool support = true;
  /// TV-ADMM: the data term on the mask only (the field is unknown outside it, not 0); false is
  /// Bilgic et al.'s closed form, which fits a field of 0 there (methods.md §6.3).
  bool tv_masked_data = true;
  /// TV-ADMM with tv_masked_data: the voxels (6-connected) the data term's mask is eroded by; χ
  /// stays on the whole mask. The pipeline sets 2 (its local field is least right at the brain's
  /// edge); 0 here, for a local field that is right up to the edge (methods.md §6.3).
  int data_erode = 0;
  /// Zero voxels added to each axis before the FFT grid is rounded up to a fast size (even and
  /// 2,3,5,7-smooth along x, 2,3,5,7-smooth along y and z); −1: no padding at all, the FFTs run on
  /// the volume's own grid (periodic, as physics.h's tkd with Padding::None).
  int pad = 0;
  Reference reference = Reference::MaskMean;
  const Volume* reference_region = nullptr;       // Reference::Region: on the field's grid, above 0.5 = in
  std::function<void(double fraction)> progress;  // may be empty; called once per iteration
};

struct InversionResult {
  Volume chi;  // ppm, 0 outside the mask
  int iterations = 0;
  double final_change = 0.0;  // TV, RTS: the last relative change ‖Δx‖/‖x‖; iLSQR: LSQR's ‖r‖/‖b‖
};

/// χ from the local field (ppm) inside `mask` (above 0.5 = inside), B0 along `b0_dir` (voxel
/// axes). Error{InvalidInput} for grids that differ, an empty mask, options out of range.
/// Runs on max_threads() threads (the caller's ScopedThreads).
InversionResult invert_dipole(const Volume& local_field_ppm, const Volume& mask, const Vec3& b0_dir,
                              const InversionOptions& o = {});

/// References χ (ppm, 0 outside `mask`) in place as `o.reference` says: the mean inside the mask,
/// or inside o.reference_region ∩ mask, subtracted inside the mask; Reference::None leaves it.
/// What invert_dipole does to its result, for χ made otherwise (a network's). Error{InvalidInput}
/// for a region off χ's grid or without a voxel inside the mask.
void reference_chi(Volume& chi, const Volume& mask, const InversionOptions& o);

/// The data-consistency step for a χ map made elsewhere (a network's): the χ inside the mask
/// nearest `prior` that the field inside the mask agrees with, argmin over χ = Mχ of
/// ‖W(Dχ − f)‖² + λ‖χ − prior‖², by conjugate gradients from M·prior (methods.md §6.7); W is the
/// mask eroded by `data_erode` voxels (W = M at 0), keeping the brain's edge out of the data term.
/// Not in any network's recipe yet: methods.md §6.7 says what it gains on an exact local field and
/// loses on a pipeline's.
struct ConsistencyOptions {
  double lambda = 1e-3;    // the pull towards the prior (methods.md §6.7: the best on exact local fields)
  int iterations = 30;     // CG iterations at most
  double tolerance = 0.0;  // stop when ‖r‖ falls below this fraction of its start (0 = off)
  int pad = 0;             // as InversionOptions::pad
  int data_erode = 0;      // voxels (6-connected) the data term's mask is eroded by (methods.md §6.7)
  std::function<void(double fraction)> progress;  // may be empty; called once per iteration
};
/// χ in ppm, 0 outside the mask, not referenced. Error{InvalidInput} for grids that differ or
/// options out of range. Runs on max_threads() threads.
Volume consistent_chi(const Volume& prior, const Volume& field_ppm, const Volume& mask, const Vec3& b0_dir,
                      const ConsistencyOptions& o = {});
/// Its accounted high-water above what is held when it is called (its inputs), the χ it returns
/// included.
std::int64_t predict_consistency_bytes(const Dims3& dims, const ConsistencyOptions& o = {});

/// The field (ppm) χ makes inside `mask`, there (0 outside): D ∗ (M χ) on the inversions' FFT
/// grid (`pad` as InversionOptions::pad), f32, D(0) = 0 — the forward model the inversions fit.
/// `qsm pipeline` writes it as the local field after TV-ADMM (methods.md §5.2).
/// Error{InvalidInput} for grids that differ. Runs on max_threads() threads.
Volume dipole_field(const Volume& chi, const Volume& mask, const Vec3& b0_dir, int pad = 0);
/// Its accounted high-water above what is held when it is called, the field it returns included.
std::int64_t predict_dipole_field_bytes(const Dims3& dims, int pad = 0);

/// The FFT grid the inversion of a volume of `dims` runs on (the volume padded as `o.pad` says).
Dims3 inversion_fft_dims(const Dims3& dims, const InversionOptions& o = {});

/// The accounted high-water invert_dipole reaches above what is held when it is called (the
/// inputs; the f64 χ it returns included), from the sizes of the arrays it allocates.
std::int64_t predict_inversion_bytes(const Dims3& dims, const InversionOptions& o = {});

}  // namespace qsmcore
