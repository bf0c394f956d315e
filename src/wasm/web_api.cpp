// The C API the web page's Worker calls (web/worker.js): the phantom demo and a network run on a
// volume, both through run_network (the path `qsm demo` and `qsm run` take), with the registry as
// JSON, and what every entry point shares (web_common.h); the pipeline from a scan is in
// web_pipeline.cpp. Requests and replies are JSON strings; volumes cross as float32 arrays in the
// wasm heap (x fastest, as in NIfTI), model files as files the Worker put in the FS: MEMFS copies
// of their bytes, or, for streamed weights, WORKERFS mounts of the user's File/Blob, read on demand.
//
// Memory: before a run, the run's peak is predicted (NetworkOptions::on_predicted) and reported;
// the run is admitted only when the bytes already in use plus that peak fit the page's budget
// (default: the heap maximum, 4 GiB). Over it, the engine refuses before allocating the run;
// spilling to disk and automatic tiling are off here: in a browser "disk" is the JS heap, and a
// silently approximate tiled result is not what the page asked for.
//
// Tiles (issue #54): a network run may ask for core/halo tiles ("tile": {"core", "halo"}, as
// `qsm run --tile CORE,HALO`); run_network's tiled wrapper then decides the tiles in flight as it
// does in every wasm32 run, wasm_tiles_in_flight (qsmcore/tiling.h), lowered by the run's own
// plans under the page's budget. qsm_web_tile_plan gives the page that decision and the run's
// peak from the registry's figures alone, for a network, a volume shape, a tile and a budget,
// before the page reads the volume: the figures a host budgets with (memory.md §4.4).
//
// Progress: run_network's callback, and the demo's own stages, posted to the Worker's JS
// (Module.onEvent) when they come from the thread that called in; callbacks from pool threads
// (tiles finishing) cannot reach the Worker's JS while it is blocked in the call, so they only
// update the next progress the calling thread posts.
#include <emscripten/emscripten.h>
#include <emscripten/heap.h>
#include <emscripten/threading.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "qsmcore/demo.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/metrics.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/physics.h"
#include "qsmcore/residency.h"
#include "qsmcore/tiling.h"
#include "wasm/web_common.h"

using nlohmann::json;
using namespace qsmcore;

// Delivers one event (a JSON object) to the Worker's JS. On a pool thread `Module` is that
// thread's own, without onEvent, so nothing happens there (see the header). The body is
// JavaScript, which clang-format would break (it splits `!==`).
// clang-format off
EM_JS(void, qsm_web_post_event, (const char* text), {
  if (typeof Module !== "undefined" && Module["onEvent"]) Module["onEvent"](JSON.parse(UTF8ToString(text)));
});
// clang-format on

namespace qsmcore::web {
namespace {
std::string g_reply;
std::atomic<double> g_fraction{0.0};  // the latest fraction any thread reported
}  // namespace

void post(const json& event) {
  if (!emscripten_is_main_runtime_thread()) return;
  const std::string text = event.dump();
  qsm_web_post_event(text.c_str());
}

void progress(double fraction, const std::string& stage) {
  g_fraction.store(fraction);
  post({{"type", "progress"}, {"fraction", g_fraction.load()}, {"stage", stage}});
}

// malloc counts the large blocks the accounting keeps aside for the next run of the same plan
// (core/accounting.cpp) as handed out; they are free to the engine, and counting them as in use
// (issue #51) took a run's arena off the next run's budget a second time.
std::int64_t heap_in_use() {
  return std::max<std::int64_t>(0, static_cast<std::int64_t>(mallinfo().uordblks) - kept_heap_bytes());
}
std::int64_t heap_bytes() {
  return static_cast<std::int64_t>(emscripten_get_heap_size());
}
std::int64_t heap_max() {
  return static_cast<std::int64_t>(emscripten_get_heap_max());
}

std::int64_t page_budget(const json& req) {
  const std::int64_t asked = req.value("budget_bytes", std::int64_t{0});
  return asked > 0 ? asked : heap_max();
}

const char* reply_of(const std::function<void(json&)>& body) {
  json reply;
  try {
    body(reply);
  } catch (const Error& e) {
    reply["error"] = e.what();
    reply["kind"] = e.kind() == ErrorKind::OutOfBudget ? "OutOfBudget" : "Error";
  } catch (const std::exception& e) {
    reply["error"] = e.what();
    reply["kind"] = "Error";
  }
  // What the page shows apart: the linear memory's size (it never shrinks), what of it is in use
  // now (kept blocks not counted), and of that what the engine's accounting holds.
  reply["heap_bytes"] = heap_bytes();
  reply["heap_max_bytes"] = heap_max();
  reply["heap_in_use_bytes"] = heap_in_use();
  reply["engine_in_use_bytes"] = memory_current();
  g_reply = reply.dump();
  return g_reply.c_str();
}

}  // namespace qsmcore::web

