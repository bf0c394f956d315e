// From multi-echo phase to the total field (methods.md §3): the receiver phase offset removed
// (MCPC-3D-S, Eckstein et al. 2018, doi:10.1002/mrm.26963), every echo unwrapped (ROMEO with
// temporal unwrapping, or Laplacian), and the field fitted over the echoes with magnitude- and
// TE-weighted averaging (ROMEO's B0 map). Written from the papers; MriResearchTools was read for
// conventions only.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "qsmcore/unwrap.h"
#include "qsmcore/volume.h"

namespace qsmcore {

enum class UnwrapMethod { Romeo, Laplacian };

/// The weight w_e of echo e in B0 = Σ w_e·φ_e/(2π·TE_e) / Σ w_e (methods.md §3.2).
enum class EchoWeighting {
  PhaseSnr,       // mag_e·TE_e (ROMEO's and QSMxT's default)
  PhaseVariance,  // mag_e²·TE_e² (inverse variance of φ_e/TE_e)
  Average,        // 1
  Te,             // TE_e
};

/// "romeo" | "laplacian"; "snr" | "variance" | "average" | "te" (what the CLI, Python and the web
/// page take). Error{InvalidInput} naming `what` (the option or argument) and the choices otherwise.
UnwrapMethod parse_unwrap_method(const std::string& name, const std::string& what = "unwrap");
EchoWeighting parse_echo_weighting(const std::string& name, const std::string& what = "echo weighting");

struct FieldMapOptions {
  /// MCPC-3D-S on echoes offset_echoes (needs 2 echoes with different TEs); off for one echo.
  bool remove_phase_offset = true;
  std::int64_t offset_echoes[2] = {0, 1};
  /// The offset's complex Gaussian smoothing in mm per axis, at least 1.5 voxels (so that a voxel
  /// whose echo difference was unwrapped wrong is outvoted); 0 = none. Its bias on a curved
  /// offset and at the mask's edge is corrected by a second pass (twicing). 2 mm, not ROMEO's CLI
  /// default of 7: on the raw phantom (its offset spans π over the head) the total field's RMS
  /// error was 0.28 / 0.30 / 0.38 / 0.49 / 1.00 Hz at 1 / 2 / 3 / 4 / 7 mm with peak SNR 30, and
  /// 0.12 at 2 mm against 0.54 at 7 with SNR 100 (181×217×181): the offset comes from the two
  /// earliest, strongest echoes, so noise asks for little smoothing and a curved offset for less.
  double offset_sigma_mm = 2.0;
  /// Romeo: the template echo (romeo.template_echo) by ROMEO, every other echo temporally from it
  /// (or, with romeo.individual, every echo by ROMEO on its own). Laplacian: the template echo by
  /// Laplacian unwrapping made congruent, the others temporally (one solve, and on the head
  /// phantom exact where per-echo Laplacian fields were off by whole turns by the air cavity).
  UnwrapMethod unwrap = UnwrapMethod::Romeo;
  EchoUnwrapOptions romeo;
  EchoWeighting weighting = EchoWeighting::PhaseSnr;
  /// Fill FieldMap::phase_offset (8 bytes a voxel); off, it stays empty and its room is never
  /// taken (a pipeline that does not write it).
  bool output_phase_offset = true;
  std::function<void(double fraction, const std::string& step)> progress;
};

struct FieldMap {
  Volume total_field_hz;  // B0 offset in Hz inside the mask, 0 outside
  /// The field's standard error in Hz from the magnitudes' noise (σ_φ,e = σ/mag_e, at most a
  /// uniform phase's π/√3, propagated through the weighted fit), inside the mask, 0 outside:
  /// larger where data are worse. σ is estimated from the data: with ≥ 3 echoes from the residuals
  /// of a weighted line over TE (median over the mask), else from the magnitude outside the mask
  /// (Rayleigh); floored at 1e-6 of the peak magnitude, so it is positive inside the mask (notes
  /// say which). What background removal and inversions may weight by (1/noise).
  Volume noise_hz;
  /// rad, the removed receiver offset inside the mask (zeros when none was removed; empty when
  /// FieldMapOptions::output_phase_offset is off).
  Volume phase_offset;
  std::vector<std::string> notes;  // what was assumed (e.g. single echo: offset taken as 0; σ)
};

/// The total field of a scan: magnitude and phase (rad, wrapped) with one frame per echo, their
/// echo times (s, strictly increasing), and the mask (one frame, above 0.5 = inside).
/// Error{InvalidInput} naming the problem for grids or echo counts that differ, echo times that
/// are not positive or not increasing, NaN/Inf, an empty mask, bad offset echoes or template.
/// The global 2π multiple of the unwrapped phase is chosen so that the field's median in the mask
/// lies within half a turn of the template echo of 0 (a shimmed brain), moved by whole turns
/// where the next echo agrees better. Peak above the inputs: 34 bytes a voxel for 4 echoes
/// (ROMEO; 36 Laplacian), outputs included.
FieldMap map_field(const Volume& magnitude, const Volume& phase, const std::vector<double>& te_s, const Volume& mask,
                   const FieldMapOptions& o = {});

/// MCPC-3D-S's offset alone: φ₀ = ∠S₁ − TE₁/ΔTE·unwrap(∠(S₂·S̄₁)) (the unwrapped difference's
/// median centred within half a turn of 0), smoothed as the complex field |S₁|·e^{iφ₀} (Gaussian
/// of offset_sigma_mm, twice) inside the mask; 0 outside. Frames offset_echoes of magnitude and
/// phase. Error{InvalidInput} as map_field, and for offset echoes with the same TE.
Volume mcpc3ds_phase_offset(const Volume& magnitude, const Volume& phase, const std::vector<double>& te_s,
                            const Volume& mask, const FieldMapOptions& o = {});

}  // namespace qsmcore
