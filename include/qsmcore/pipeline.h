// From a scan's phase to its local field in one call (methods.md §1–§5): a brain mask (the
// user's, one made from the data, or HD-BET's), the total field from the echoes (phase offset
// removed, unwrapped, TE-weighted fit), and the background removed. Every stage's peak memory is
// predicted before anything runs, from measured figures (src/pipeline/measured_stages.h, made by
// `qsm measure --stages`), so a run that cannot fit its budget is refused before it allocates;
// each stage's seconds and predicted and measured peak are reported.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qsmcore/bgremove.h"
#include "qsmcore/fieldmap.h"
#include "qsmcore/inversion.h"
#include "qsmcore/masking.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/physics.h"
#include "qsmcore/scan.h"
#include "qsmcore/volume.h"

namespace qsmcore {

/// Where the brain mask comes from.
enum class MaskSource {
  Data,     // brain_mask() on the scan (MaskOptions)
  Given,    // FieldPipelineOptions::mask
  Network,  // the registry's HD-BET on the echoes' root-sum-of-squares magnitude
};

/// The default background removal: the method that measured best on our phantoms
/// (bench/field_pipeline.sh; the choice and its figures are in the report's notes).
BfrOptions default_bfr_options();
/// The data-consistency step after a network inversion: λ = 3e-3, 30 iterations, the data term's
/// mask eroded by 4 voxels (methods.md §6.7, measured on the atlas head's scan and the held-out heads).
ConsistencyOptions pipeline_consistency_defaults();
/// The inversion after the pipeline's background removal: TV-ADMM with its data term kept 2 voxels
/// inside the mask's edge (InversionOptions::data_erode; methods.md §6.3: on the atlas head's scan
/// χ 42.0 → 35.3 % from the scan alone, 56.1 → 47.4 % with the true mask). Where TV-ADMM runs
/// with `tolerance` left at 0, the pipeline stops it at 1e-2 rather than invert_dipole's 3e-3: no
/// less accurate there, a third of the time (methods.md §6.3). Other methods keep their defaults.
InversionOptions pipeline_inversion_defaults();

struct FieldPipelineOptions {
  MaskSource mask_source = MaskSource::Data;
  const Volume* mask = nullptr;             // MaskSource::Given: on the scan's grid, above 0.5 = brain
  std::vector<std::string> mask_net_files;  // MaskSource::Network: HD-BET's ONNX file(s)
  MaskOptions masking;
  /// With a given or HD-BET mask: the field map, background removal and the inversion run on that
  /// mask united with the one made from the data (`masking`: where the phase is reliable, which
  /// reaches past a brain mask's edge), and every output is then cut back to the given mask (χ
  /// referenced again there). Background removal cannot tell the part of the cortex's field that
  /// is harmonic inside the brain from a background; measured beyond the brain's edge, less of it
  /// is (methods.md §5.1: χ on the atlas head's scan with its true mask 47.6 → 34.5 %). False: the
  /// stages run on the given mask alone. Not with MaskSource::Data, whose mask is the data's.
  bool field_beyond_mask = true;
  FieldMapOptions fieldmap;
  BfrOptions bfr = default_bfr_options();
  /// The dipole inversion after the local field (inversion.h): off (the local field is the
  /// result), or `inversion.method` on the local field inside its mask, χ referenced as
  /// `inversion.reference` says (the mask's mean by default).
  bool invert = false;
  InversionOptions inversion = pipeline_inversion_defaults();
  /// With invert by TV-ADMM: the local field written is the field χ makes inside the mask (the
  /// given mask's, when the stages ran beyond it; inversion.h's dipole_field), not the background
  /// removal's. TV's data term stays 2 voxels inside the brain's edge, where a removal cannot tell
  /// the cortex's field from a background, and its prior says what χ is there: on the atlas head's
  /// scan the local field's NRMSE 51.1 → 30.6 % with its true mask, 51.7 → 35.1 % with its own
  /// (methods.md §5.2). Its own stage, "local field". False, or another inversion: the removal's.
  bool local_field_from_chi = true;
  /// With invert: a registry network instead of `inversion.method` — its id (e.g.
  /// "qsmcore-invnet", "xqsm", "iqsm"; network_inversion_ids() lists them) and its ONNX file(s)
  /// in the spec's order. A network that takes the wrapped phase (iQSM, iQSM+) replaces the field
  /// map and background removal, as its authors run it: the result then has χ but no fields.
  std::string inversion_network;
  std::vector<std::string> inversion_network_files;
  /// After a network on the local field: the data-consistency step (inversion.h's consistent_chi)
  /// with the data term kept 4 voxels inside the mask's edge, where background removal leaves
  /// most of its error (methods.md §6.7: qsmcore-invnet on the atlas head's scan 58.0 → 54.6 %,
  /// on the held-out heads' exact fields 34.6 → 27.2 %). Its own stage, "consistency".
  bool network_consistency = true;
  ConsistencyOptions consistency = pipeline_consistency_defaults();
  /// R2* (s⁻¹) from the magnitudes inside the brain mask (log-linear fit; 2 echoes or more).
  bool r2star = false;
  /// A susceptibility-weighted image and its minimum-intensity projection (relaxometry.h's swi:
  /// CLEAR-SWI's recipe) from the magnitudes and the total field; not after a phase network.
  bool swi = false;
  /// threads (0 = what the process may use) and mem_budget (kAutoMemBudget = what the process
  /// may use, 0 = none) as a network run takes them; the other fields are for HD-BET's run.
  ModelOptions engine;
  std::function<void(double fraction, const std::string& stage)> progress;  // may be empty
  /// `qsm measure --stages` measures the stages to make the table predictions come from: it runs
  /// them without a prediction (and without a budget).
  bool measuring = false;
};

/// Whether a run with these options writes the field of TV-ADMM's χ as its local field
/// (FieldPipelineOptions::local_field_from_chi with a TV-ADMM inversion).
bool writes_chi_field(const FieldPipelineOptions& o);

/// One stage's record, in the order they ran.
struct StageRecord {
  std::string stage;   // "mask", "field map", "background removal", ...
  std::string method;  // "phase quality", "MCPC-3D-S + ROMEO, phase SNR weights", "V-SHARP 12..1 mm", ...
  double seconds = 0.0;
  /// Accounted bytes above what was held when the pipeline started: predicted before the
  /// pipeline ran, and measured (the stage's high-water).
  std::int64_t predicted_peak_bytes = 0, measured_peak_bytes = 0;
  /// What was held above the pipeline's start when the stage began: measured_peak_bytes less this
  /// is the stage's own high-water (what `qsm measure --stages` fits).
  std::int64_t held_at_start_bytes = 0;
  std::vector<std::pair<std::string, double>> figures;  // e.g. {"mask voxels", 1.2e6}, {"eroded voxels", ...}
};

struct FieldPipelineResult {
  Volume mask;             // the brain mask the stages used (0/1)
  Volume total_field_hz;   // Hz inside the mask, 0 outside (empty after a phase network)
  Volume local_field_ppm;  // ppm inside local_mask, 0 outside (empty after a phase network)
  Volume local_mask;       // where the local field (and χ) is valid: the mask less what BFR eroded
  Volume chi_ppm;          // with invert: χ inside local_mask (referenced as asked); else empty
  Volume r2star_hz;        // with r2star: R2* (s⁻¹) inside the mask; else empty
  Volume swi, swi_mip;     // with swi: SWI (the magnitude's units) and its mIP; else empty
  std::int64_t eroded_voxels = 0;
  std::vector<StageRecord> stages;
  /// Accounted bytes above what was held when the pipeline started (the scan, when the caller
  /// gave it up, is freed on the way and counts against this from there on).
  std::int64_t predicted_peak_bytes = 0, measured_peak_bytes = 0;
  std::vector<std::string> notes;  // what was assumed, for the user and the report
};

/// The registry networks `inversion_network` may name: those that map a local field or the
/// wrapped phase to χ.
std::vector<std::string> network_inversion_ids();

/// The peak run_field_pipeline will reach on a scan of `dims` × `echoes`, in accounted bytes
/// above what is held when it starts (the scan itself not counted: the caller holds it), and the
/// stage at which it is reached. `scan_given_up`: the scan's volumes are freed after the field
/// map (run_field_pipeline(Scan&&)), so later stages do not stand on them. `mask_voxels`: the
/// brain mask's size, which ROMEO's queue follows; -1 = not known yet (a given mask's count,
/// else every voxel: an upper bound, which the pipeline refines once its mask is made).
struct PipelinePrediction {
  std::int64_t peak_bytes = 0;
  std::string peak_stage;
  std::vector<std::pair<std::string, std::int64_t>> stages;  // each stage's predicted peak
  /// Under a budget HD-BET's whole run fits only without the scan's echoes beside it: they wait
  /// in a file while it makes the mask (read back exactly; the caller must not read them meanwhile).
  bool parks_echoes = false;
};
PipelinePrediction predict_field_pipeline(const Dims3& dims, const Vec3& voxel_mm, std::int64_t echoes,
                                          const FieldPipelineOptions& o, bool scan_given_up,
                                          std::int64_t mask_voxels = -1);

/// Runs the stages. Refuses (Error{OutOfBudget}) when what is held plus the prediction exceeds
/// the budget, naming the least budget that runs: before anything is allocated, and again, with
/// the mask's own size, once a mask made from the data exists (before the field map). The scan
/// overload taking it by value frees the echoes once the field map no longer needs them.
FieldPipelineResult run_field_pipeline(Scan&& scan, const FieldPipelineOptions& o);
FieldPipelineResult run_field_pipeline(const Scan& scan, const FieldPipelineOptions& o);

}  // namespace qsmcore
