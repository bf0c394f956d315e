// A multi-echo gradient-echo scan as the phase-to-χ stages take it (methods.md §1): magnitude and
// phase, one frame per echo, with the echo times, the field strength and the B0 direction, read
// from NIfTI files and their JSON sidecars (what dcm2niix and BIDS write) and checked before any
// stage runs. Phase comes out in radians, wrapped to (−π, π], whatever units the file used.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore {

/// The files of one scan: one 4-D file each (frames = echoes), or one 3-D file per echo in echo
/// order, or one 3-D file each for a single echo. Each file's sidecar is the .json beside it
/// (x.nii.gz → x.json); for a 4-D file its EchoTime may be a list, one per frame.
struct ScanFiles {
  std::vector<std::string> magnitude;
  std::vector<std::string> phase;
};

/// What the user typed, which wins over the sidecars.
struct ScanOverrides {
  std::vector<double> te_s;           // --te: one per echo, seconds
  std::optional<double> b0_t;         // --b0: tesla
  std::optional<Vec3> b0_dir;         // --b0-dir: voxel axes (normalised here)
  std::optional<double> phase_scale;  // --phase-scale: radians = wrap(raw · scale)
};

/// How raw phase values became radians: rad = wrap((raw + raw_offset) · factor). The offset is
/// in raw units, added before the factor, so that whole-number raw values map exactly
/// ((v − 2048) · π/2048 for unscaled 12-bit phase).
struct PhaseScaling {
  double factor = 1.0;
  double raw_offset = 0.0;
  /// One line for the user, e.g. "phase values in [-4096, 4094] (integers): taken as Siemens'
  /// scaled 12-bit phase, × π/4096".
  std::string assumed;
  double raw_min = 0.0, raw_max = 0.0;  // the range of the raw values over every echo
};

/// Brings raw phase values whose range over every echo is [lo, hi] (all_integers: every value a
/// whole number) to radians: radians already ([−π, π] with 1e-3 slack, or [0, 2π] wrapped; either
/// spanning at least π),
/// vendor integers in [−4096, 4095] (× π/4096, Siemens after its header scaling) or [0, 4095]
/// ((v − 2048) · π/2048, unscaled 12-bit), each recognised only when the values span at least
/// half of the range (a phase map's wraps fill it). Anything else is Error{InvalidInput} naming
/// `what` and the range, and saying to give --phase-scale.
PhaseScaling detect_phase_scaling(double lo, double hi, bool all_integers, const std::string& what);

/// What a sidecar says that the stages use; absent keys stay empty.
struct Sidecar {
  std::string path;
  std::vector<double> echo_time_s;              // EchoTime: a number, or a list (4-D files)
  std::optional<double> field_strength_t;       // MagneticFieldStrength
  std::optional<double> imaging_frequency_mhz;  // ImagingFrequency
  std::optional<Vec3> b0_dir;                   // B0_dir (qsm-forward, QSMxT; not BIDS), normalised
  std::optional<std::string> units;             // Units ("rad" | "arbitrary" for phase)
  std::optional<int> echo_number;               // EchoNumber
  std::optional<std::string> manufacturer;      // Manufacturer
};

/// Parses a sidecar's text; `path` only names it in errors. Error{InvalidInput} naming the file
/// for text that is not a JSON object, or a key above with a value of the wrong type, a
/// non-finite or non-positive EchoTime / field strength / imaging frequency, an EchoTime above 1
/// (not seconds), a B0_dir that is not three numbers or is zero, an EchoNumber that is not whole.
/// Unknown keys are ignored. Fuzzed (fuzz/sidecar_fuzz.cpp).
Sidecar parse_sidecar(std::string_view text, const std::string& path);
/// The sidecar beside a NIfTI file (x.nii.gz or x.nii → x.json), if it exists; Error{Io} if it
/// exists and cannot be read (or is not a regular file), Error{InvalidInput} above 16 MiB.
std::optional<Sidecar> read_sidecar_beside(const std::string& nifti_path);
/// "x.nii.gz" → "x.json" (also .nii, .hdr, .img; any other name gets ".json" appended).
std::string sidecar_path_for(const std::string& nifti_path);

