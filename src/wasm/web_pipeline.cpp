// The web page's pipeline mode: a multi-echo scan's magnitude and phase (NIfTI files the Worker
// wrote into emscripten's MEMFS, with their JSON sidecars beside them) to χ, R2*, the local and
// total fields and the masks, through the library's read_scan and run_field_pipeline — the path
// `qsm pipeline` takes, with the same checks and messages (nifti_memfs.cpp reads the files). The
// inversion is a classical method or a registry network (network_inversion_ids()) whose ONNX
// file the Worker put in the FS (a MEMFS copy, or a WORKERFS mount for streamed weights).
//
// Memory: the whole call's accounted peak is predicted from the files' headers before a voxel is
// read — the scan's echoes as f64 (and a given mask), then predict_field_pipeline's peak on top of
// them, or the reading itself if that is more — and posted to the page ("predicted") before
// anything runs; over the page's budget (heap bytes in use plus that peak above the budget;
// default the 4 GiB heap maximum) the call is refused there, nothing read. The pipeline's own
// budget is what is left of the page's, set before the prediction, so a network's prediction (the
// pipeline asks the network itself, nothing run) and its run see the same room, and the second
// check (once a mask from the data has its size) keeps to the same figure. Activations never spill
// (a spill file would be MEMFS, i.e. JS memory). Progress: the stages' callbacks, posted as
// "progress" events.
//
// Outputs: NIfTI-1 files written into MEMFS (out_dir, default /out), which lives in the Worker's
// JS memory, not in the wasm heap; the reply names each with its byte length, and the Worker
// reads and removes them.
#include <emscripten/emscripten.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/input_check.h"
#include "io/nifti.h"
#include "qsmcore/error.h"
#include "qsmcore/masking.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/pipeline.h"
#include "qsmcore/residency.h"
#include "qsmcore/scan.h"
#include "wasm/nifti_memfs.h"
#include "wasm/web_common.h"

using nlohmann::json;
using namespace qsmcore;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

[[noreturn]] void bad_option(const std::string& m) {
  throw Error(ErrorKind::InvalidInput, m);
}

// What one request asks for: the scan's files, what the user typed, and the stages' options.
struct PipelineRequest {
  ScanFiles files;
  ScanOverrides overrides;
  FieldPipelineOptions opts;
  std::string mask_path, out_dir = "/out";
  std::vector<std::string> notes;  // what the request's handling assumed, for the reply's notes
};

std::vector<std::string> paths_of(const json& req, const char* key) {
  if (!req.contains(key) || !req[key].is_array() || req[key].empty())
    bad_option(std::string("no ") + key + " file given: a scan needs both magnitude and phase");
  return req[key].get<std::vector<std::string>>();
}

// What the user typed, which wins over the sidecars (as qsm pipeline's --te, --b0, --b0-dir).
void parse_overrides(const json& req, ScanOverrides& o) {
  if (req.contains("te") && !req["te"].empty()) o.te_s = req["te"].get<std::vector<double>>();
  if (req.contains("b0")) {
    const double b0 = req["b0"].get<double>();
    if (!(b0 > 0.0)) bad_option("B0 must be a positive field strength in tesla");
    o.b0_t = b0;
  }
  if (req.contains("b0_dir")) {
    const auto d = req["b0_dir"].get<std::vector<double>>();
    if (d.size() != 3) bad_option("the B0 direction must be 3 numbers");
    o.b0_dir = Vec3{d[0], d[1], d[2]};
  }
  if (req.contains("phase_scale")) {
    const double s = req["phase_scale"].get<double>();
    if (!(s != 0.0) || !std::isfinite(s)) bad_option("the phase scale must be a non-zero number");
    o.phase_scale = s;
  }
}