namespace {

using Clock = std::chrono::steady_clock;
using namespace qsmcore::web;

// Float32 volumes the last call produced ("chi", "field", "mask", "chi_true"), read by the
// Worker through qsm_web_output_*; replaced by the next call.
std::map<std::string, std::vector<float>> g_outputs;

std::vector<float> to_f32(const Volume& v) {
  std::vector<float> out(static_cast<std::size_t>(v.voxels()));
  const double* d = v.data();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(d[i]);
  return out;
}

json metrics_json(const QsmMetrics& m) {
  return {{"nrmse_percent", m.nrmse}, {"hfen", m.hfen}, {"xsim", m.xsim},
          {"rmse_ppm", m.rmse},       {"cc", m.cc},     {"roi_voxels", m.roi_voxels}};
}

// The options of every page run: the page's threads, no spill, no automatic tiles, and an
// engine budget of what is left of the page's budget (heap bytes; `budget` gets it) after what is
// in use when the call starts. What the call then allocates through the engine (the phantom, the
// input volumes, the run) is the engine's to count: its budget check includes them.
NetworkOptions page_options(const json& req, std::int64_t& budget) {
  NetworkOptions o;
  o.model.threads = req.value("threads", 0);
  budget = page_budget(req);
  const std::int64_t left = budget - heap_in_use();
  if (left <= 0)
    throw Error(ErrorKind::OutOfBudget, "the heap already holds " + std::to_string(heap_in_use()) +
                                            " bytes, more than the budget of " + std::to_string(budget) + " bytes");
  o.model.mem_budget = left;
  o.model.mem_budget_source = "the page's budget (" + std::to_string(budget) + " bytes of heap, less " +
                              std::to_string(heap_in_use()) + " already in use)";
  // "stream[:…]" with weights in a WORKERFS file the Worker mounted from the user's File or Blob:
  // the engine reads weight ranges from it on demand, so the weights stay out of the heap but
  // for the residency window (parse_residency's syntax; default "full": read whole, packed).
  if (req.contains("residency")) o.model.residency = parse_residency(req["residency"].get<std::string>());
  o.model.spill_activations = false;
  o.auto_tile = false;
  o.progress = progress;
  return o;
}

// Where the weights lived, from the residency reports: the policy, the bytes read from the
// model file while running (a streamed run's traffic) and the largest window held at once.
json weights_json(const LayerWeightResidency& residency, const NetworkRun& run) {
  json w = {{"residency", to_string(residency)}, {"read_bytes", 0}, {"largest_window_bytes", 0}};
  for (const std::string& text : run.residency_reports) {
    const json r = json::parse(text);
    w["execution_residency"] = r.value("execution_residency", "");
    if (r.contains("dense")) {
      const json& d = r["dense"];
      w["read_bytes"] = w["read_bytes"].get<std::int64_t>() + d.value("disk_to_device_bytes", std::int64_t{0}) +
                        d.value("disk_to_host_bytes", std::int64_t{0});
    }
    w["largest_window_bytes"] = std::max(w["largest_window_bytes"].get<std::int64_t>(),
                                         r.value("largest_device_window_bytes", std::int64_t{0}));
  }
  return w;
}

// Predicts the run's peak (posted as a "predicted" event: the page shows it before the run
// starts), then runs it: one run_network, whose on_predicted hook posts the prediction once the
// plans are built and before anything runs. Over budget, the prediction itself throws
// OutOfBudget: nothing of the run has been allocated beyond its plans. The predicted heap is
// what malloc has handed out when the run starts plus the run's predicted peak above it. (A
// predict_only run_network first, as before issue #54, packed every weight of a fully resident
// model twice, and the heap kept both builds: QSMnet's tiled run grew 541 MB for 453 MB.)
NetworkRun predict_then_run(const ModelSpec& spec, const std::string& model_path, const NetworkInputs& in,
                            NetworkOptions opts, std::int64_t budget, json& reply) {
  progress(0.0, "planning");
  const std::int64_t in_use = heap_in_use();
  const auto t_plan = Clock::now();
  auto t = t_plan;
  opts.on_predicted = [&](const NetworkRun& predicted) {
    t = Clock::now();
    reply["predict_seconds"] = std::chrono::duration<double>(t - t_plan).count();
    reply["predicted_peak_bytes"] = predicted.predicted_peak_bytes;
    reply["predicted_heap_bytes"] = in_use + predicted.predicted_peak_bytes;
    reply["budget_bytes"] = budget;
    reply["predicted_tiles"] = predicted.tiles;
    reply["predicted_tiles_in_flight"] = predicted.tiles_in_flight;
    post({{"type", "predicted"},
          {"predicted_peak_bytes", predicted.predicted_peak_bytes},
          {"predicted_heap_bytes", in_use + predicted.predicted_peak_bytes},
          {"budget_bytes", budget},
          {"heap_bytes", heap_bytes()},
          {"tiles", predicted.tiles},
          {"tiles_in_flight", predicted.tiles_in_flight}});
    progress(0.0, "running " + std::string(spec.name));
  };
  NetworkRun run = run_network(spec, {model_path}, in, opts);
  reply["network_seconds"] = std::chrono::duration<double>(Clock::now() - t).count();
  reply["measured_peak_bytes"] = run.measured_peak_bytes;
  reply["tiles"] = run.tiles;
  reply["tiles_in_flight"] = run.tiles_in_flight;
  reply["threads_per_run"] = run.threads_per_run;
  reply["warnings"] = run.warnings;
  reply["weights"] = weights_json(opts.model.residency, run);
  return run;
}

Geometry geometry_of(const json& req) {
  Geometry g;
  const auto vox = req.at("voxel_mm").get<std::vector<double>>();
  if (vox.size() != 3) throw Error(ErrorKind::InvalidInput, "voxel_mm must have 3 values");
  g.voxel_mm = {vox[0], vox[1], vox[2]};
  g.affine = Affine::scaling(g.voxel_mm);
  g.xform_code = 0;
  if (req.contains("affine")) {
    const auto a = req["affine"].get<std::vector<double>>();
    if (a.size() != 16) throw Error(ErrorKind::InvalidInput, "affine must have 16 values (row-major 4x4)");
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) g.affine.m[r][c] = a[static_cast<std::size_t>(r * 4 + c)];
    g.xform_code = 1;
  }
  return g;
}

