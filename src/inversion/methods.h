// The dipole inversions behind invert_dipole (inversion.cpp checks the inputs, pads, references
// and crops): each takes the problem on its FFT grid and returns χ there, in f32, unmasked and
// unreferenced, with its iteration count.
#pragma once
#include <cstdint>

#include "core/accounted_array.h"
#include "qsmcore/inversion.h"

namespace qsmcore::inversion {

struct Problem {
  const Volume& field;  // ppm, on the volume's grid
  const Volume& mask;   // above 0.5 = inside
  Vec3 b0_dir;
  Dims3 grid;  // the FFT grid (fft_grid of the volume's dims)
  const InversionOptions& options;

  /// Reports `fraction` of the work done, if the caller asked.
  void progress(double fraction) const {
    if (options.progress) options.progress(fraction);
  }
};

struct Solution {
  AccountedArray<float> chi;  // on the FFT grid
  int iterations = 0;
  double final_change = 0.0;
};

// Defaults (methods.md §6). Where ours differ from the reference implementations', they were
// measured on the head phantom's true local field (demeaned NRMSE in the mask; 128³ axial and tilted
// 20°, 96³, 112×128×96 and 181×217×181, each noise-free and with σ = 1 ppb of noise on the field):
//  - TV λ: 2e-4 had the lowest mean NRMSE over those ten cases (12.2 %; 1e-4: 13.1 %, 3e-4:
//    12.6 %; over the eight smaller ones 3e-5: 15.7 %, 5e-4: 15.2 %; QSM.jl's 1e-3: 35 % at 64³);
//    3e-4 was 0.3–0.6 point better at 181×217×181 only. ρ = 100λ: 37 iterations at 128³ with the
//    lowest NRMSE (10λ, 25λ, 200λ, 500λ: 64, 49, 35, 45 iterations, 0.2–1 point worse); tol 1e-3
//    is within 0.1 point of 1e-4 (and 0.9 better than 3e-3, at 1.7× the iterations).
//  - Tikhonov λ: 3e-3 (128³: 24.7 % / 31.6 % noise-free / noisy; QSM.jl's 1e-2: 32.5 % / 35.2 %);
//    the gradient prior was better still (21.8 % / 24.5 %) but the identity stays the default,
//    as QSM.jl has it.
//  - TKD: 0.15 was the best threshold with noise (0.1 without).
//  - iLSQR: see ilsqr.cpp.
//  - Padding beyond the fast FFT size (16, 32, 64 voxels per axis, 128³; TKD, TV, RTS) changed no
//    NRMSE by more than 0.9 point, and not in one direction, while the memory grows with the grid
//    (TV: 30 → 43, 59, 102 bytes per voxel): only the rounding to a fast size is kept.
inline constexpr double kTkdThreshold = 0.15;     // QSM.jl, QSM.rs; measured best with noise
inline constexpr double kTikhonovLambda = 3e-3;   // measured best on the head phantom (QSM.jl: 1e-2)
inline constexpr double kTvLambda = 2e-4;         // measured best on the head phantom (QSM.rs: 2e-4)
inline constexpr double kTvRhoPerLambda = 100.0;  // QSM.jl: ρ = 100λ
inline constexpr double kTvTolerance = 1e-3;      // QSM.jl, QSM.rs
inline constexpr int kTvMaxIterations = 250;      // QSM.jl, QSM.rs
// The data split's penalty with the data term on the mask (tv_admm.cpp): fields and χ in ppm, so
// the data term and its split weigh alike at 1 (FANSI's μ₂ = 1).
inline constexpr double kTvDataMu = 1.0;
// Its relative-change tolerance: the split converges more slowly (‖Δx‖/‖x‖ 2e-2 after 25
// iterations, 9e-3 after 50, 1.3e-3 after 250 on the atlas head's scan). 1e-2 (38 iterations
// there, 42.5 % NRMSE) left the 96³ phantom's true local field at 14.1 % (the unmasked form: 10.9);
// 3e-3 (116 iterations, 42.0 %) keeps it under 12.5 %.
inline constexpr double kTvMaskedDataTolerance = 3e-3;
inline constexpr double kRtsDelta = 0.15;  // Kames et al. 2018; QSM.jl, QSM.rs
inline constexpr double kRtsMu = 1e5;
inline constexpr double kRtsRho = 10.0;
inline constexpr double kRtsTolerance = 1e-2;
inline constexpr int kRtsMaxIterations = 20;
inline constexpr int kRtsLsmrIterations = 4;
inline constexpr double kRtsTau = 0.7;           // adaptive penalty: grow ρ when the residual
inline constexpr double kRtsGamma = 5.0;         // falls by less than τ, by γ
inline constexpr double kIlsqrTolerance = 3e-3;  // measured: 1e-2 (QSM.rs) stops 1–2 pp short
inline constexpr double kIlsqrLambda = 1e-3;     // the gradient penalty: measured on the head phantom
inline constexpr int kIlsqrMaxIterations = 100;  // QSM.rs, SEPIA: 50; 48 ran at 128³

/// The option if it was given (non-zero), else the default.
inline double or_default(double given, double fallback) {
  return given != 0.0 ? given : fallback;
}
inline int or_default(int given, int fallback) {
  return given != 0 ? given : fallback;
}

Solution tkd_direct(const Problem& p);
Solution tikhonov_direct(const Problem& p);
Solution tv_admm(const Problem& p);
Solution rts(const Problem& p);
Solution ilsqr(const Problem& p);

}  // namespace qsmcore::inversion