bool is_inversion_network(const std::string& id) {
  const std::vector<std::string> ids = network_inversion_ids();
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// "inversion": a classical method ("tv" default), "none", or a registry network
// (network_inversion_ids()) with its ONNX file(s) in "inversion_network_files", as the Worker put
// them in the FS — the same choices as qsm pipeline's --inversion.
void parse_inversion(const json& req, FieldPipelineOptions& o) {
  const std::string inversion = req.value("inversion", std::string("tv"));
  if (inversion == "none") return;
  o.invert = true;
  if (!is_inversion_network(inversion)) {
    o.inversion.method = parse_inversion_method(inversion);
    if (req.contains("tkd_threshold")) o.inversion.threshold = req["tkd_threshold"].get<double>();
    if (req.contains("lambda")) o.inversion.lambda = req["lambda"].get<double>();
    return;
  }
  if (req.contains("tkd_threshold") || req.contains("lambda"))
    bad_option("the TKD threshold and λ belong to the classical inversions, not to " + inversion);
  o.inversion_network = inversion;
  if (req.contains("inversion_network_files"))
    o.inversion_network_files = req["inversion_network_files"].get<std::vector<std::string>>();
  const std::size_t wanted = require_model(inversion).files.size();
  if (o.inversion_network_files.size() != wanted)
    bad_option(inversion + " needs " + std::to_string(wanted) + " ONNX file(s), " +
               std::to_string(o.inversion_network_files.size()) + " given: choose its weights");
  for (const std::string& f : o.inversion_network_files)
    if (!std::filesystem::is_regular_file(f)) bad_option(inversion + "'s weights " + f + ": no such file");
}

// The stages' options, named and defaulted as qsm pipeline's (src/cli/pipeline_cmd.cpp).
void parse_stages(const json& req, FieldPipelineOptions& o) {
  const std::string mask_method = req.value("mask_method", std::string("quality"));
  if (mask_method == "quality") {
    o.masking.method = MaskMethod::PhaseQuality;
  } else if (mask_method == "magnitude") {
    o.masking.method = MaskMethod::Magnitude;
  } else {
    bad_option("mask method " + mask_method + ": quality or magnitude");
  }
  if (req.contains("mask_erode")) {
    const int e = req["mask_erode"].get<int>();
    if (e < 0) bad_option("the mask's erosion must be 0 or more voxels");
    o.masking.erode = e;
  }
  o.fieldmap.unwrap = parse_unwrap_method(req.value("unwrap", std::string("romeo")), "unwrapping");
  o.fieldmap.remove_phase_offset = req.value("offset_correction", true);
  if (req.contains("offset_sigma_mm")) o.fieldmap.offset_sigma_mm = req["offset_sigma_mm"].get<double>();
  o.fieldmap.weighting = parse_echo_weighting(req.value("echo_weighting", std::string("snr")), "echo weighting");
  const std::string bfr = req.value("bfr", std::string());
  if (!bfr.empty()) o.bfr.method = parse_bfr_method(bfr);
  if (req.contains("bfr_radii_mm")) o.bfr.radii_mm = req["bfr_radii_mm"].get<std::vector<double>>();
  parse_inversion(req, o);
  // R2* by default, as qsm pipeline makes it; predict_call turns it off for a single echo.
  o.r2star = req.value("r2star", true);
  o.engine.threads = req.value("threads", 0);
  // A network inversion's weights: read whole (default) or streamed from the WORKERFS file
  // ("stream[:…]", parse_residency's syntax). Never spilled: see the header.
  if (req.contains("residency")) o.engine.residency = parse_residency(req["residency"].get<std::string>());
  o.engine.spill_activations = false;
}

PipelineRequest parse_request(const json& req) {
  PipelineRequest r;
  r.files.magnitude = paths_of(req, "magnitude");
  r.files.phase = paths_of(req, "phase");
  parse_overrides(req, r.overrides);
  parse_stages(req, r.opts);
  r.mask_path = req.value("mask", std::string());
  if (!r.mask_path.empty()) r.opts.mask_source = MaskSource::Given;
  r.out_dir = req.value("out_dir", r.out_dir);
  return r;
}

// The whole call's accounted peak, from the files' headers alone: reading (the magnitude's echoes
// held while the phase's are read, one file beside them when there are several), then the scan
// and a given mask held while the stages run on top of them.
struct CallPrediction {
  Dims3 dims{};
  Vec3 voxel{};
  std::int64_t echoes = 0;
  std::int64_t scan_bytes = 0, mask_bytes = 0, read_peak_bytes = 0, peak_bytes = 0;
  PipelinePrediction stages;
};

std::int64_t largest_file_frames(const std::vector<std::string>& paths, const io::NiftiReadOptions& ro,
                                 std::int64_t& frames) {
  std::int64_t largest = 0;
  frames = 0;
  for (const std::string& p : paths) {
    const io::NiftiHeader h = io::read_nifti_header(p, ro);
    largest = std::max(largest, h.frames);
    frames += h.frames;
  }
  return largest;
}

// Also decides what the headers decide: R2* needs 2 echoes or more (qsm pipeline then makes none).
CallPrediction predict_call(PipelineRequest& r) {
  io::NiftiReadOptions ro;
  ro.allow_frames = true;
  const io::NiftiHeader h = io::read_nifti_header(r.files.phase.front(), ro);
  CallPrediction p;
  p.dims = h.dims;
  p.voxel = h.geometry.voxel_mm;
  std::int64_t mag_frames = 0;
  const std::int64_t mag_largest = largest_file_frames(r.files.magnitude, ro, mag_frames);
  const std::int64_t phase_largest = largest_file_frames(r.files.phase, ro, p.echoes);
  if (r.opts.r2star && p.echoes < 2) {
    r.opts.r2star = false;
    r.notes.push_back("R2*: not made, the scan has one echo (the fit needs 2 or more)");
  }
  const std::int64_t n = p.dims[0] * p.dims[1] * p.dims[2];
  const std::int64_t f64 = static_cast<std::int64_t>(sizeof(double));
  p.scan_bytes = (mag_frames + p.echoes) * n * f64;
  p.mask_bytes = r.opts.mask_source == MaskSource::Given ? n * f64 : 0;
  // A series of several files is read into its volume one file at a time (read_scan).
  const std::int64_t beside =
      std::max(r.files.magnitude.size() > 1 ? mag_largest : 0, r.files.phase.size() > 1 ? phase_largest : 0);
  p.read_peak_bytes = p.scan_bytes + beside * n * f64;
  p.stages = predict_field_pipeline(p.dims, p.voxel, p.echoes, r.opts, true);
  p.peak_bytes = std::max(p.read_peak_bytes, p.scan_bytes + p.mask_bytes + p.stages.peak_bytes);
  return p;
}

json prediction_json(const CallPrediction& p, std::int64_t in_use, std::int64_t budget) {
  json stages = json::array();
  for (const auto& [stage, bytes] : p.stages.stages) stages.push_back({{"stage", stage}, {"peak_bytes", bytes}});
  return {{"type", "predicted"},
          {"dims", p.dims},
          {"echoes", p.echoes},
          {"predicted_peak_bytes", p.peak_bytes},
          {"predicted_heap_bytes", in_use + p.peak_bytes},
          {"scan_bytes", p.scan_bytes},
          {"read_peak_bytes", p.read_peak_bytes},
          {"stages_peak_bytes", p.stages.peak_bytes},
          {"peak_stage", p.stages.peak_stage},
          {"stages", stages},
          {"budget_bytes", budget},
          {"heap_bytes", web::heap_bytes()}};
}

std::string mib(std::int64_t b) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return text;
}