// `n`: the values the caller says `data` holds (the JS array's length), checked against the grid
// before a value is read: a pointer alone cannot say how far it may be read.
Volume volume_of(const float* data, std::int64_t n, const Dims3& dims, const Geometry& g, const char* what) {
  const std::int64_t need = dims[0] * dims[1] * dims[2];
  if (data == nullptr || n != need)
    throw Error(ErrorKind::InvalidInput, std::string(what) + ": " + std::to_string(data == nullptr ? 0 : n) +
                                             " values given, the grid " + std::to_string(dims[0]) + "x" +
                                             std::to_string(dims[1]) + "x" + std::to_string(dims[2]) + " needs " +
                                             std::to_string(need));
  Volume v = Volume::zeros(dims, g);
  double* d = v.data();
  for (std::int64_t i = 0; i < v.voxels(); ++i) {
    if (!std::isfinite(data[i]))
      throw Error(ErrorKind::InvalidInput, std::string(what) + ": voxel " + std::to_string(i) + " is not finite");
    d[i] = data[i];
  }
  return v;
}

// The page's tile request, {"core": N or [x, y, z], "halo": H}, as `qsm run --tile CORE,HALO`:
// core 0 is the whole volume, no halo the network's default. nullopt when the request has none.
std::optional<TileRequest> tile_request_of(const json& req) {
  if (!req.contains("tile") || req["tile"].is_null()) return std::nullopt;
  const json& t = req["tile"];
  if (!t.is_object() || !t.contains("core"))
    throw Error(ErrorKind::InvalidInput, "tile: " + t.dump() + " is not {\"core\": N or [x, y, z], \"halo\": H}");
  // Far beyond any volume the page can hold (2^31 voxels), and no overflow in a patch's edge.
  constexpr std::int64_t kMaxEdge = std::int64_t{1} << 20;
  const auto whole = [&](const json& v, const char* what) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > kMaxEdge)
      throw Error(ErrorKind::InvalidInput, std::string("tile: the ") + what + " " + v.dump() +
                                               " is not a whole number of voxels from 0 to " +
                                               std::to_string(kMaxEdge));
    return v.get<std::int64_t>();
  };
  TileRequest r;
  const json& c = t["core"];
  if (c.is_array()) {
    if (c.size() != 3) throw Error(ErrorKind::InvalidInput, "tile: the core " + c.dump() + " needs 1 or 3 edges");
    for (std::size_t i = 0; i < 3; ++i) r.core[i] = whole(c[i], "core");
  } else {
    r.core[0] = r.core[1] = r.core[2] = whole(c, "core");
  }
  const bool any = r.core[0] > 0 || r.core[1] > 0 || r.core[2] > 0;
  if (any && (r.core[0] == 0 || r.core[1] == 0 || r.core[2] == 0))
    throw Error(ErrorKind::InvalidInput,
                "tile: the core " + c.dump() + " has a 0 edge (0 everywhere runs the whole volume)");
  if (t.contains("halo") && !t["halo"].is_null()) r.halo = whole(t["halo"], "halo");
  return r;
}

