// The driver every wrapper runs through: loads the network's files, builds the plans for the
// shapes it will run, predicts the run's peak and refuses over budget before the run allocates,
// keeps stage times, progress and warnings, and measures the accounted high-water.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "networks/reserve_solver.h"
#include "qsmcore/networks.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/tensor.h"
#include "spill/spill.h"

namespace qsmcore::networks {

/// Thrown by Context::reserve under NetworkOptions::predict_only, caught by run_network: the
/// prediction is made, the run is not (every wrapper reserves once, before its run allocates).
struct PredictionMade {};

class Context {
 public:
  Context(const ModelSpec& spec, const std::vector<std::string>& paths, const NetworkInputs& in,
          const NetworkOptions& opts, NetworkRun& run);

  const ModelSpec& spec;
  const NetworkInputs& in;
  const NetworkOptions& opts;
  NetworkRun& run;

  std::string id() const { return std::string(spec.id); }
  /// Threads the caller allows (0 resolved to the CPUs this process may use).
  int pool() const { return pool_; }
  /// The run's memory budget in bytes (the automatic one resolved; 0 = none).
  std::int64_t budget() const { return budget_; }
  /// Loads every file of the network with `threads` intra-op threads per run.
  void load(int threads);
  OnnxModel& model(std::size_t i) { return models_.at(i); }

  struct Reservation {
    std::vector<std::vector<Shape>> shapes;  // per run kind: the input shapes (each builds a plan)
    std::int64_t wrapper_fixed = 0;          // wrapper buffers held during the run (bytes)
    std::int64_t wrapper_per_tile = 0;       // wrapper buffers per tile in flight (bytes)
    // Wrapper buffers held only while no graph runs (an unrolled network's FFT step), in the
    // place of a run's memory: the peak takes the larger of the two.
    std::int64_t wrapper_between = 0;
    // What wrapper_fixed becomes when the run is cut into tiles, where it differs (a whole-volume
    // run may make its output only between graph runs; tiles fill it while others run): the
    // room a refusal sizes its suggested tile in. 0: wrapper_fixed.
    std::int64_t wrapper_fixed_tiled = 0;
    // Parking (spill/parking.h): a wrapper that reads no input volume while a graph runs
    // lets them wait in the spill directory then (NetworkOptions::park_inputs), and blocks of
    // its own that it holds across graph runs (part of wrapper_fixed; their sizes here,
    // registered with park_while_running once made), when that is what fits the budget.
    bool parks = false;
    std::vector<std::int64_t> wrapper_parkable;
    // And it reads no input volume once it calls done_with_inputs (NeXtQSM, after "prepare"):
    // parked inputs then stay parked until the run ends, between its graph runs too.
    bool inputs_read_in_prepare = false;
    // Where even that does not fit, a wrapper may keep its parkable blocks in the spill
    // directory between graph runs too, but for the steps that read them (Parked::away, back):
    // what it then holds at most between graph runs, all of it, in the place of wrapper_fixed +
    // wrapper_between (NeXtQSM's FFT step). 0: it does not.
    std::int64_t wrapper_between_parked = 0;
    // Held while it reads the input volumes before its first graph run (NeXtQSM's "prepare",
    // which they are not parked through), where that is not within the terms above.
    std::int64_t wrapper_prepare = 0;
    std::int64_t in_flight = 1;  // wanted; reduced to what the budget allows
    std::int64_t tiles = 1;
    bool tileable = false;  // the refusal suggests a tile (generic tiler / windows)
    std::int64_t halo = 0;
    std::int64_t multiple = 1;
  };
  /// Builds the plans (model index = position in `shapes` unless `model_of` says otherwise),
  /// predicts the peak and, over budget, fits one run by spilling its graphs' activations
  /// (ModelOptions::spill_activations) or refuses. Returns the tiles in flight that fit (throws
  /// PredictionMade instead under predict_only).
  std::int64_t reserve(const Reservation& r, const std::vector<std::size_t>& model_of = {});

  /// Registers a wrapper buffer no graph reads, to wait in the spill directory while graphs
  /// run when reserve() chose to park (one of Reservation::wrapper_parkable's blocks). Returns
  /// a guard that unregisters it; a buffer smaller than parking allows is left out.
  class Parked {
   public:
    /// `with_runs`: it parks around each graph run too (park_while_running); else only away
    /// between them (away_between_runs).
    Parked(Context& c, const Buffer& b, bool with_runs);
    ~Parked();
    Parked(const Parked&) = delete;
    Parked& operator=(const Parked&) = delete;
    /// Where reserve() chose to keep the wrapper's blocks away between graph runs too
    /// (Reservation::wrapper_between_parked): away() writes it out and gives its pages back,
    /// back() reads it back. The wrapper sends every one away before each graph run and brings
    /// it back for the steps that read it. Otherwise both do nothing: it parks with each graph
    /// run, or not at all.
    void away();
    void back();

