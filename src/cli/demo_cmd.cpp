// qsm demo: χ from a raw scan, end to end, scored against the truth, in about a minute.
// Part 1, the whole pipeline on a raw scan:
//  1. the atlas head's raw scan (qsmcore/demo.h: what `qsm phantom --raw --anatomy atlas` writes:
//     wrapped multi-echo phase and magnitude with noise, a receiver offset, scalp, skull and air
//     around the brain) with its truth: χ, the brain mask and the local field;
//  2. run_field_pipeline on the scan alone (its own mask, field map, background removal) with
//     (a) the default chain (its default inversion, TV-ADMM), (b) the same chain with a dipole-
//     inversion network as the inversion — by default qsmcore-invnet, the network qsmcore trains
//     on synthetic heads and ships (models/qsmcore-invnet.md) — and (c) TKD at its default
//     threshold; each chain's seconds and predicted and measured peak memory;
//  3. each χ against the true χ inside the true brain mask (demeaned NRMSE, XSIM, HFEN, the slope
//     of χ on the truth), and the local field against the true local field.
// Part 2, what the network was trained for: χ from the true local field of the ellipsoid head
// (physics.md §4.3), the network through run_network (as `qsm run ID`) and the classical TKD at
// its usual threshold and at the one that scores best there.
// Then NIfTI volumes, slice figures a QSM user reads (three planes, a ppm colour bar, the window
// and orientation stated; io/png_preview.h) and demo.json.
// `--model` takes another registry id (its weights looked up locally, never downloaded) or an
// ONNX file; a file whose SHA-256 is not the registry's (e.g. an architecture twin with random
// weights) is run and labelled as such: its metrics are then not meaningful.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/staged_outputs.h"
#include "core/accounted_array.h"
#include "core/parallel.h"
#include "io/atomic_file.h"
#include "io/nifti.h"
#include "io/png_preview.h"
#include "qsmcore/demo.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/metrics.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"
#include "qsmcore/physics.h"
#include "qsmcore/pipeline.h"
#include "qsmcore/residency.h"
#include "qsmcore/scan.h"

namespace qsmcore::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The simulated section's cube when --size is not given (the model card's figures are at 128³).
constexpr int kSimulatedSize = 128;
// The χ figures' window: symmetric, so 0 ppm is mid-grey, and wide enough for the deep grey
// nuclei and veins of the heads (physics.md §4.3) without washing out white matter's −0.03 ppm.
constexpr double kChiWindowPpm = 0.15;

