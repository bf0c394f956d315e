// Running the registry's networks on volumes: one wrapper per network (models.md §5) behind one
// entry point. A wrapper does what the network's published glue does around the ONNX graph:
// unit conversion, normalisation, masking, padding to the network's multiple, tiles or sliding
// windows with their blending, test-time flips, the FFT data-consistency steps of the unrolled
// networks (LPCNN, MoDL-QSM, NeXtQSM), and the way back to a column-major f64 Volume on the
// input grid. Memory is predicted before the run and refused over budget (memory.md §7 M3).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "qsmcore/model_spec.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/physics.h"
#include "qsmcore/volume.h"

namespace qsmcore {

/// The volumes and scalars a network may take, all on one grid (same dims, voxel size and
/// affine); nullptr = not given. Which ones a network needs: network_needs().
struct NetworkInputs {
  /// The network's primary input: the total field (BFRnet, AutoQSM, NeXtQSM), the local field
  /// (the dipole inversions, SUSEP-Net's lfs, χ-sepnet's field) or the wrapped phase in rad
  /// (iQSM, iQSM+, iQFM; frames = echoes).
  const Volume* field = nullptr;
  const Volume* magnitude = nullptr;      // magnitude (frames = echoes where relevant)
  const Volume* mask = nullptr;           // brain mask (above 0.5 = inside: mask_inside)
  const Volume* r2star = nullptr;         // R2* (s^-1) for R2PRIMEnet / χ-sepnet
  const Volume* r2prime = nullptr;        // R2' (s^-1 = Hz) where a network takes it (SUSEP-Net, χ-sepnet)
  const Volume* qsm = nullptr;            // χ map (ppm), the χ-separation networks' "qsm" input
  FieldUnit field_unit = FieldUnit::Ppm;  // unit of `field` (see physics.h); phase networks: Rad
  std::optional<double> te_s, b0_tesla;
  /// Per-echo TEs (s) for a multi-frame phase `field` (iQSM/iQFM/iQSM+); empty = te_s for all.
  std::vector<double> echo_times_s;
  std::optional<Vec3> b0_dir;  // voxel axes; default: from the affine
};

/// core 0 = whole volume (or the network's fixed patch); halo -1 = the network's default.
/// Generic-tiler networks (xQSM, QSMnet, QSMnet+, IR2QSM, qsmcore-invnet; LPCNN, MoDL-QSM and
/// NeXtQSM run whole-volume, their FFT data consistency being global, and ignore a request):
/// core/halo as memory.md §4.1, the patch edge rounded up to the network's multiple.
/// Sliding-window networks (χ-sepnet, R2PRIMEnet, SUSEP-Net, HD-BET): `core` is the window
/// (rounded up to the multiple; HD-BET's is (x, y, z)), the overlap is the recipe's, `halo` unused.
/// Fixed-patch networks (QSMGAN, AutoQSM, RS2-Net) and whole-volume ones ignore it.
struct TileRequest {
  Dims3 core{0, 0, 0};
  std::int64_t halo = -1;
};

struct NetworkRun;

struct NetworkOptions {
  ModelOptions model;  // backend, threads, mem_budget (the engine's options; by default what the process may use)
  std::optional<TileRequest> tile;
  /// Over the budget a run first spills activations (exact, whole volume); when even that does
  /// not fit and the network can be tiled, it runs in the largest tiles that fit (with a
  /// warning) unless this is off (then it is refused, naming that tile).
  bool auto_tile = true;
  /// Where the recipe uses TTA: SynthSeg's left/right flip averaging and RS2-Net's 8-flip
  /// mirroring (on in their recipes) and HD-BET's 8-flip mirroring (off in its recipe: enabled
  /// only with `hdbet_mirroring` too).
  bool test_time_flips = true;
  bool hdbet_mirroring = false;
  /// iQSM/iQFM/iQSM+: the phase is multiplied by this first (models.md §5, default −1).
  double phase_sign = -1.0;
  /// R2PRIMEnet refuses B0 outside 3 ± 0.3 T unless this is set (then it warns).
  bool ignore_domain = false;
  std::function<void(double fraction, const std::string& stage)> progress;  // may be empty
  /// Over the budget (with ModelOptions::spill_activations), full-volume buffers a wrapper holds
  /// across its graph runs but no graph reads (an unrolled network's iterate, background field,
  /// mask and dipole kernel) wait in the spill directory while a graph runs, before any
  /// activation spills: a write and a read of them a graph run (issue #16).
  bool park_buffers = true;
  /// Over the budget, the input volumes (NetworkInputs) wait in the spill directory while the
  /// network's graphs run, once the wrapper has made the graphs' inputs from them (issue #16):
  /// their pages go back to the OS and the same bytes come back, at the same addresses, before
  /// the wrapper reads them again and before run_network returns. Off by default: the caller
  /// must not read them from another thread during the call. `qsm run` turns it on.
  bool park_inputs = false;
  /// Stop once the run's peak is predicted (the model loaded, its plans built; nothing run):
  /// run_network then returns predicted_peak_bytes, tiles and tiles_in_flight, and no output.
  /// What `qsm batch plan` sizes cluster jobs with; a budget still refuses as in a real run.
  bool predict_only = false;
  /// Called on the calling thread each time the run's peak is predicted (where predict_only
  /// would stop: plans built, nothing run yet), with predicted_peak_bytes, tiles, tiles_in_flight
  /// and threads_per_run set; may throw to stop the run. A host that shows the prediction
  /// before the run (the web page) so needs one run_network, not a predict_only one first: a
  /// fully resident model packs its weights in each, and wasm32's heap, which never shrinks,
  /// kept both builds (QSMnet's full twin: 541 MB of growth for 453 MB accounted; issue #54).
  std::function<void(const NetworkRun& predicted)> on_predicted;
  /// Called after each run of one of the network's graphs with what the wrapper fed it and what
  /// it returned: the file's index in spec.files, the inputs, the outputs (in call order; calls
  /// are serialised, tiles run in parallel may arrive in any order). What the wrapper computes
  /// around the graph can so be checked against the authors' code (the recipe tests) or dumped
  /// for debugging; the tensors are valid during the call only.
  std::function<void(std::size_t file, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs)>
      on_graph_run;
};

struct NetworkOutput {
  std::string name;  // "chi", "local_field", "chi_pos", "chi_neg", "chi_total", "r2prime", "mask", ...
  std::string unit;  // "ppm", "Hz", "label", "probability", "logit"
  Volume volume;     // on the input grid
};

struct StageTime {
  std::string stage;
  double seconds;
};

struct NetworkRun {
  std::vector<NetworkOutput> outputs;
  /// Accounted bytes above what was allocated when run_network was called: predicted before
  /// the run, and the measured high-water of the run.
  std::int64_t predicted_peak_bytes = 0, measured_peak_bytes = 0;
  std::vector<StageTime> stages;
  std::int64_t tiles = 1, tiles_in_flight = 1;
  /// Intra-op threads each graph run was given: the caller's threads shared by the tiles in flight.
  int threads_per_run = 1;
  /// Activation residency: when the run only fit the budget by spilling, the spill file's size
  /// (predicted) and what its graphs wrote and read back, and the seconds they waited for it,
  /// summed over every graph run (each tile, each iteration of an unrolled network).
  std::int64_t spill_file_bytes = 0, spill_written_bytes = 0, spill_read_bytes = 0;
  std::int64_t spill_direct_bytes = 0;  // of those, slabs streamed with direct I/O (SpillReport::direct)
  double spill_seconds = 0;
  /// Bytes of wrapper buffers and input volumes that waited in the spill directory while the
  /// graphs ran (NetworkOptions::park_inputs, issue #16), summed over the graph runs (each is
  /// written once and read back once); 0 when the run fit without.
  std::int64_t parked_bytes = 0;
  /// Of those, what the wrapper's blocks wrote where they waited between its graph runs too,
  /// back only for the steps that read them (NeXtQSM's FFT steps under the tightest budgets).
  std::int64_t parked_between_bytes = 0;
  /// The finest conv-chain window share its graphs ran with (kChainWindowShare unless a budget
  /// chose finer slabs, which hold less for more, smaller kernel calls); 0 when none ran.
  std::int64_t chain_window_share = 0;
  std::vector<std::string> warnings;  // e.g. the oblique warning
  /// Per ONNX file, the weight-residency report (OnnxModel::residency_report_json).
  std::vector<std::string> residency_reports;
  /// The output by name; nullptr if absent.
  const NetworkOutput* find(const std::string& name) const;
};

struct NetworkNeeds {
  bool field = false, magnitude = false, mask = false, r2star = false, r2prime = false, qsm = false, te = false,
       b0 = false;
  std::string field_kind;  // "local field", "total field", "wrapped phase", "" when no field
};
/// What run_network requires for this network (the optional ones are false).
NetworkNeeds network_needs(const ModelSpec& spec);
/// The registry ids run_network has a wrapper for, each once, in its table's order.
std::vector<std::string> wrapped_network_ids();

/// Runs registry network `spec` on its ONNX file(s) (paths in spec.files order). Validates the
/// inputs first (missing TE for a phase network, grid mismatch, NaN/Inf, wrong dims) with
/// Error(InvalidInput) messages naming the input and what is wrong, and refuses over budget
/// before allocating the run (Error OutOfBudget naming predicted peak, budget and a tile that fits).
NetworkRun run_network(const ModelSpec& spec, const std::vector<std::string>& model_paths, const NetworkInputs& in,
                       const NetworkOptions& opts);

}  // namespace qsmcore