   private:
    Context& c_;
    const Buffer& b_;
    Parking* runs_ = nullptr;       // the graph runs' parking it joined
    std::unique_ptr<Parking> own_;  // or its own, paged by away and back
  };
  [[nodiscard]] Parked park_while_running(const Buffer& b);
  /// A block a wrapper holds only between graph runs (the VJP's output NeXtQSM reads as it
  /// updates its iterate), sent away for the steps that do not read it where the wrapper's
  /// blocks stay away between the runs (Parked::away, back); else a guard that does nothing.
  [[nodiscard]] Parked away_between_runs(const Buffer& b);
  /// The wrapper reads no input volume from here on (Reservation::inputs_read_in_prepare):
  /// where parking was chosen, the inputs park now and come back at finish().
  void done_with_inputs();

  /// Runs model `m` once on `inputs` (and reports the call to opts.on_graph_run).
  std::vector<Tensor> run_model(std::size_t m, const std::vector<Tensor>& inputs);

  /// Runs model `m` on n tiles: `inputs(t)` builds tile t's inputs, `outputs(t, y)` consumes
  /// its outputs, `done(t)` reports progress. Fully resident: waves of `in_flight` tiles on
  /// threads, each a whole forward. Under a streaming residency policy: batches of `in_flight`
  /// tiles run layer-major (OnnxModel::run_batch), so each weight unit is fetched once per
  /// batch instead of once per tile.
  void run_tiles(std::size_t m, std::int64_t n, std::int64_t in_flight,
                 const std::function<std::vector<Tensor>(std::int64_t)>& inputs,
                 const std::function<void(std::int64_t, std::vector<Tensor>&)>& outputs,
                 const std::function<void(std::int64_t)>& done);
  /// True when weights stream (tiles then run as layer-major batches, not threads).
  bool layer_major() const { return !is_fully_resident(opts.model.residency); }

  /// Closes the current stage (if any) and opens `name`.
  void stage(const std::string& name);
  void progress(double fraction, const std::string& what) const;
  void warn(const std::string& w) { run.warnings.push_back(w); }
  /// Closes the last stage and records the measured peak.
  void finish();

  /// Voxel-count helpers.
  std::int64_t voxels() const;

  /// After a refusal: the tile the refusal named as fitting (a tileable network whose whole
  /// volume cannot fit even with its activations spilled), or nothing.
  const std::optional<TileRequest>& fitting_tile() const { return fitting_tile_; }

 private:
  std::vector<std::string> paths_;
  std::vector<OnnxModel> models_;
  std::mutex hook_mutex_;  // serialises opts.on_graph_run across tiles run on threads
  void report_graph_run(std::size_t m, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
  // " from SOURCE" for refusals ("" when the budget's source is not known).
  std::string budget_from() const;
  void retune_threads(std::int64_t in_flight, const std::function<bool()>& fits, const std::function<void()>& measure);
  void fit_by_spilling(const Reservation& r, const std::vector<std::size_t>& model_of, reserve::Figures& f);
  // `peak`: the predicted peak with one tile in flight.
  [[noreturn]] void refuse(const Reservation& r, const reserve::Figures& f, std::int64_t peak);
  static reserve::Terms terms_of(const Reservation& r);
  reserve::Parked parked_state() const;
  void set_parked(const reserve::Parked& p);

  int pool_ = 1;
  int threads_ = 1;  // each model's intra-op threads (load, then reserve)
  std::int64_t budget_ = 0;
  std::string budget_source_;
  std::int64_t baseline_ = 0;
  std::int64_t outside_ = 0;  // of a budget on the whole process, what it leaves outside the engine
  bool take_outside_as_measured();
  std::int64_t least_run_ = 0;
  // Parking: what waits in the spill directory while a graph runs, and its accounted bytes
  // (0: nothing parks). Made by reserve() when the run fits only with it.
  std::unique_ptr<Parking> parking_;
  std::int64_t parked_ = 0;
  std::int64_t parked_inputs_ = 0;           // of those, the input volumes'
  std::int64_t parked_between_ = 0;          // parked between graph runs too (the inputs, once done with)
  std::unique_ptr<Parking> inputs_parking_;  // the inputs from done_with_inputs() to finish()
  // The wrapper's blocks stay away between graph runs too (Reservation::wrapper_between_parked):
  // each has its own parking; the bytes away now, and those written so far by ones now gone.
  bool blocks_away_between_ = false;
  std::int64_t away_ = 0;
  std::int64_t away_written_ = 0;
  std::int64_t choose_parking(const Reservation& r);
  std::int64_t run_term(const Reservation& r, std::int64_t window, std::int64_t runs) const;
  std::int64_t between_term(const Reservation& r) const;
  std::string peak_terms(const Reservation& r, std::int64_t window, std::int64_t run_peak) const;
  Parking* parking_for_run();
  std::optional<TileRequest> fitting_tile_;  // one graph run's least bytes, spilled (set when spilling cannot fit)
  std::string stage_;
  std::chrono::steady_clock::time_point stage_start_;
};

/// A row-major f32 tensor [1, C, D, H, W] (or another shape) in accounted IO memory.
Tensor f32_tensor(const Shape& s);

}  // namespace qsmcore::networks
