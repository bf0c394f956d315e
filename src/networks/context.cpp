// Context: loading, budget and stage bookkeeping shared by the wrappers (context.h).
#include "networks/context.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>

#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/process_limits.h"
#include "runtime/model_budget.h"
#include "tiling/tiles.h"

namespace qsmcore::networks {
namespace {

// Every volume a caller may hand a network (null where it did not): what parks as the inputs.
std::array<const Volume*, 6> input_volumes(const NetworkInputs& in) {
  return {in.field, in.magnitude, in.mask, in.r2star, in.r2prime, in.qsm};
}

}  // namespace

Context::Context(const ModelSpec& s, const std::vector<std::string>& paths, const NetworkInputs& i,
                 const NetworkOptions& o, NetworkRun& r)
    : spec(s), in(i), opts(o), run(r), paths_(paths) {
  // Threads 0 and the automatic budget become what this process may use (not the machine).
  const ModelOptions resolved = with_process_defaults(opts.model);
  pool_ = std::max(1, resolved.threads);
  budget_ = resolved.mem_budget;
  budget_source_ = resolved.mem_budget_source;
  outside_ = resolved.mem_budget > 0 ? resolved.mem_budget_outside : 0;
  baseline_ = memory_current();
  reset_memory_peak();
}

std::int64_t Context::voxels() const {
  return in.field ? in.field->voxels() : 0;
}

void Context::load(int threads) {
  if (!models_.empty()) return;  // loaded already (a wrapper that read the graph's shapes first)
  stage("load");
  if (paths_.size() != spec.files.size()) {
    throw Error(
        ErrorKind::InvalidInput, id() + " needs " + std::to_string(spec.files.size()) + " ONNX file(s) (" +
                                     [&] {
                                       std::string s;
                                       for (const auto& f : spec.files)
                                         s += (s.empty() ? "" : ", ") + std::string(f.name);
                                       return s;
                                     }() +
                                     "), " + std::to_string(paths_.size()) + " given");
  }
  // A file larger than the budget cannot be loaded: its weights alone exceed it (unless a
  // residency policy keeps them on disk).
  if (budget_ > 0 && is_fully_resident(opts.model.residency)) {
    std::int64_t bytes = 0;
    for (const auto& p : paths_) {
      std::error_code ec;
      const auto n = std::filesystem::file_size(p, ec);
      if (!ec) bytes += static_cast<std::int64_t>(n);
    }
    if (baseline_ + bytes > budget_)
      throw Error(ErrorKind::OutOfBudget, id() + ": the weights alone (" + std::to_string(bytes) +
                                              " bytes in its ONNX files) exceed the budget of " +
                                              std::to_string(outside_ + budget_) + " bytes" + budget_from());
  }
  ModelOptions mo = opts.model;
  mo.threads = threads_ = std::max(1, threads);
  mo.mem_budget = 0;  // the wrapper budgets the whole run (reserve), tiles in flight included
  for (const auto& p : paths_) models_.push_back(OnnxModel::load(p, mo));
}

void Context::report_graph_run(std::size_t m, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  if (!opts.on_graph_run) return;
  const std::lock_guard<std::mutex> lock(hook_mutex_);
  opts.on_graph_run(m, inputs, outputs);
}

Context::Parked::Parked(Context& c, const Buffer& b, bool with_runs) : c_(c), b_(b) {
  if (c_.parked_ == 0 || !c_.opts.park_buffers) return;
  if (c_.blocks_away_between_) {
    own_ = std::make_unique<Parking>(c_.opts.model.spill_dir);
    own_->add(b_);
  } else if (with_runs) {
    runs_ = c_.parking_.get();
    runs_->add(b_);
  }
}

// A block still away is being freed (the run is over, or failing): its bytes are not read back.
// A run whose read-back after a graph run failed unwinds through here with the graph runs'
// parking still parked: remove() then forgets this block's parked bytes and never throws (it
// used to assert, which in this destructor ended the process in std::terminate, issue #51).
Context::Parked::~Parked() {
  if (runs_) runs_->remove(b_);
  if (!own_) return;
  if (own_->parked()) {
    c_.away_ -= own_->bytes();
    own_->forget();
  }
  c_.away_written_ += own_->written();
  own_->release_file();
}

void Context::Parked::away() {
  if (!own_ || own_->parked()) return;
  own_->park();
  c_.away_ += own_->bytes();
}

void Context::Parked::back() {
  if (!own_ || !own_->parked()) return;
  own_->unpark();
  c_.away_ -= own_->bytes();
}

Context::Parked Context::park_while_running(const Buffer& b) {
  return Parked(*this, b, true);
}

Context::Parked Context::away_between_runs(const Buffer& b) {
  return Parked(*this, b, false);
}

void Context::done_with_inputs() {
  if (parked_between_ == 0 || inputs_parking_) return;
  // The inputs leave the group that parks around each graph run for one parked until the end.
  inputs_parking_ = std::make_unique<Parking>(opts.model.spill_dir);
  for (const Volume* v : input_volumes(in))
    if (v != nullptr) {
      parking_->remove(v->storage());
      inputs_parking_->add(v->storage());
    }
  inputs_parking_->park();
  parked_ -= inputs_parking_->bytes();
}

// What the reservation counted as parked must be what parks: else the run would pass its peak.
Parking* Context::parking_for_run() {
  if (parked_ == 0) return nullptr;
  QSM_ASSERT(parking_->bytes() + away_ >= parked_, "a wrapper parks fewer bytes than it reserved as parked");
  return parking_.get();
}

std::vector<Tensor> Context::run_model(std::size_t m, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> y;
  {
    const Parking::Scope parked(parking_for_run());
    y = model(m).run(inputs);
  }
  report_graph_run(m, inputs, y);
  return y;
}

void Context::run_tiles(std::size_t m, std::int64_t n, std::int64_t in_flight,
                        const std::function<std::vector<Tensor>(std::int64_t)>& inputs,
                        const std::function<void(std::int64_t, std::vector<Tensor>&)>& outputs,
                        const std::function<void(std::int64_t)>& done) {
  if (!layer_major()) {
    tiling::run_waves(
        n, in_flight,
        [&](std::int64_t t) {
          std::vector<Tensor> y = run_model(m, inputs(t));
          outputs(t, y);
        },
        done);
    return;
  }
  const std::int64_t batch = std::max<std::int64_t>(in_flight, 1);
  for (std::int64_t first = 0; first < n; first += batch) {
    const std::int64_t last = std::min(n, first + batch);
    std::vector<std::vector<Tensor>> ins;
    for (std::int64_t t = first; t < last; ++t) ins.push_back(inputs(t));
    std::vector<std::vector<Tensor>> outs;
    {
      const Parking::Scope parked(parking_for_run());
      outs = model(m).run_batch(ins);
    }
    for (std::int64_t t = first; t < last; ++t)
      report_graph_run(m, ins[static_cast<std::size_t>(t - first)], outs[static_cast<std::size_t>(t - first)]);
    ins.clear();
    for (std::int64_t t = first; t < last; ++t) {
      outputs(t, outs[static_cast<std::size_t>(t - first)]);
      done(t);
    }
  }
}

std::int64_t Context::reserve(const Reservation& r, const std::vector<std::size_t>& model_of) {
  stage("plan");
  auto model_index = [&](std::size_t k) { return model_of.empty() ? k : model_of[k]; };
  reserve::Figures f;
  auto measure = [&] {
    f.run_peak = f.window = 0;
    for (std::size_t k = 0; k < r.shapes.size(); ++k) {
      const PlanMemory pm = model(model_index(k)).plan_memory(r.shapes[k]);
      // A streamed weight window is held once, however many tiles are in flight.
      f.run_peak = std::max(f.run_peak, pm.run_peak_bytes() - pm.weight_window_bytes);
      f.window = std::max(f.window, pm.weight_window_bytes);
    }
    f.held = memory_current() - baseline_;
  };
  measure();
  f.load_peak = memory_peak() - baseline_;
  const reserve::Terms terms = terms_of(r);
  auto predict = [&](std::int64_t n) { return reserve::peak(terms, parked_state(), f, n); };
  std::int64_t n = std::max<std::int64_t>(1, std::min(r.in_flight, r.tiles));
  if (budget_ > 0) {
    take_outside_as_measured();
    f.budget = budget_ - baseline_;
    n = reserve::most_in_flight(terms, parked_state(), f, n);
    retune_threads(
        n, [&] { return baseline_ + predict(n) <= budget_; }, measure);
    // Over the budget, what no graph reads may park (a write and a read of it a graph run) and
    // the activations spill, in reserve::solve's order.
    const bool spill = opts.model.spill_activations;
    const std::int64_t parkable = baseline_ + predict(n) > budget_ && n == 1 && spill ? choose_parking(r) : 0;
    const reserve::Options o{spill, parkable, parked_inputs_, r.inputs_read_in_prepare, opts.park_buffers};
    const reserve::Choice c = reserve::solve(terms, o, f, n, [&](const reserve::Parked& p, const reserve::Figures& in) {
      f = in;
      set_parked(p);
      fit_by_spilling(r, model_of, f);
      // Finer slabs' plans hold more generated code outside the engine: fitted again when they do.
      if (take_outside_as_measured()) {
        measure();
        fit_by_spilling(r, model_of, f);
      }
      f.budget = budget_ - baseline_;
      f.least_run = least_run_;
      return f;
    });
    f = c.figures;
    set_parked(c.parked);
    if (parked_ == 0) parking_.reset();
    if (!c.fits) refuse(r, f, predict(1));
  }
  run.predicted_peak_bytes = predict(n);
  run.tiles = r.tiles;
  run.tiles_in_flight = n;
  run.threads_per_run = threads_;
  if (opts.on_predicted) opts.on_predicted(run);
  if (opts.predict_only) throw PredictionMade{};
  return n;
}

reserve::Terms Context::terms_of(const Reservation& r) {
  return {r.wrapper_fixed, r.wrapper_per_tile, r.wrapper_between, r.wrapper_between_parked, r.wrapper_prepare};
}

reserve::Parked Context::parked_state() const {
  return {parked_, parked_between_, blocks_away_between_};
}

void Context::set_parked(const reserve::Parked& p) {
  parked_ = p.around_runs;
  parked_between_ = p.between;
  blocks_away_between_ = p.blocks_away_between;
}

// The wrapper's and a run's bytes beside the model while graphs run, and between them
// (reserve::run_term, between_term), as parked now.
std::int64_t Context::run_term(const Reservation& r, std::int64_t window, std::int64_t runs) const {
  return reserve::run_term(terms_of(r), parked_state(), window, runs);
}

std::int64_t Context::between_term(const Reservation& r) const {
  return reserve::between_term(terms_of(r), parked_state());
}

// The bytes that park while a graph runs (the inputs now; the wrapper's blocks as it makes
// them), or 0 where nothing may.
std::int64_t Context::choose_parking(const Reservation& r) {
  if (!r.parks) return 0;
  parking_ = std::make_unique<Parking>(opts.model.spill_dir);
  if (opts.park_inputs)
    for (const Volume* v : input_volumes(in))
      if (v != nullptr) parking_->add(v->storage());
  parked_inputs_ = parking_->bytes();
  std::int64_t bytes = parked_inputs_;
  if (opts.park_buffers)
    for (const std::int64_t b : r.wrapper_parkable)
      if (b > 0 && Buffer::parks(static_cast<std::size_t>(b))) bytes += b;
  if (bytes == 0) parking_.reset();
  return bytes;
}

// A budget on the whole process leaves a fixed share to what the process holds outside the
// engine's accounting (ModelOptions::mem_budget_outside). Once the plans are built that is
// known: binary, libraries and the plans' generated kernels, which stay put through the run
// (measured on xQSM's full-size twin at 181x217x181: 44 MB at the reservation and at the peak
// with one plan; 78.5 MB at both once finer slabs' plans were built to fit 1/8 of its peak, where
// the process's peak RSS passed the budget by 26 MB). Where it holds more than its share, the
// engine's share shrinks by the difference. True when it did.
bool Context::take_outside_as_measured() {
  if (outside_ <= 0 || budget_ <= 0) return false;
  const std::int64_t excess = resident_outside_beyond(outside_);
  if (excess <= 0) return false;
  outside_ += excess;
  budget_ -= excess;
  return true;
}

// Fewer tiles in flight than the models were loaded for: each run gets the threads the others
// left (8 tiles on 2 threads, one in flight under a budget, ran on one core before), unless its
// plans at that count no longer fit where they did (oneDNN's scratch grows with the threads).
void Context::retune_threads(std::int64_t in_flight, const std::function<bool()>& fits,
                             const std::function<void()>& measure) {
  const int want = std::max(1, pool_ / static_cast<int>(std::max<std::int64_t>(in_flight, 1)));
  if (want <= threads_) return;
  const int was = threads_;
  const bool fitted = fits();
  for (auto& m : models_) m.set_threads(want);
  threads_ = want;
  measure();
  if (fits() || !fitted) return;
  for (auto& m : models_) m.set_threads(was);
  threads_ = was;
  measure();
}

// Gives each graph of the run what the budget leaves beside the model, the wrapper's buffers
// and the weight window, spilling its activations to fit (OnnxModel::limit_run_bytes), and
// lowers f.run_peak to the spilled figure. Leaves everything as it was when a graph cannot fit.
void Context::fit_by_spilling(const Reservation& r, const std::vector<std::size_t>& model_of, reserve::Figures& f) {
  auto model_index = [&](std::size_t k) { return model_of.empty() ? k : model_of[k]; };
  // The least one run of each graph needs, spilled: named by the refusal when this fails (finer
  // slabs are planned only when the default ones do not fit the room).
  auto room_left = [&] {
    return budget_ - baseline_ - f.held - f.window - r.wrapper_fixed - r.wrapper_per_tile + parked_;
  };
  std::int64_t room = room_left();
  least_run_ = 0;
  for (std::size_t k = 0; k < r.shapes.size(); ++k) {
    OnnxModel& m = model(model_index(k));
    const std::int64_t own_window = m.plan_memory(r.shapes[k]).weight_window_bytes;
    least_run_ = std::max(least_run_, m.min_run_bytes(r.shapes[k], room + own_window) - own_window);
  }
  // The finer slabs' plans built for their least hold more generated code outside the engine:
  // measured now, each graph's layout is chosen once, in the room that leaves (chosen first and
  // measured after, NeXtQSM's graphs chose again, rebuilding every share's plan).
  if (take_outside_as_measured()) room = room_left();
  if (room < least_run_) return;
  std::vector<std::int64_t> cap(models_.size(), 0);
  std::int64_t spilled_peak = 0;
  for (std::size_t k = 0; k < r.shapes.size(); ++k) {
    OnnxModel& m = model(model_index(k));
    const std::int64_t own_window = m.plan_memory(r.shapes[k]).weight_window_bytes;
    try {
      const PlanMemory pm = m.plan_memory(r.shapes[k], room + own_window);
      spilled_peak = std::max(spilled_peak, pm.run_peak_bytes() - pm.weight_window_bytes);
      run.spill_file_bytes = std::max(run.spill_file_bytes, pm.spill_file_bytes);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::OutOfBudget) throw;
      return;  // the least of a graph can sit above the room when the spilled placement is not tight
    }
    auto& c = cap[model_index(k)];
    c = c == 0 ? room + own_window : std::min(c, room + own_window);
  }
  for (std::size_t i = 0; i < models_.size(); ++i)
    if (cap[i] > 0) ModelBudget::limit_run_bytes(models_[i], cap[i]);
  f.run_peak = spilled_peak;
}