bool tiles_asked(const std::optional<TileRequest>& t) {
  return t && (t->core[0] > 0 || t->core[1] > 0 || t->core[2] > 0);
}

Dims3 dims_of(const json& req) {
  const auto d = req.at("dims").get<std::vector<std::int64_t>>();
  if (d.size() != 3 || d[0] < 1 || d[1] < 1 || d[2] < 1)
    throw Error(ErrorKind::InvalidInput, "dims must be 3 positive sizes");
  constexpr std::int64_t kMaxVoxels = std::int64_t{1} << 31;  // a JS typed array's length, and no overflow
  if (d[1] > kMaxVoxels / d[0] || d[2] > kMaxVoxels / (d[0] * d[1]))
    throw Error(ErrorKind::InvalidInput, "dims: more voxels than a page's array can hold");
  return {d[0], d[1], d[2]};
}

// The tile a run is budgeted with, as the tiled wrapper counts it: an anisotropic core as the
// cube of its largest edge, no halo as the default one.
TileConfig tile_config(const TileRequest& t) {
  const std::int64_t halo = t.halo < 0 ? static_cast<std::int64_t>(TileConfig{}.halo) : t.halo;
  return {static_cast<std::size_t>(std::max({t.core[0], t.core[1], t.core[2]})), static_cast<std::size_t>(halo)};
}

// The peak a run with `n` tiles in flight is predicted by the registry's figures: the wasm32
// tiled run's where measured (wasm_tiled_peak_bytes, memory.md §4.6: its held part, the wrapper's
// whole-volume buffers or its step before the tiles, the tiles), else the native ones
// (tiled_peak_bytes, §4.4), which under-count a wasm32 run by up to 13 % (docs/wasm.md).
std::int64_t registry_peak(const ModelSpec& spec, TileConfig cfg, const Dims3& dims, std::int64_t n, bool field_copy) {
  const std::array<std::size_t, 3> volume{static_cast<std::size_t>(dims[0]), static_cast<std::size_t>(dims[1]),
                                          static_cast<std::size_t>(dims[2])};
  const auto in_flight = static_cast<std::size_t>(n);
  return static_cast<std::int64_t>(spec.wasm_tiled_run ? wasm_tiled_peak_bytes(spec, cfg, volume, in_flight, field_copy)
                                                       : tiled_peak_bytes(spec, cfg, volume, in_flight, field_copy));
}