// Before anything is read: refused when the heap in use plus the predicted peak exceeds the budget.
void refuse_over_budget(const CallPrediction& p, std::int64_t in_use, std::int64_t budget) {
  if (in_use + p.peak_bytes <= budget) return;
  throw Error(ErrorKind::OutOfBudget, "the pipeline on " + std::to_string(p.dims[0]) + "×" + std::to_string(p.dims[1]) +
                                          "×" + std::to_string(p.dims[2]) + " × " + std::to_string(p.echoes) +
                                          " echoes needs " + mib(p.peak_bytes) + " (the scan's echoes " +
                                          mib(p.scan_bytes) + ", then " + mib(p.stages.peak_bytes) +
                                          " at its peak in " + p.stages.peak_stage + ") on top of the heap's " +
                                          mib(in_use) + " in use, more than the budget of " + mib(budget) +
                                          "; nothing was read. The least budget that runs it: " +
                                          std::to_string((in_use + p.peak_bytes + (1 << 20) - 1) >> 20) + " MiB");
}

json scan_json(const Scan& scan) {
  return {{"magnitude", scan.files.magnitude}, {"phase", scan.files.phase},
          {"dims", scan.phase.dims()},         {"voxel_mm", scan.phase.voxel_mm()},
          {"echoes", scan.echoes()},           {"te_s", scan.te_s},
          {"te_from", scan.te_source},         {"b0_t", scan.b0_t},
          {"b0_from", scan.b0_source},         {"b0_dir", scan.b0_dir},
          {"b0_dir_from", scan.b0_dir_source}, {"phase_scaling", scan.phase_scaling.assumed}};
}