// The figures add up to the predicted peak (unless loading's own peak was the larger): the
// streamed weight window is held once beside the run, and a tile has to fit beside it too.
void Context::refuse(const Reservation& r, const reserve::Figures& f, std::int64_t peak) {
  const std::int64_t budget = budget_, held = f.held, window = f.window, run_peak = f.run_peak;
  // Figures in the budget's own terms: a budget on the whole process counts what it holds
  // outside the engine (ModelOptions::mem_budget_outside) as held.
  const std::int64_t before = outside_ + baseline_;
  std::string msg = id() + ": predicted peak " + std::to_string(before + peak) + " bytes (" +
                    (outside_ > 0 ? "the process outside the engine " + std::to_string(outside_) + " + " : "") +
                    "already allocated " + std::to_string(baseline_) + " + model and plans " + std::to_string(held) +
                    peak_terms(r, window, run_peak) + ") is above the budget of " + std::to_string(outside_ + budget) +
                    " bytes" + budget_from();
  if (const auto least = reserve::least_peak(terms_of(r), parked_state(), f)) {
    msg += "; with its activations spilled to disk one run needs at least " + std::to_string(f.least_run) +
           " bytes, the whole run " + std::to_string(before + *least);
  }
  const std::int64_t tiled_fixed = std::max(r.wrapper_fixed, r.wrapper_fixed_tiled);
  const std::int64_t room = budget - baseline_ - held - window - tiled_fixed;
  std::int64_t patch_voxels = 1;
  for (const auto& s : r.shapes.front())
    if (s.size() >= 3) {
      patch_voxels = s[s.size() - 3] * s[s.size() - 2] * s[s.size() - 1];
      break;
    }
  const double per_voxel = static_cast<double>(run_peak + r.wrapper_per_tile) / static_cast<double>(patch_voxels);
  if (r.tileable && room > 0) {
    const double edge = std::cbrt(static_cast<double>(room) / per_voxel);
    const std::int64_t m = std::max<std::int64_t>(r.multiple, 1);
    const std::int64_t p = static_cast<std::int64_t>(edge) / m * m;
    if (p - 2 * r.halo >= 1) {
      msg += "; a tile with core " + std::to_string(p - 2 * r.halo) + " and halo " + std::to_string(r.halo) +
             " (patch " + std::to_string(p) + "\u00b3) fits";
      const std::int64_t core = p - 2 * r.halo;
      fitting_tile_ = TileRequest{{core, core, core}, r.halo};
    } else
      msg += "; not even a " + std::to_string(m) + "\u00b3 patch fits with halo " + std::to_string(r.halo) +
             ": raise the budget or reduce the halo";
  } else if (r.tileable) {
    msg += "; the model alone fills the budget: raise it";
  } else {
    msg += "; " + id() + " runs on the whole volume (or its fixed patch): raise the budget to at least " +
           std::to_string(before + peak) + " bytes";
  }
  throw Error(ErrorKind::OutOfBudget, msg);
}