// The tile plan for `spec` on a volume of `dims` (qsm_web_tile_plan): the tiles on the grid, the
// tiles in flight wasm_tiles_in_flight gives for the page's threads (never more than the tiles),
// and the run's peak from the registry's figures. The page's budget is spent as qsm_web_run
// spends it: less the heap in use now and the input volumes the run makes before the engine
// starts (the Worker's float32 copies, the engine's f64 volumes); where that room holds fewer
// tiles the count is lowered (as the run's own plans lower it, never raise it); where not even
// one fits the plan says so, and the page refuses before it reads the volume.
json tile_plan(const ModelSpec& spec, const Dims3& dims, const TileRequest& t, int threads, bool mask, bool field_copy,
               std::int64_t budget) {
  if (!spec.tiled)
    throw Error(ErrorKind::InvalidInput, std::string(spec.id) + " runs on the whole volume only: it has no tiles");
  const TileConfig cfg = tile_config(t);
  std::int64_t tiles = 1;  // cores on a stride-core grid from 0 (a mask may drop empty ones)
  for (int a = 0; a < 3; ++a) tiles *= (dims[a] + t.core[a] - 1) / t.core[a];
  ModelOptions threads_only;
  threads_only.threads = threads;
  const std::size_t pool = static_cast<std::size_t>(std::max(1, with_process_defaults(threads_only).threads));
  const std::size_t patch = tile_patch_size(cfg, tile_divisor(spec));
  json plan = {{"network", std::string(spec.id)}, {"dims", dims},   {"core", t.core}, {"halo", cfg.halo},
               {"patch", {patch, patch, patch}},  {"tiles", tiles}, {"pool", pool},   {"budget_bytes", budget}};
  const std::size_t registry = wasm_tiles_in_flight(spec, cfg, pool);
  plan["wasm_tiles_in_flight"] = registry;
  // The tile wasm_tiles_in_flight spends its budget with (the wasm32 tiled runs' line, or the
  // wasm32 slope, where measured), and the native one; both throw NotFound for a network not
  // measured.
  const bool wasm = spec.wasm_tiled_run || wasm_tile_bytes_per_voxel(spec);
  plan["tile_bytes"] = wasm ? wasm_tile_bytes(spec, cfg) : tile_bytes(spec, cfg);
  plan["tile_figure"] = spec.wasm_tiled_run ? "wasm32 tiled runs"
                        : wasm              ? "wasm32 slope: tiled runs not measured"
                                            : "native: wasm32 not measured";
  plan["peak_figure"] = spec.wasm_tiled_run ? "wasm32" : "native: wasm32 tiled runs not measured";
  plan["native_tile_bytes"] = tile_bytes(spec, cfg);
  const std::uint64_t voxels = static_cast<std::uint64_t>(dims[0] * dims[1] * dims[2]);
  const std::int64_t inputs = static_cast<std::int64_t>(voxels) * (4 + 8) * (mask ? 2 : 1);
  const std::int64_t in_use = heap_in_use();
  const std::int64_t room = budget - in_use - inputs;
  const auto peak = [&](std::int64_t n) { return registry_peak(spec, cfg, dims, n, field_copy); };
  // Lowered under the room by wasm_tiles_in_flight's budget (tile_concurrency's rule, which
  // tiled_peak_bytes counts with); where the room holds not even the step before the tiles, one.
  const std::uint64_t wrapper = tiled_wrapper_bytes(spec, voxels, field_copy);
  std::int64_t n = room <= 0 ? 1
                             : std::min<std::int64_t>(static_cast<std::int64_t>(wasm_tiles_in_flight(
                                                          spec, cfg, pool, static_cast<std::uint64_t>(room), wrapper)),
                                                      tiles);
  if (peak(n) > room) n = 1;
  plan["tiles_in_flight"] = n;
  plan["predicted_peak_bytes"] = peak(n);
  plan["inputs_bytes"] = inputs;
  plan["heap_in_use_bytes"] = in_use;
  plan["predicted_heap_bytes"] = in_use + inputs + peak(n);
  plan["fits"] = peak(n) <= room;
  if (peak(n) > room)
    plan["refusal"] = "one " + std::to_string(patch) + "³ tile of " + std::string(spec.id) + " needs " +
                      std::to_string(in_use + inputs + peak(1)) + " bytes of heap at its peak (" +
                      std::to_string(in_use) + " in use, " + std::to_string(inputs) + " of input volumes, " +
                      std::to_string(peak(1)) +
                      " for the run with one tile in flight), more than the page's budget of " +
                      std::to_string(budget) + " bytes: raise the budget or choose a smaller core";
  return plan;
}

}  // namespace