json stages_json(const FieldPipelineResult& r) {
  json st = json::array();
  for (const StageRecord& s : r.stages) {
    json j = {{"stage", s.stage},
              {"method", s.method},
              {"seconds", s.seconds},
              {"predicted_peak_bytes", s.predicted_peak_bytes},
              {"measured_peak_bytes", s.measured_peak_bytes}};
    for (const auto& [k, v] : s.figures) j[k] = v;
    st.push_back(std::move(j));
  }
  return st;
}

// The maps as NIfTI-1 files in out_dir (as qsm pipeline names them, .nii instead of .nii.gz).
json write_outputs(const std::string& out_dir, const FieldPipelineResult& r) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw Error(ErrorKind::Io, out_dir + ": cannot make the output folder: " + ec.message());
  json list = json::array();
  const auto write = [&](const char* name, const Volume& v, web::NiftiStore store, const char* what, const char* unit) {
    if (v.empty()) return;
    const std::string path = out_dir + "/" + name + ".nii";
    const std::int64_t bytes = web::write_nifti1(path, v, store, std::string("qsm pipeline (web): ") + what);
    list.push_back({{"name", name}, {"path", path}, {"bytes", bytes}, {"unit", unit}, {"what", what}});
  };
  write("chi", r.chi_ppm, web::NiftiStore::F32, "chi (ppm)", "ppm");
  write("r2star", r.r2star_hz, web::NiftiStore::F32, "R2* (1/s)", "1/s");
  write("local_field", r.local_field_ppm, web::NiftiStore::F32, "local field (ppm)", "ppm");
  write("total_field", r.total_field_hz, web::NiftiStore::F32, "total field (Hz)", "Hz");
  write("mask", r.local_mask, web::NiftiStore::U8, "where the local field is valid", "label");
  write("brain_mask", r.mask, web::NiftiStore::U8, "brain mask before background removal", "label");
  return list;
}

// The pipeline compares what is accounted plus its peak with its budget: what is left of the
// page's, in the same terms (the heap malloc has handed out, accounted or not).
void set_engine_budget(PipelineRequest& r, std::int64_t budget) {
  r.opts.engine.mem_budget = std::max<std::int64_t>(1, budget - web::heap_in_use() + memory_current());
  r.opts.engine.mem_budget_source = "the page's budget (" + mib(budget) + " of heap)";
}