// The refusal's terms after the model and plans: those of the phase that sets the peak (a graph
// run, the steps between the runs, or reading the inputs before them), adding up to it.
std::string Context::peak_terms(const Reservation& r, std::int64_t window, std::int64_t run_peak) const {
  const std::int64_t run = run_term(r, window, run_peak + r.wrapper_per_tile);
  const std::int64_t between = between_term(r);
  auto n = [](std::int64_t v) { return std::to_string(v); };
  const std::string weight_window = window > 0 ? " + weight window " + n(window) : std::string();
  if (run >= between && run >= r.wrapper_prepare)
    return weight_window + " + one run " + n(run_peak) + " + wrapper buffers " +
           n(r.wrapper_fixed + r.wrapper_per_tile) +
           (parked_ > 0 ? " - parked in the spill directory while its graphs run " + n(parked_) : std::string());
  const std::string than_a_run = " (more than one run, " + n(run_peak) +
                                 (window > 0 ? ", with its weight window, " + n(window) : "") +
                                 (parked_ > 0 ? ", less the " + n(parked_) + " parked while it runs" : "") + ")";
  if (r.wrapper_prepare > between)
    return " + wrapper buffers while it reads its inputs " + n(r.wrapper_prepare) + than_a_run;
  const std::string inputs_away =
      parked_between_ > 0 ? " - parked in the spill directory from its first graph run on " + n(parked_between_)
                          : std::string();
  if (blocks_away_between_)
    return " + wrapper buffers between graph runs, each block in the spill directory but for the steps that read it, " +
           n(r.wrapper_between_parked) + than_a_run + inputs_away;
  return " + wrapper buffers between graph runs " + n(r.wrapper_between) + than_a_run + " + wrapper buffers " +
         n(r.wrapper_fixed) + inputs_away;
}