extern "C" {

/// The registry as a JSON array: each network's ModelSpec JSON plus "needs" (network_needs).
EMSCRIPTEN_KEEPALIVE const char* qsm_web_registry() {
  static std::string text = [] {
    json all = json::array();
    for (const ModelSpec& spec : all_models()) {
      json j = json::parse(to_json_string(spec));
      try {
        const NetworkNeeds n = network_needs(spec);
        j["needs"] = {{"field", n.field},
                      {"magnitude", n.magnitude},
                      {"mask", n.mask},
                      {"r2star", n.r2star},
                      {"r2prime", n.r2prime},
                      {"qsm", n.qsm},
                      {"te", n.te},
                      {"b0", n.b0},
                      {"field_kind", n.field_kind}};
      } catch (const Error&) {
        j["needs"] = nullptr;  // no wrapper: the page cannot run it
      }
      all.push_back(std::move(j));
    }
    return all.dump();
  }();
  return text.c_str();
}

/// The phantom demo: {"size", "threads", "budget_bytes", "model_path", "residency"?} -> metrics and memory;
/// outputs "chi", "chi_true", "field", "mask" (size³ float32, 1 mm voxels).
EMSCRIPTEN_KEEPALIVE const char* qsm_web_demo(const char* request) {
  return reply_of([&](json& reply) {
    g_outputs.clear();
    const json req = json::parse(request);
    const ModelSpec& spec = require_model(req.value("model_id", std::string("qsmcore-invnet")));
    std::int64_t budget = 0;
    NetworkOptions opts = page_options(req, budget);
    reply["budget_bytes"] = budget;  // also in a refusal's reply
    progress(0.0, "simulating the phantom");
    const PhantomOptions po = demo_phantom_options(req.value("size", 64));
    auto t = Clock::now();
    const Phantom ph = make_head_phantom(po);
    reply["simulate_seconds"] = std::chrono::duration<double>(Clock::now() - t).count();
    NetworkRun run = predict_then_run(spec, req.at("model_path").get<std::string>(), demo_network_inputs(ph, po), opts,
                                      budget, reply);
    const Volume& chi = chi_output(run, spec.id).volume;
    progress(1.0, "metrics");
    t = Clock::now();
    reply["metrics"] = metrics_json(compute_metrics(chi, ph.chi, &ph.mask));
    const Volume tkd_chi = tkd(ph.local_field, ph.mask, po.b0_dir);
    reply["tkd"] = {{"threshold", TkdOptions{}.threshold},
                    {"metrics", metrics_json(compute_metrics(tkd_chi, ph.chi, &ph.mask))}};
    reply["metrics_seconds"] = std::chrono::duration<double>(Clock::now() - t).count();
    reply["dims"] = chi.dims();
    reply["voxel_mm"] = chi.voxel_mm();
    reply["network"] = spec.name;
    g_outputs["chi"] = to_f32(chi);
    g_outputs["chi_true"] = to_f32(ph.chi);
    g_outputs["field"] = to_f32(ph.local_field);
    g_outputs["mask"] = to_f32(ph.mask);
  });
}

/// A registry network's recipe on the page's volume: {"network" (registry id), "model_path",
/// "dims", "voxel_mm", "affine"?, "unit"?, "b0"?, "te"?, "threads", "budget_bytes", "residency"?}, the field
/// and an optional mask (float32, x fastest; mask may be null with mask_len 0), each with its number
/// of values (a length that is not the grid's is refused before a value is read) -> memory;
/// outputs by name.
EMSCRIPTEN_KEEPALIVE const char* qsm_web_run(const char* request, const float* field, int field_len, const float* mask,
                                             int mask_len) {
  return reply_of([&](json& reply) {
    g_outputs.clear();
    const json req = json::parse(request);
    const ModelSpec& spec = require_model(req.at("network").get<std::string>());
    const Dims3 dims = dims_of(req);
    const Geometry g = geometry_of(req);
    std::int64_t budget = 0;
    NetworkOptions opts = page_options(req, budget);
    reply["budget_bytes"] = budget;  // also in a refusal's reply
    // The path `qsm run --tile` takes: run_network's tiled wrapper, its tiles in flight from
    // wasm_tiles_in_flight, lowered by its plans under the engine's budget (the page's).
    opts.tile = tile_request_of(req);
    if (tiles_asked(opts.tile)) reply["tile"] = {{"core", opts.tile->core}, {"halo", opts.tile->halo}};
    const Volume f = volume_of(field, field_len, dims, g, "the field");
    Volume m;
    NetworkInputs in;
    in.field = &f;
    if (mask == nullptr && mask_len != 0)
      throw Error(ErrorKind::InvalidInput, "the mask: " + std::to_string(mask_len) + " values said, none given");
    if (mask != nullptr) {
      m = volume_of(mask, mask_len, dims, g, "the mask");
      in.mask = &m;
    }
    if (req.contains("unit")) in.field_unit = parse_field_unit(req["unit"].get<std::string>());
    if (req.contains("b0")) in.b0_tesla = req["b0"].get<double>();
    if (req.contains("te")) in.te_s = req["te"].get<double>();
    NetworkRun run = predict_then_run(spec, req.at("model_path").get<std::string>(), in, opts, budget, reply);
    reply["outputs"] = json::array();
    for (const NetworkOutput& o : run.outputs) {
      reply["outputs"].push_back({{"name", o.name}, {"unit", o.unit}});
      g_outputs[o.name] = to_f32(o.volume);
    }
    reply["dims"] = dims;
  });
}

/// The tile plan of a tiled registry network before the page reads the volume (issue #54):
/// {"network", "dims", "tile": {"core", "halo"}, "threads", "budget_bytes", "mask" (bool: a mask
/// comes with the field), "unit"?} -> {"tiles", "patch", "wasm_tiles_in_flight", "tiles_in_flight",
/// "tile_bytes", "predicted_peak_bytes" (the run's peak above its input volumes, by the registry's
/// figures), "inputs_bytes", "predicted_heap_bytes", "budget_bytes", "fits", "refusal"?}.
/// Allocates nothing that grows with the volume.
EMSCRIPTEN_KEEPALIVE const char* qsm_web_tile_plan(const char* request) {
  return reply_of([&](json& reply) {
    const json req = json::parse(request);
    const ModelSpec& spec = require_model(req.at("network").get<std::string>());
    const Dims3 dims = dims_of(req);
    const std::optional<TileRequest> tile = tile_request_of(req);
    if (!tiles_asked(tile))
      throw Error(ErrorKind::InvalidInput, "tile: no core given (the whole volume has no tile plan)");
    const bool field_copy = req.contains("unit") && parse_field_unit(req["unit"].get<std::string>()) != FieldUnit::Ppm;
    reply =
        tile_plan(spec, dims, *tile, req.value("threads", 0), req.value("mask", false), field_copy, page_budget(req));
  });
}

/// The float32 data of an output of the last call (nullptr if absent) and its element count.
EMSCRIPTEN_KEEPALIVE const float* qsm_web_output_data(const char* name) {
  const auto it = g_outputs.find(name);
  return it == g_outputs.end() ? nullptr : it->second.data();
}
EMSCRIPTEN_KEEPALIVE int qsm_web_output_size(const char* name) {
  const auto it = g_outputs.find(name);
  return it == g_outputs.end() ? 0 : static_cast<int>(it->second.size());
}

/// The size of the linear memory: it never shrinks, so this is the heap's high-water.
EMSCRIPTEN_KEEPALIVE double qsm_web_heap_bytes() {
  return static_cast<double>(heap_bytes());
}

/// The program break (sbrk(0)): where malloc's heap ends. It never moves down (emscripten's
/// dlmalloc does not trim), so its rise over a call is the heap the call took, without the free
/// room the linear memory had before it (docs/wasm.md, "Whole tiled runs").
EMSCRIPTEN_KEEPALIVE double qsm_web_break_bytes() {
  return static_cast<double>(reinterpret_cast<std::uintptr_t>(sbrk(0)));
}

}  // extern "C"