// Reads the scan (and a given mask), runs the stages with the budget that is left, and writes
// the maps; the reply gets each step's seconds and the memory figures. Returns the accounted peak
// above `base`: the reading's, or what was held then plus the stages' (the pipeline restarts the
// peak counter for each stage, so its own figure is taken, as qsm pipeline takes it).
std::int64_t read_run_write(PipelineRequest& r, std::int64_t budget, std::int64_t base, json& reply) {
  auto t = Clock::now();
  Scan scan = read_scan(r.files, r.overrides);
  Volume given_mask;
  if (!r.mask_path.empty()) {
    given_mask = io::read_mask_on_grid(r.mask_path, scan.phase, "phase", scan.files.phase.front());
    r.opts.mask = &given_mask;
  }
  reply["read_seconds"] = seconds_since(t);
  reply["scan"] = scan_json(scan);
  std::vector<std::string> notes = r.notes;
  notes.insert(notes.end(), scan.notes.begin(), scan.notes.end());
  set_engine_budget(r, budget);
  r.opts.progress = [](double f, const std::string& stage) { web::progress(f, stage); };
  t = Clock::now();
  const std::int64_t held = memory_current() - base, read_peak = memory_peak() - base;
  const FieldPipelineResult res = run_field_pipeline(std::move(scan), r.opts);
  reply["pipeline_seconds"] = seconds_since(t);
  reply["stages"] = stages_json(res);
  reply["pipeline_predicted_peak_bytes"] = held + res.predicted_peak_bytes;  // refined with the mask's size
  reply["mask_voxels"] = count_inside(res.mask);
  reply["local_mask_voxels"] = count_inside(res.local_mask);
  notes.insert(notes.end(), res.notes.begin(), res.notes.end());
  reply["notes"] = notes;
  web::progress(1.0, "writing the maps");
  t = Clock::now();
  reply["outputs"] = write_outputs(r.out_dir, res);
  reply["write_seconds"] = seconds_since(t);
  reply["dims"] = res.mask.dims();
  reply["voxel_mm"] = res.mask.voxel_mm();
  return std::max(read_peak, held + res.measured_peak_bytes);
}

}  // namespace

extern "C" {

/// The pipeline on a scan in MEMFS: {"magnitude": [paths], "phase": [paths] (one 4-D file each,
/// or one 3-D file per echo in echo order; sidecars x.json beside x.nii), "mask"?: path, "te"?:
/// [s], "b0"?: T, "b0_dir"?: [3], "phase_scale"?, "mask_method"?, "mask_erode"?, "unwrap"?,
/// "offset_correction"?, "offset_sigma_mm"?, "echo_weighting"?, "bfr"?, "bfr_radii_mm"?,
/// "inversion"? ("tv" default, "none", or a network id with "inversion_network_files": [paths]),
/// "tkd_threshold"?, "lambda"?, "r2star"? (default true: made from 2 echoes or more), "threads",
/// "budget_bytes", "residency"? (a network's weights), "out_dir"?} -> the prediction ("predicted"
/// event and reply), then the scan, each stage's seconds and memory, notes and the outputs written
/// ({name, path, bytes, unit}: chi, r2star, local_field, total_field, mask, brain_mask).
EMSCRIPTEN_KEEPALIVE const char* qsm_web_pipeline(const char* request) {
  return web::reply_of([&](json& reply) {
    const auto t0 = Clock::now();
    const json req = json::parse(request);
    PipelineRequest r = parse_request(req);
    const std::int64_t budget = web::page_budget(req);
    reply["budget_bytes"] = budget;  // also in a refusal's reply
    web::progress(0.0, "planning");
    const std::int64_t in_use = web::heap_in_use();
    set_engine_budget(r, budget);  // a network's prediction sees the room its run will have
    const CallPrediction p = predict_call(r);
    json predicted = prediction_json(p, in_use, budget);
    web::post(predicted);
    predicted.erase("type");
    reply.update(predicted);
    refuse_over_budget(p, in_use, budget);
    reset_memory_peak();
    const std::int64_t base = memory_current();
    reply["measured_peak_bytes"] = read_run_write(r, budget, base, reply);
    reply["total_seconds"] = seconds_since(t0);
  });
}

/// The networks the pipeline's inversion may name (network_inversion_ids()), as a JSON array.
EMSCRIPTEN_KEEPALIVE const char* qsm_web_pipeline_networks() {
  static const std::string text = json(network_inversion_ids()).dump();
  return text.c_str();
}

}  // extern "C"