struct DemoArgs {
  std::string out = "qsm-demo";
  int size = 0;  // 0: the atlas head's natural grid and kSimulatedSize
  int threads = 0;
  std::string model = "qsmcore-invnet";  // a registry id or an ONNX file
  std::string network;                   // the recipe for a --model file ("" = from its hash or name)
  std::string mem_budget;                // "" = what the process may use, "none", or a byte size
  std::string backend = "onednn";
  std::string precision = "f32";  // of the network's convolutions
  std::string residency = "full";
  bool quiet = false;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A χ map's scores against the truth; `chi` empty (with the reason) when they cannot be computed
// (e.g. a network that returned zeros everywhere in the mask). `qsmci`: compute_metrics' full
// set, for the simulated section's JSON (its NRMSE is the model card's, not demeaned).
struct Scored {
  std::optional<ChiScore> chi;
  std::optional<QsmMetrics> qsmci;
  std::string why;
};
Scored score(const Volume& pred, const Volume& truth, const Volume& mask, bool with_qsmci = false) {
  Scored s;
  try {
    s.chi = score_chi(pred, truth, mask);
    if (with_qsmci) s.qsmci = compute_metrics(pred, truth, &mask);
  } catch (const Error& e) {
    s.chi.reset();
    s.why = e.what();
  }
  return s;
}

json score_json(const Scored& s) {
  if (!s.chi) return {{"error", s.why}};
  const ChiScore& c = *s.chi;
  json j{{"nrmse_demeaned_percent", c.nrmse_demeaned},
         {"xsim", c.xsim},
         {"hfen", c.hfen},
         {"cc", c.cc},
         {"slope", c.slope},
         {"intercept_ppm", c.intercept}};
  if (s.qsmci) {
    const QsmMetrics& m = *s.qsmci;
    j["nrmse_percent"] = m.nrmse;  // not demeaned: compute_metrics', as the model card reports it
    j["rmse_ppm"] = m.rmse;
    j["mad_ppm"] = m.mad;
    j["gxe"] = m.gxe;
    j["roi_voxels"] = m.roi_voxels;
  }
  return j;
}

// What the demo runs and what its weights are: the user is told plainly when they are not
// trained ones.
enum class Weights { Shipped, Published, Unverified };

struct DemoNetwork {
  const ModelSpec* spec = nullptr;
  std::string path;
  std::string sha;
  Weights weights = Weights::Unverified;
  std::string label;  // the row name in the tables
};

// The recipe for a file: --network, else the registry entry whose file has this hash, else the
// entry named like the file (xqsm.onnx -> xqsm).
const ModelSpec& recipe_for_file(const std::string& path, const std::string& sha, const std::string& network) {
  if (!network.empty()) return require_model(network);
  for (const ModelSpec& spec : all_models())
    for (const WeightFile& f : spec.files)
      if (!f.sha256.empty() && f.sha256 == sha) return spec;
  if (const ModelSpec* spec = find_model(fs::path(path).stem().string())) return *spec;
  throw Error(ErrorKind::InvalidInput, "--model " + path +
                                           ": not a registry network's file (by hash or name); say which recipe "
                                           "runs it with --network ID");
}

DemoNetwork choose_network(const DemoArgs& a) {
  DemoNetwork n;
  if (const ModelSpec* spec = find_model(a.model)) {
    if (spec->files.size() != 1)
      throw Error(ErrorKind::InvalidInput, "qsm demo runs one-file networks; '" + a.model + "' has several");
    FetchOptions f;
    f.allow_download = false;  // a demo never downloads on its own; `qsm fetch ID` does
    f.verify = false;          // hashed below: a twin under the registry's name is labelled, not refused
    try {
      n.path = resolve_weights(*spec, f).at(0).path.string();
    } catch (const Error& e) {
      throw Error(ErrorKind::NotFound, "qsm demo --model " + a.model + ": " + e.what() + "\n`qsm fetch " + a.model +
                                           "` gets the published weights, or pass --model FILE.");
    }
    n.spec = spec;
  } else if (fs::is_regular_file(a.model)) {
    n.path = a.model;
  } else {
    throw Error(ErrorKind::NotFound, "--model " + a.model + ": no such file, and not a registry id");
  }
  n.sha = weight_file_sha256(n.path);
  if (n.spec == nullptr) n.spec = &recipe_for_file(n.path, n.sha, a.network);
  if (n.spec->stage != ModelStage::DipoleInversion || n.spec->files.size() != 1)
    throw Error(ErrorKind::InvalidInput, "qsm demo reconstructs χ from a local field; '" + std::string(n.spec->id) +
                                             "' is not a one-file dipole-inversion network");
  const WeightFile& file = n.spec->files[0];
  const bool matches = !file.sha256.empty() && n.sha == file.sha256;
  n.weights = !matches ? Weights::Unverified : file.shipped ? Weights::Shipped : Weights::Published;
  n.label = std::string(n.spec->name) + (matches ? "" : " (twin)");
  return n;
}

std::string weights_note(const DemoNetwork& n) {
  switch (n.weights) {
    case Weights::Shipped:
      return "trained by qsmcore on synthetic heads only (models/qsmcore-invnet.md); SHA-256 matches the registry";
    case Weights::Published:
      return "the published weights (SHA-256 matches the registry)";
    case Weights::Unverified:
      break;
  }
  return "NOT trained weights the registry knows (e.g. an untrained architecture twin with random weights): "
         "its metrics are not meaningful; the run proves the pipeline";
}

const char* weights_word(Weights w) {
  return w == Weights::Shipped ? "shipped" : w == Weights::Published ? "published" : "unverified";
}

// ---- Part 1: the raw scan through the whole pipeline ----

struct RawTruth {
  PhantomOptions po;
  Volume chi, mask, local_field;
  double seconds = 0.0;
};

// One pipeline run and its scores. The first chain also keeps its local field and brain mask.
struct Chain {
  std::string key;    // "tv", "network", "tkd"
  std::string label;  // the row name
  FieldPipelineOptions opts;
  bool ran = false;
  std::string why;  // when it did not run
  Volume chi, local_field, brain_mask;
  Scored scored;
  std::optional<double> local_nrmse;
  double seconds = 0.0;
  /// Peak accounted bytes of the run, the scan it holds included (as `qsm pipeline` reports them):
  /// the scan's bytes plus the pipeline's peak above them.
  std::int64_t scan_bytes = 0, predicted = 0, measured = 0;
  std::vector<StageRecord> stages;
  std::vector<std::string> notes;
};

struct RawResults {
  RawTruth truth;
  Volume phase_last_echo;  // for the figure of the raw data
  std::vector<Chain> chains;
};

// The inversion's name as papers and docs/pipeline.md write it.
std::string inversion_name(InversionMethod m) {
  switch (m) {
    case InversionMethod::TvAdmm:
      return "TV-ADMM";
    case InversionMethod::Tkd:
      return "TKD";
    case InversionMethod::Rts:
      return "RTS";
    case InversionMethod::Tikhonov:
      return "Tikhonov";
    case InversionMethod::Ilsqr:
      return "iLSQR";
  }
  return to_string(m);
}

FieldPipelineOptions base_chain_options(const DemoArgs& a) {
  FieldPipelineOptions o;
  o.invert = true;  // the default inversion (TV-ADMM) unless the chain says otherwise
  o.engine.threads = a.threads;
  o.engine.backend = backend_from_string(a.backend);
  o.engine.precision = precision_from_string(a.precision);
  o.engine.residency = parse_residency(a.residency);
  apply_mem_budget(a.mem_budget, o.engine);
  return o;
}

std::vector<Chain> plan_chains(const DemoArgs& a, const DemoNetwork& net) {
  std::vector<Chain> c(3);
  c[0].key = "tv";
  c[0].opts = base_chain_options(a);
  c[0].label = "default chain: " + inversion_name(c[0].opts.inversion.method);
  c[1].key = "network";
  c[1].label = net.label + " + data consistency";  // the pipeline's default after a network (methods.md §6.7)
  c[1].opts = base_chain_options(a);
  c[1].opts.inversion_network = net.spec->id;
  c[1].opts.inversion_network_files = {net.path};
  c[2].key = "tkd";
  c[2].opts = base_chain_options(a);
  c[2].opts.inversion.method = InversionMethod::Tkd;  // its default threshold (inversion.h)
  c[2].label = "TKD (threshold 0.15)";
  return c;
}

// Refuses, before the phantom is simulated, a demo whose pipeline cannot fit the budget next to
// what the demo holds then (the truth, the scan and the copy each chain takes).
void check_budget(const PhantomOptions& po, const std::vector<Chain>& chains) {
  const auto echoes = static_cast<std::int64_t>(po.te_s.size());
  const std::int64_t voxels = po.dims[0] * po.dims[1] * po.dims[2];
  const std::int64_t held = memory_current() + voxels * 8 * (3 + 1 + 4 * echoes);
  const ModelOptions engine = with_process_defaults(chains[0].opts.engine);
  if (engine.mem_budget <= 0) return;
  for (const Chain& c : chains) {
    PipelinePrediction p;
    try {
      p = predict_field_pipeline(po.dims, po.voxel_mm, echoes, c.opts, true);
    } catch (const Error&) {
      continue;  // a chain that cannot even be predicted says why when it runs
    }
    if (held + p.peak_bytes > engine.mem_budget)
      throw Error(
          ErrorKind::OutOfBudget,
          "qsm demo: the pipeline (" + c.label + ") needs " + mib(p.peak_bytes) + " at its peak (" + p.peak_stage +
              ") beside the " + mib(held) + " the demo holds (the phantom's truth and scan), more than the budget of " +
              mib(engine.mem_budget) + (engine.mem_budget_source.empty() ? "" : " (" + engine.mem_budget_source + ")") +
              "; a smaller --size needs less");
  }
}

Scan copy_scan(const Scan& s) {
  Scan c;
  c.magnitude = s.magnitude.clone();
  c.phase = s.phase.clone();
  c.te_s = s.te_s;
  c.b0_t = s.b0_t;
  c.b0_dir = s.b0_dir;
  c.te_source = s.te_source;
  c.b0_source = s.b0_source;
  c.b0_dir_source = s.b0_dir_source;
  c.phase_scaling = s.phase_scaling;
  c.notes = s.notes;
  c.files = s.files;
  return c;
}

// The raw scan and its truth; the phantom's total field (not scored) is dropped at once.
Scan make_raw_scan(RawResults& r) {
  const auto t = Clock::now();
  Phantom ph = make_head_phantom(r.truth.po);
  r.truth.seconds = seconds_since(t);
  ph.total_field = Volume();
  r.truth.chi = std::move(ph.chi);
  r.truth.mask = std::move(ph.mask);
  r.truth.local_field = std::move(ph.local_field);
  r.phase_last_echo = Volume::zeros(ph.phase.dims(), ph.phase.geometry());
  const auto last = ph.phase.frame(ph.phase.frames() - 1);
  std::copy(last.begin(), last.end(), r.phase_last_echo.data());
  ScanOverrides o;
  o.te_s = r.truth.po.te_s;
  o.b0_t = r.truth.po.b0_t;
  o.b0_dir = r.truth.po.b0_dir;
  return make_scan(std::move(ph.magnitude), std::move(ph.phase), o, "the demo's raw scan");
}

void run_chain(Chain& c, Scan scan, const RawTruth& t, bool keep_fields) {
  c.scan_bytes = static_cast<std::int64_t>(sizeof(double)) * (scan.magnitude.size() + scan.phase.size());
  const auto start = Clock::now();
  FieldPipelineResult r = run_field_pipeline(std::move(scan), c.opts);
  c.seconds = seconds_since(start);
  c.ran = true;
  c.predicted = c.scan_bytes + r.predicted_peak_bytes;
  c.measured = c.scan_bytes + r.measured_peak_bytes;
  c.stages = std::move(r.stages);
  c.notes = std::move(r.notes);
  c.scored = score(r.chi_ppm, t.chi, t.mask);
  if (!r.local_field_ppm.empty()) {
    try {
      c.local_nrmse = demeaned_nrmse(r.local_field_ppm, t.local_field, t.mask);
    } catch (const Error&) {
      c.local_nrmse.reset();
    }
  }
  c.chi = std::move(r.chi_ppm);
  if (keep_fields) {
    c.local_field = std::move(r.local_field_ppm);
    c.brain_mask = std::move(r.mask);
  }
}

// Until the pipeline runs a network as its inversion, the network chain says so and the demo goes
// on; a pipeline that ignored the network (its inversion stage names another method) is caught.
void run_network_chain(Chain& c, Scan scan, const RawTruth& t) {
  try {
    run_chain(c, std::move(scan), t, false);
  } catch (const Error& e) {
    c.ran = false;
    c.why = e.what();
    return;
  }
  const auto inv =
      std::find_if(c.stages.begin(), c.stages.end(), [](const StageRecord& s) { return s.stage == "inversion"; });
  if (inv == c.stages.end() || inv->method.find(c.opts.inversion_network) == std::string::npos) {
    c.ran = false;
    c.why = "the pipeline's inversion stage did not run " + c.opts.inversion_network;
    c.chi = Volume();
  }
}

RawResults run_raw_section(const DemoArgs& a, const DemoNetwork& net, ProgressBar& bar) {
  RawResults r;
  r.truth.po = demo_raw_phantom_options(a.size);
  r.chains = plan_chains(a, net);
  check_budget(r.truth.po, r.chains);
  bar.update(0.0, "simulating the raw scan");
  Scan scan = make_raw_scan(r);
  const double from[3] = {0.15, 0.45, 0.7}, to[3] = {0.45, 0.7, 0.85};
  for (std::size_t i = 0; i < r.chains.size(); ++i) {
    Chain& c = r.chains[i];
    if (bar.enabled()) {
      const double f0 = from[i], f1 = to[i];
      const std::string name = c.label;
      c.opts.progress = [&bar, f0, f1, name](double f, const std::string& stage) {
        bar.update(f0 + f * (f1 - f0), name + ": " + stage);
      };
    }
    if (c.key == "network")
      run_network_chain(c, copy_scan(scan), r.truth);
    else if (i + 1 < r.chains.size())
      run_chain(c, copy_scan(scan), r.truth, i == 0);
    else
      run_chain(c, std::move(scan), r.truth, i == 0);  // the last chain takes the scan itself
    c.opts.progress = nullptr;
  }
  return r;
}

// ---- Part 2: the network's own task, χ from the true local field of the ellipsoid head ----

// TKD at the usual threshold, and at the threshold of a small sweep that scores best against
// the ground truth (a fair, generous baseline: a user without a ground truth cannot pick it).
struct TkdResult {
  double threshold = 0.0;
  Volume chi;
  Scored scored;
  double seconds = 0.0;
};
TkdResult run_tkd(const Phantom& ph, const Vec3& b0_dir, double threshold) {
  const auto t = Clock::now();
  TkdOptions o;
  o.threshold = threshold;
  TkdResult r{threshold, tkd(ph.local_field, ph.mask, b0_dir, o), {}, 0.0};
  r.seconds = seconds_since(t);
  r.scored = score(r.chi, ph.chi, ph.mask, true);
  return r;
}
// The sweep ranks by the demeaned NRMSE alone (cheap); only the winner gets every score.
TkdResult best_tkd(const Phantom& ph, const Vec3& b0_dir) {
  double best = -1.0, best_nrmse = std::numeric_limits<double>::infinity();
  for (double t : {0.05, 0.08, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.4}) {
    TkdOptions o;
    o.threshold = t;
    try {
      const double n = demeaned_nrmse(tkd(ph.local_field, ph.mask, b0_dir, o), ph.chi, ph.mask);
      if (n < best_nrmse) best_nrmse = n, best = t;
    } catch (const Error&) {
      continue;  // not scorable at this threshold
    }
  }
  if (best < 0.0) throw Error(ErrorKind::Internal, "TKD could not be scored at any threshold");
  return run_tkd(ph, b0_dir, best);
}

struct SimResults {
  PhantomOptions po;
  Phantom ph;
  double sim_seconds = 0.0;
  NetworkRun run;
  Volume chi_net;
  Scored s_net;
  double net_seconds = 0.0;
  TkdResult tkd_usual, tkd_best;
};

NetworkRun run_sim_network(const DemoArgs& a, const DemoNetwork& net, const SimResults& d, ProgressBar& bar) {
  const NetworkInputs in = demo_network_inputs(d.ph, d.po);
  NetworkOptions opts;
  opts.model.backend = backend_from_string(a.backend);
  opts.model.precision = precision_from_string(a.precision);
  opts.model.threads = a.threads;
  apply_mem_budget(a.mem_budget, opts.model);
  opts.model.residency = parse_residency(a.residency);
  opts.park_inputs = true;  // the phantom's volumes, which nothing else reads during the run
  const std::string name(net.spec->name);
  if (bar.enabled())
    opts.progress = [&bar, name](double f, const std::string& stage) {
      bar.update(0.85 + 0.13 * f, "simulated field, " + name + ": " + stage);
    };
  return run_network(*net.spec, {net.path}, in, opts);
}

SimResults run_sim_section(const DemoArgs& a, const DemoNetwork& net, ProgressBar& bar) {
  SimResults d;
  d.po = demo_phantom_options(a.size > 0 ? a.size : kSimulatedSize);  // shared with the web page (qsmcore/demo.h)
  bar.update(0.85, "simulating the ellipsoid head's local field");
  const auto t_sim = Clock::now();
  d.ph = make_head_phantom(d.po);
  d.sim_seconds = seconds_since(t_sim);
  const auto t_net = Clock::now();
  d.run = run_sim_network(a, net, d, bar);
  d.net_seconds = seconds_since(t_net);
  d.chi_net = std::move(chi_output(d.run, net.spec->id).volume);
  bar.update(0.98, "TKD");
  d.tkd_usual = run_tkd(d.ph, d.po.b0_dir, TkdOptions{}.threshold);
  d.tkd_best = best_tkd(d.ph, d.po.b0_dir);
  d.s_net = score(d.chi_net, d.ph.chi, d.ph.mask, true);
  return d;
}

// ---- Outputs ----

// The local field's window: symmetric, the 99th percentile of |field| in the mask rounded up to
// 1, 2 or 5 × 10^k ppm, so the figure shows the field's own contrast.
double field_window(const Volume& field, const Volume& mask) {
  std::size_t n = 0;
  for (std::int64_t i = 0; i < mask.voxels(); ++i) n += mask.data()[i] > 0.5 && std::isfinite(field.data()[i]);
  if (n == 0) return 0.1;
  AccountedArray<float> a(n);  // |field| in the mask, to pick the percentile from
  n = 0;
  for (std::int64_t i = 0; i < mask.voxels(); ++i)
    if (mask.data()[i] > 0.5 && std::isfinite(field.data()[i])) a[n++] = static_cast<float>(std::abs(field.data()[i]));
  const auto k = static_cast<std::ptrdiff_t>(0.99 * static_cast<double>(n - 1));
  std::nth_element(a.begin(), a.begin() + k, a.end());
  const double p = std::max(static_cast<double>(a[static_cast<std::size_t>(k)]), 1e-6);
  const double e = std::pow(10.0, std::floor(std::log10(p)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * e >= p) return m * e;
  return 10.0 * e;
}

class DemoWriter {
 public:
  explicit DemoWriter(const fs::path& dir) : dir_(dir) {}
  std::string nii(const std::string& name, const Volume& v, io::NiftiStore store, const std::string& what) {
    io::NiftiWriteOptions w;
    w.store = store;
    w.description = "qsm demo: " + what;
    const std::string path = (dir_ / (name + ".nii.gz")).string();
    io::write_nifti(staged_.stage(path), v, w);
    return path;
  }
  std::string figure(const std::string& name, const std::vector<io::FigureRow>& rows, const io::SliceFigureOptions& o) {
    const std::string path = (dir_ / (name + ".png")).string();
    io::write_slice_figure(staged_.stage(path), rows, o);
    return path;
  }
  std::string text(const std::string& name, const std::string& content) {
    const std::string path = (dir_ / name).string();
    io::write_file_atomically(staged_.stage(path), std::as_bytes(std::span(content)));
    return path;
  }
  void commit() { staged_.commit(); }

 private:
  fs::path dir_;
  StagedOutputs staged_;  // makes the folder with its first file; removes what it made if writing fails
};

io::SliceFigureOptions chi_figure(const std::string& title, std::optional<Dims3> point = std::nullopt) {
  io::SliceFigureOptions o;
  o.point = point;
  o.low = -kChiWindowPpm;
  o.high = kChiWindowPpm;
  o.title = title;
  return o;
}

json write_raw_outputs(DemoWriter& w, const RawResults& r) {
  json files;
  const RawTruth& t = r.truth;
  files["chi_true"] = w.nii("chi_true", t.chi, io::NiftiStore::F32, "true chi of the raw scan's head (ppm)");
  files["mask_true"] = w.nii("mask_true", t.mask, io::NiftiStore::U8, "true brain mask");
  files["local_field_true"] = w.nii("local_field_true", t.local_field, io::NiftiStore::F32, "true local field (ppm)");
  std::vector<io::FigureRow> rows{{"truth", &t.chi}};
  for (const Chain& c : r.chains) {
    if (!c.ran) continue;
    files["chi_" + c.key] = w.nii("chi_" + c.key, c.chi, io::NiftiStore::F32, "chi by the pipeline, " + c.label);
    rows.push_back({c.label, &c.chi});
  }
  const Chain& first = r.chains[0];
  files["local_field"] = w.nii("local_field", first.local_field, io::NiftiStore::F32,
                               "local field by the pipeline (the field of TV-ADMM's chi inside its mask)");
  files["brain_mask"] = w.nii("brain_mask", first.brain_mask, io::NiftiStore::U8, "the pipeline's own brain mask");
  const Dims3 point = demo_raw_figure_point(t.po);
  files["chi_png"] =
      w.figure("chi", rows,
               chi_figure("chi (ppm) from the raw scan: truth, then each chain; planes through the right "
                          "globus pallidus",
                          point));
  io::SliceFigureOptions f;
  f.point = point;
  f.high = field_window(t.local_field, t.mask);
  f.low = -f.high;
  f.title = "local field (ppm): truth, then the pipeline's (its own mask; the field of TV-ADMM's chi)";
  files["local_field_png"] = w.figure("local_field", {{"truth", &t.local_field}, {"pipeline", &first.local_field}}, f);
  io::SliceFigureOptions p;
  p.point = point;
  p.low = -std::numbers::pi;
  p.high = std::numbers::pi;
  p.unit = "rad";
  char title[96];
  std::snprintf(title, sizeof title, "the raw scan's wrapped phase, last echo (TE %.0f ms)", t.po.te_s.back() * 1e3);
  p.title = title;
  files["phase_png"] = w.figure("phase", {{"phase", &r.phase_last_echo}}, p);
  return files;
}

json write_sim_outputs(DemoWriter& w, const SimResults& d, const DemoNetwork& net) {
  json files;
  files["chi_true"] = w.nii("simulated/chi_true", d.ph.chi, io::NiftiStore::F32, "ground-truth chi (ppm)");
  files["local_field"] = w.nii("simulated/local_field", d.ph.local_field, io::NiftiStore::F32, "local field (ppm)");
  files["mask"] = w.nii("simulated/mask", d.ph.mask, io::NiftiStore::U8, "brain mask");
  files["chi_network"] =
      w.nii("simulated/chi_network", d.chi_net, io::NiftiStore::F32, "chi by " + net.label + " (ppm)");
  files["chi_tkd"] = w.nii("simulated/chi_tkd", d.tkd_usual.chi, io::NiftiStore::F32, "chi by TKD (ppm)");
  char tkd[48];
  std::snprintf(tkd, sizeof tkd, "TKD (t = %.2f)", d.tkd_usual.threshold);
  files["chi_png"] = w.figure("simulated/chi", {{"truth", &d.ph.chi}, {net.label, &d.chi_net}, {tkd, &d.tkd_usual.chi}},
                              chi_figure("chi (ppm) from the simulated local field of the ellipsoid head"));
  return files;
}

json stages_json(const std::vector<StageRecord>& stages) {
  json a = json::array();
  for (const StageRecord& s : stages)
    a.push_back({{"stage", s.stage},
                 {"method", s.method},
                 {"seconds", s.seconds},
                 {"predicted_peak_bytes", s.predicted_peak_bytes},
                 {"measured_peak_bytes", s.measured_peak_bytes}});
  return a;
}

json raw_json(const RawResults& r) {
  const PhantomOptions& po = r.truth.po;
  json j;
  j["scan"] = {{"anatomy", "atlas"},
               {"dims", po.dims},
               {"voxel_mm", po.voxel_mm},
               {"b0_tesla", po.b0_t},
               {"b0_dir", po.b0_dir},
               {"te_s", po.te_s},
               {"peak_snr", po.peak_snr},
               {"seed", po.seed},
               {"what",
                "qsm phantom --raw --anatomy atlas: wrapped multi-echo phase and magnitude, receiver offset, "
                "scalp, skull and air around the head, noise"},
               {"simulate_seconds", r.truth.seconds}};
  j["chains"] = json::array();
  for (const Chain& c : r.chains) {
    json cj{{"key", c.key}, {"name", c.label}, {"ran", c.ran}};
    if (!c.ran) {
      cj["error"] = c.why;
    } else {
      cj["metrics"] = score_json(c.scored);
      cj["local_field_nrmse_demeaned_percent"] = c.local_nrmse ? json(*c.local_nrmse) : json(nullptr);
      cj["seconds"] = c.seconds;
      cj["predicted_peak_bytes"] = c.predicted;  // the scan included, as qsm pipeline's report
      cj["measured_peak_bytes"] = c.measured;
      cj["scan_bytes"] = c.scan_bytes;
      cj["stages"] = stages_json(c.stages);
      cj["notes"] = c.notes;
    }
    j["chains"].push_back(cj);
  }
  return j;
}

json sim_json(const SimResults& d) {
  json j;
  j["phantom"] = {{"anatomy", "ellipsoids"},
                  {"dims", d.po.dims},
                  {"voxel_mm", d.po.voxel_mm},
                  {"b0_tesla", d.po.b0_t},
                  {"b0_dir", d.po.b0_dir},
                  {"forward_model", "qsm-forward: chi*mask padded to 2N with the corner voxel, D(0) = 1/3"},
                  {"simulate_seconds", d.sim_seconds}};
  j["network"] = {{"seconds", d.net_seconds},
                  {"predicted_peak_bytes", d.run.predicted_peak_bytes},
                  {"measured_peak_bytes", d.run.measured_peak_bytes},
                  {"tiles", d.run.tiles},
                  {"tiles_in_flight", d.run.tiles_in_flight},
                  {"warnings", d.run.warnings},
                  {"metrics", score_json(d.s_net)}};
  j["network"]["stages"] = json::array();
  for (const StageTime& s : d.run.stages)
    j["network"]["stages"].push_back({{"stage", s.stage}, {"seconds", s.seconds}});
  j["tkd"] = {{"threshold", d.tkd_usual.threshold},
              {"seconds", d.tkd_usual.seconds},
              {"metrics", score_json(d.tkd_usual.scored)}};
  j["tkd_best"] = {{"threshold", d.tkd_best.threshold},
                   {"chosen", "lowest demeaned NRMSE against the ground truth over a sweep of thresholds"},
                   {"metrics", score_json(d.tkd_best.scored)}};
  return j;
}

void write_outputs(const DemoArgs& a, const DemoNetwork& net, const RawResults& r, const SimResults& d) {
  DemoWriter w{fs::path(a.out)};
  json files = write_raw_outputs(w, r);
  files["simulated"] = write_sim_outputs(w, d, net);
  json j;
  j["command"] = "qsm demo";
  j["network"] = {{"id", net.spec->id},
                  {"name", net.spec->name},
                  {"model_path", net.path},
                  {"sha256", net.sha},
                  {"weights", weights_word(net.weights)},
                  {"trained_weights", net.weights != Weights::Unverified},
                  {"note", weights_note(net)}};
  j["raw_scan"] = raw_json(r);
  j["simulated_local_field"] = sim_json(d);
  j["metrics_definition"] =
      "against the true chi inside the true brain mask: nrmse_demeaned_percent is QSM-CI's current NRMSE "
      "(methods.md §8: demeaned over the mask; voxels without chi count as error); xsim, hfen and cc are "
      "metrics.h's compute_metrics (physics.md §5: SSIM with a 3-voxel window, LoG sigma 1.5) over the mask's "
      "bounding box; slope and intercept: least squares chi = slope*truth + intercept over the mask";
  j["process_peak_rss_bytes"] = process_peak_rss();
  j["files"] = files;
  w.text("demo.json", j.dump(2) + "\n");
  w.commit();
}

// ---- The summary on stdout ----

// The stages every chain shares: those before the inversion (the default chain's "local field"
// after it is its own; print_local_field says what it wrote).
std::string stages_line(const Chain& c) {
  std::string s;
  for (const StageRecord& r : c.stages) {
    if (r.stage == "inversion") break;
    s += (s.empty() ? "" : " -> ") + r.stage + " (" + r.method + ")";
  }
  return s;
}

// The default chain writes the field of TV-ADMM's χ as its local field (methods.md §5.2); the
// other chains invert the background removal's, the same in each of them.
void print_local_field(const std::vector<Chain>& chains) {
  if (chains.empty() || !chains[0].local_nrmse) return;
  const bool from_chi = std::any_of(chains[0].stages.begin(), chains[0].stages.end(),
                                    [](const StageRecord& s) { return s.stage == "local field"; });
  if (!from_chi) {
    std::printf("  local field (the stages before the inversion, the same in every chain): NRMSE %.1f %%\n",
                *chains[0].local_nrmse);
    return;
  }
  std::printf(
      "  local field written by the default chain (the field of TV-ADMM's chi, docs/methods.md 5.2): NRMSE %.1f %%\n",
      *chains[0].local_nrmse);
  for (std::size_t i = 1; i < chains.size(); ++i)
    if (chains[i].local_nrmse) {
      std::printf("  the background removal's, which the other chains invert: NRMSE %.1f %%\n", *chains[i].local_nrmse);
      return;
    }
}

void print_raw_table(const RawResults& r) {
  const PhantomOptions& po = r.truth.po;
  std::printf("qsm demo, part 1: chi from a raw scan through the whole pipeline (run_field_pipeline)\n");
  std::printf(
      "  scan: the atlas head (real anatomy, MNI152 atlases), %s, %.0f T along z, %zu echoes %.0f-%.0f ms,\n"
      "        wrapped phase with a receiver offset, noise at peak SNR %.0f, scalp, skull and air around the head\n"
      "        (what `qsm phantom --raw --anatomy atlas` writes); simulated in %.1f s\n",
      describe_grid(r.truth.chi).c_str(), po.b0_t, po.te_s.size(), po.te_s.front() * 1e3, po.te_s.back() * 1e3,
      po.peak_snr, r.truth.seconds);
  std::printf("  every chain, from the scan alone: %s -> inversion\n\n", stages_line(r.chains[0]).c_str());
  int w = 28;  // the label column: as wide as the longest label (labels are ASCII)
  for (const Chain& c : r.chains) w = std::max(w, static_cast<int>(c.label.size()));
  std::printf("  %-*s %8s %6s %6s %6s %8s  %s\n", w, "inversion", "NRMSE %", "XSIM", "HFEN", "slope", "time s",
              "peak memory, scan included: predicted / measured");
  for (const Chain& c : r.chains) {
    if (!c.ran) {
      std::printf("  %-*s %8s %6s %6s %6s %8s  (not run: %s)\n", w, c.label.c_str(), "n/a", "n/a", "n/a", "n/a", "n/a",
                  c.why.c_str());
    } else if (!c.scored.chi) {
      std::printf("  %-*s %8s %6s %6s %6s %8.1f  %s / %s  (%s)\n", w, c.label.c_str(), "n/a", "n/a", "n/a", "n/a",
                  c.seconds, mib(c.predicted).c_str(), mib(c.measured).c_str(), c.scored.why.c_str());
    } else {
      const ChiScore& s = *c.scored.chi;
      std::printf("  %-*s %8.1f %6.3f %6.3f %6.2f %8.1f  %s / %s\n", w, c.label.c_str(), s.nrmse_demeaned, s.xsim,
                  s.hfen, s.slope, c.seconds, mib(c.predicted).c_str(), mib(c.measured).c_str());
    }
  }
  print_local_field(r.chains);
  std::printf(
      "  all against the truth inside the true brain mask: NRMSE as QSM-CI scores it now (demeaned; a voxel\n"
      "  without chi counts as error); XSIM and HFEN as metrics.h computes them (physics.md §5: SSIM with a\n"
      "  3-voxel window, not the 5-voxel one of docs/pipeline.md's tables; LoG sigma 1.5); slope: chi fitted\n"
      "  on the true chi (1 = the truth's contrast); time and accounted memory of the whole run_field_pipeline\n\n");
}

void print_sim_table(const SimResults& d, const DemoNetwork& net) {
  std::printf(
      "qsm demo, part 2: what the network was trained for: chi from the true local field (simulated as\n"
      "  qsm-forward does) of the ellipsoid head, %s (%.1f s), no scan, no pipeline\n\n",
      describe_grid(d.ph.chi).c_str(), d.sim_seconds);
  std::printf("  %-28s %8s %8s %6s %6s %6s %8s\n", "reconstruction", "NRMSE %", "(mean)", "XSIM", "HFEN", "slope",
              "time s");
  const auto row = [](const std::string& name, const Scored& s, double t) {
    if (s.chi && s.qsmci)
      std::printf("  %-28s %8.1f %8.1f %6.3f %6.3f %6.2f %8.2f\n", name.c_str(), s.chi->nrmse_demeaned, s.qsmci->nrmse,
                  s.chi->xsim, s.chi->hfen, s.chi->slope, t);
    else
      std::printf("  %-28s %8s %8s %6s %6s %6s %8.2f  (%s)\n", name.c_str(), "n/a", "n/a", "n/a", "n/a", "n/a", t,
                  s.why.c_str());
  };
  char usual[64], best[64];
  std::snprintf(usual, sizeof usual, "TKD (t = %.2f)", d.tkd_usual.threshold);
  std::snprintf(best, sizeof best, "TKD (best t = %.3g)", d.tkd_best.threshold);
  row(net.label, d.s_net, d.net_seconds);
  row(usual, d.tkd_usual.scored, d.tkd_usual.seconds);
  row(best, d.tkd_best.scored, d.tkd_best.seconds);
  std::printf(
      "  NRMSE as in part 1; (mean): NRMSE not demeaned (the model card's), which also counts the mean of chi that\n"
      "  TKD cannot recover; TKD's best threshold is chosen with the ground truth, which a real scan does not have;\n"
      "  %s memory: predicted peak %s, measured %s (engine accounting)\n\n",
      net.label.c_str(), mib(d.run.predicted_peak_bytes).c_str(), mib(d.run.measured_peak_bytes).c_str());
}

void print_summary(const DemoArgs& a, const DemoNetwork& net, const RawResults& r, const SimResults& d) {
  print_raw_table(r);
  print_sim_table(d, net);
  std::printf("%s: %s.\n", net.label.c_str(), weights_note(net).c_str());
  if (net.weights == Weights::Unverified)
    std::printf(
        "  The SHA-256 of %s differs from the registry's. An architecture twin has random weights,\n"
        "  so its chi and metrics are not meaningful; the run proves the pipeline: NIfTI I/O,\n"
        "  padding, the ONNX engine and memory accounting.\n",
        net.path.c_str());
  for (const std::string& w : d.run.warnings) std::printf("%s warning: %s\n", net.label.c_str(), w.c_str());
  std::printf("process peak RSS %s\n", mib(process_peak_rss()).c_str());
  std::printf(
      "wrote %s/: chi.png, local_field.png, phase.png (slices, radiological), chi_true, chi_tv, chi_network,\n"
      "  chi_tkd, local_field(_true), brain_mask, mask_true (.nii.gz), simulated/ (part 2), demo.json\n",
      a.out.c_str());
}

void demo(const DemoArgs& a) {
  const DemoNetwork net = choose_network(a);  // a missing file should fail before minutes of work
  ScopedThreads threads(a.threads);           // the phantoms' simulation too
  ProgressBar bar(a.quiet);
  const RawResults raw = run_raw_section(a, net, bar);
  const SimResults sim = run_sim_section(a, net, bar);
  bar.finish();
  write_outputs(a, net, raw, sim);
  print_summary(a, net, raw, sim);
}

}  // namespace

void register_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo",
                                 "A raw scan of a realistic head -> the whole pipeline (default chain, a network as "
                                 "the inversion, TKD) -> metrics against the truth, memory, slice figures");
  cmd->footer(
      "Part 1: the atlas head's raw scan (as `qsm phantom --raw --anatomy atlas`) through run_field_pipeline with "
      "the default chain (TV-ADMM), the same chain with the network as the inversion, and TKD. Part 2: the network "
      "and TKD on the simulated local field of the ellipsoid head, what the network was trained for. By default the "
      "network is qsmcore-invnet, which qsmcore trains on synthetic heads and ships. --model takes another registry "
      "id (weights looked up like `qsm run ID` does; never downloaded) or an ONNX file; a file whose SHA-256 is not "
      "the registry's (e.g. the xQSM architecture twin with random weights: tools/twins/make --only xqsm) is run and "
      "labelled untrained: its metrics are then not meaningful.");
  auto args = std::make_shared<DemoArgs>();
  cmd->add_option("--out", args->out, "output folder (default qsm-demo, created if missing)");
  cmd->add_option("--size", args->size,
                  "a quicker demo: the atlas head on N voxels across (its whole field of view, 181/N mm voxels) "
                  "and part 2 on N^3 (default: 181x217x181 at 1 mm, and 128^3); 32 or more")
      ->check(CLI::Range(32, 512));
  cmd->add_option("--threads", args->threads, kThreadsHelp)->check(CLI::NonNegativeNumber);
  cmd->add_option("--precision", args->precision, kPrecisionHelp)->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_option("--mem-budget", args->mem_budget, kMemBudgetHelp);
  cmd->add_option("--residency", args->residency, "where the network's weights live: full | layerwise[:…] | stream[:…]")
      ->capture_default_str();
  cmd->add_option("--model", args->model, "registry id or ONNX file of the network (default qsmcore-invnet)");
  cmd->add_option("--network", args->network,
                  "the registry recipe that runs a --model file (default: by hash or name)");
  cmd->add_option("--backend", args->backend, "onednn | reference")->check(CLI::IsMember({"onednn", "reference"}));
  cmd->add_flag("--quiet", args->quiet, "no progress bar");
  cmd->callback([args] { demo(*args); });
}

}  // namespace qsmcore::cli