struct Scan {
  Volume magnitude;  // frames = echoes, as stored (arbitrary units)
  Volume phase;      // radians in (−π, π], frames = echoes
  std::vector<double> te_s;
  double b0_t = 0.0;
  Vec3 b0_dir{0.0, 0.0, 1.0};  // unit, voxel axes
  // te_source: "--te" | "sidecar"; b0_source: "--b0" | "sidecar"; b0_dir_source: "--b0-dir" |
  // "sidecar" (B0_dir) | "affine".
  std::string te_source, b0_source, b0_dir_source;
  PhaseScaling phase_scaling;
  // What was assumed, one line each, for the user and the report: first the phase scaling's
  // `assumed`, then e.g. ImagingFrequency vs the B0 used (> 1 % apart), --te overriding sidecars.
  std::vector<std::string> notes;
  ScanFiles files;
  std::int64_t echoes() const { return phase.frames(); }
};

/// Reads and checks a scan. Every failure is Error{InvalidInput} (Error{Io} for an unreadable
/// file) naming the file and what is wrong, raised before anything is computed: a missing
/// magnitude or phase, echo counts that differ, echo files or magnitude and phase on different
/// grids or affines, NaN/Inf, a phase that is not an angle, echo times missing (no --te, no
/// sidecar EchoTime), not one per echo, not positive or not strictly increasing, sidecars that
/// disagree with each other, no field strength. Header and sidecar checks come before any voxel
/// is read. Magnitude and phase may each be one 4-D file or one 3-D file per echo (or a mix: the
/// files' frames are numbered as echoes in order); a file's sidecar EchoTime gives one value per
/// frame. B0: --b0, else MagneticFieldStrength. B0's direction: --b0-dir, else the sidecar's
/// B0_dir, else the phase's affine (b0_dir_from_affine). Echoes are read straight into the
/// result: at most one echo file is held beside it. Nothing is written.
Scan read_scan(const ScanFiles& files, const ScanOverrides& overrides = {});

/// The same checks on volumes already in memory (Python, tests): magnitude and phase with one
/// frame per echo on one grid; phase scaled like a file's (detect_phase_scaling or
/// overrides.phase_scale); TEs and B0 must come from `overrides`. `what` names the data in errors.
Scan make_scan(Volume magnitude, Volume phase, const ScanOverrides& overrides, const std::string& what = "scan");

/// Converts a folder of DICOM files (searched 5 folders deep) with dcm2niix into `work_dir`
/// (created if missing; it must hold no .nii, .nii.gz or .json yet, so that only this
/// conversion's files are read) as one .nii.gz and .json sidecar per series and echo, and returns
/// the magnitude's and the phase's files in echo order, for read_scan. Files are told apart by
/// their sidecars: ImageType P/PHASE (or dcm2niix's _ph postfix) is phase, M/MAGNITUDE
/// magnitude, R/I/REAL/IMAGINARY ignored; a series is its SeriesInstanceUID (else SeriesNumber)
/// and part; echoes are ordered by EchoNumber, else EchoTime. A magnitude series not on the
/// phase's grid is ignored; among several, DERIVED ones give way to ORIGINAL ones and then those
/// with the phase's echo count to the others. Vendor integer phase stays as dcm2niix writes it
/// (scl_slope/scl_inter): read_scan's phase scaling detects it. Error{InvalidInput} naming the
/// folder when dcm2niix is not installed (Debian package dcm2niix) or fails, the folder holds no
/// DICOM images, no phase or no magnitude series, several phase (or magnitude) series that
/// cannot be told apart (each named), echoes of one series that cannot be told apart, or
/// magnitude and phase with different echo counts. `notes` (if given) gets one line each for
/// the conversion, the series ignored and dcm2niix's warnings. Native only (not in the
/// WebAssembly build).
ScanFiles convert_dicom(const std::string& dicom_dir, const std::string& work_dir,
                        std::vector<std::string>* notes = nullptr);

}  // namespace qsmcore