std::string Context::budget_from() const {
  return budget_source_.empty() ? std::string() : " from " + budget_source_;
}

void Context::stage(const std::string& name) {
  const auto now = std::chrono::steady_clock::now();
  if (!stage_.empty()) run.stages.push_back({stage_, std::chrono::duration<double>(now - stage_start_).count()});
  stage_ = name;
  stage_start_ = now;
}

void Context::progress(double fraction, const std::string& what) const {
  if (opts.progress) opts.progress(fraction, what);
}

void Context::finish() {
  stage("");
  stage_.clear();
  run.measured_peak_bytes = memory_peak() - baseline_;
  run.residency_reports.clear();
  for (const auto& m : models_) run.residency_reports.push_back(m.residency_report_json());
  // Every run of each graph (NeXtQSM's VJP runs six times), not only its last.
  for (const auto& m : models_) {
    const SpillReport sr = ModelBudget::spill_since_load(m);
    run.spill_written_bytes += static_cast<std::int64_t>(sr.written);
    run.spill_read_bytes += static_cast<std::int64_t>(sr.read);
    run.spill_direct_bytes += static_cast<std::int64_t>(sr.direct);
    run.spill_seconds += sr.wait_seconds;
    run.chain_window_share = std::max<std::int64_t>(run.chain_window_share, sr.chain_window_share);
  }
  // The inputs parked until the end come back before the caller reads them.
  if (inputs_parking_) {
    inputs_parking_->unpark();
    run.parked_bytes += inputs_parking_->written();
    inputs_parking_->release_file();
  }
  run.parked_bytes += parking_ ? parking_->written() : 0;
  run.parked_between_bytes = away_written_;
  run.parked_bytes += away_written_;
  // The graphs have run: their spill files are freed while the caller writes the outputs.
  for (auto& m : models_) ModelBudget::release_spill_file(m);
  if (parking_) parking_->release_file();
}

Tensor f32_tensor(const Shape& s) {
  return Tensor::zeros(DType::F32, s, MemCategory::IO);
}

}  // namespace qsmcore::networks
