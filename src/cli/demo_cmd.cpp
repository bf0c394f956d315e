// qsm demo: the whole pipeline on a numerical head, end to end, in seconds.
//  1. the analytic head phantom (physics.md §4.3): ground-truth χ and the brain mask;
//  2. its local field, simulated as qsm-forward does (physics.md §3 step 1, on χ·mask);
//  3. two reconstructions of χ from that field: the xQSM network through run_network (the same
//     path `qsm run xqsm` takes), and a classical TKD inversion;
//  4. QSM-CI's metrics of each against the ground truth (physics.md §5), the network run's
//     predicted and measured peak memory, NIfTI volumes, PNG previews and demo.json.
// The xQSM file is normally the architecture twin tools/demo.sh generates: the published
// architecture with random weights. Its χ is then noise-like and its metrics mean nothing; the
// run proves the pipeline (I/O, padding, the engine, memory accounting), and the demo says so.
// With the published weights (SHA-256 matches the registry) the metrics are real.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/staged_outputs.h"
#include "io/atomic_file.h"
#include "io/nifti.h"
#include "io/png_preview.h"
#include "qsmcore/error.h"
#include "qsmcore/metrics.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"
#include "qsmcore/physics.h"
#include "qsmcore/residency.h"

namespace qsmcore::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct DemoArgs {
  std::string out = "qsm-demo";
  int size = 128;
  int threads = 0;
  std::string mem_budget;  // "" = what the process may use, "none", or a byte size
  std::string model;       // the xQSM ONNX file; "" = the registry's resolution (local files only)
  std::string backend = "onednn";
  std::string residency = "full";
  bool quiet = false;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Metrics of `pred` against the ground truth inside the brain mask; nullopt (with the reason)
// when they cannot be computed (e.g. a network that returned zeros everywhere in the mask).
struct Scored {
  std::optional<QsmMetrics> m;
  std::string why;
};
Scored score(const Volume& pred, const Volume& truth, const Volume& mask) {
  try {
    return {compute_metrics(pred, truth, &mask), ""};
  } catch (const Error& e) {
    return {std::nullopt, e.what()};
  }
}

nlohmann::json metrics_json(const Scored& s) {
  if (!s.m) return {{"error", s.why}};
  const QsmMetrics& m = *s.m;
  return {{"nrmse_percent", m.nrmse}, {"hfen", m.hfen}, {"xsim", m.xsim}, {"rmse_ppm", m.rmse},
          {"mad_ppm", m.mad},         {"cc", m.cc},     {"gxe", m.gxe},   {"roi_voxels", m.roi_voxels}};
}

void demo(const DemoArgs& a) {
  const auto t_start = Clock::now();
  const ModelSpec& spec = require_model("xqsm");

  // The xQSM file first: a missing one should fail before seconds of simulation.
  std::string model_path = a.model;
  if (model_path.empty()) {
    FetchOptions f;
    f.allow_download = false;  // a demo never downloads on its own; `qsm fetch xqsm` does
    f.verify = false;          // the twin is expected here; published or not is said below
    try {
      model_path = resolve_weights(spec, f).at(0).path.string();
    } catch (const Error& e) {
      throw Error(ErrorKind::NotFound, std::string("qsm demo needs an xQSM ONNX file: ") + e.what() +
                                           "\nRun `bash tools/demo.sh` (it generates the xQSM architecture twin), "
                                           "pass --model FILE, or `qsm fetch xqsm` for the published weights.");
    }
  } else if (!fs::is_regular_file(model_path)) {
    throw Error(ErrorKind::NotFound, "--model " + model_path + ": no such file");
  }
  const std::string sha = weight_file_sha256(model_path);
  const bool published = !spec.files.empty() && !spec.files[0].sha256.empty() && sha == spec.files[0].sha256;

  const fs::path dir(a.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot create " + a.out + ": " + ec.message());

  // ---- 1–2: phantom and its local field ---------------------------------------------------------
  PhantomOptions po;
  po.dims = {a.size, a.size, a.size};
  po.voxel_mm = {1.0, 1.0, 1.0};
  po.te_s = {0.02};       // one echo: the demo reconstructs from the local field, not the phase
  po.background = false;  // background sources only shape the total field, unused here
  po.validate();
  ProgressBar bar(a.quiet);
  bar.update(0.0, "simulating the phantom");
  const auto t_sim = Clock::now();
  const Phantom ph = make_head_phantom(po);
  const double sim_seconds = seconds_since(t_sim);

  // ---- 3a: xQSM through run_network ---------------------------------------------------------------
  NetworkInputs in;
  in.field = &ph.local_field;
  in.mask = &ph.mask;
  in.field_unit = FieldUnit::Ppm;
  in.b0_tesla = po.b0_t;
  in.b0_dir = po.b0_dir;
  NetworkOptions opts;
  opts.model.backend = backend_from_string(a.backend);
  opts.model.threads = a.threads;
  apply_mem_budget(a.mem_budget, opts.model);
  opts.model.residency = parse_residency(a.residency);
  if (bar.enabled()) opts.progress = [&bar](double f, const std::string& stage) { bar.update(f, "xQSM: " + stage); };
  const auto t_net = Clock::now();
  NetworkRun net = run_network(spec, {model_path}, in, opts);
  const double net_seconds = seconds_since(t_net);
  if (net.outputs.empty()) throw Error(ErrorKind::Internal, "xqsm returned no output");
  const NetworkOutput* chi_out = net.find("chi");
  const Volume& chi_xqsm = chi_out != nullptr ? chi_out->volume : net.outputs[0].volume;

  // ---- 3b: TKD ----------------------------------------------------------------------------------------
  bar.update(1.0, "TKD");
  const auto t_tkd = Clock::now();
  TkdOptions tkd_opts;  // threshold 0.19, D(0) = 0, no padding
  const Volume chi_tkd = tkd(ph.local_field, ph.mask, po.b0_dir, tkd_opts);
  const double tkd_seconds = seconds_since(t_tkd);

  // ---- 4: metrics and files -----------------------------------------------------------------------------
  bar.update(1.0, "metrics");
  const Scored s_xqsm = score(chi_xqsm, ph.chi, ph.mask);
  const Scored s_tkd = score(chi_tkd, ph.chi, ph.mask);
  bar.finish();

  StagedOutputs staged;
  const auto nii = [&](const char* name, const Volume& v, io::NiftiStore store, const std::string& what) {
    io::NiftiWriteOptions w;
    w.store = store;
    w.description = "qsm demo: " + what;
    const std::string path = (dir / (std::string(name) + ".nii.gz")).string();
    io::write_nifti(staged.stage(path), v, w);
    return path;
  };
  const auto png = [&](const char* name, const Volume& v, std::optional<double> lo, std::optional<double> hi) {
    io::PreviewOptions p;
    p.low = lo;
    p.high = hi;
    const std::string path = (dir / (std::string(name) + ".png")).string();
    io::write_png_preview(staged.stage(path), v, p);
    return path;
  };
  nlohmann::json files;
  files["chi_true"] = nii("chi_true", ph.chi, io::NiftiStore::F32, "ground-truth chi (ppm)");
  files["local_field"] = nii("local_field", ph.local_field, io::NiftiStore::F32, "local field (ppm)");
  files["mask"] = nii("mask", ph.mask, io::NiftiStore::U8, "brain mask");
  files["chi_xqsm"] = nii("chi_xqsm", chi_xqsm, io::NiftiStore::F32, "chi by xQSM (ppm)");
  files["chi_tkd"] = nii("chi_tkd", chi_tkd, io::NiftiStore::F32, "chi by TKD (ppm)");
  // χ maps share one window (−0.1..0.2 ppm) so they can be compared by eye; the network's own
  // output gets its percentiles too, since a random-weight twin may be far outside it.
  files["chi_true_png"] = png("chi_true", ph.chi, -0.1, 0.2);
  files["chi_tkd_png"] = png("chi_tkd", chi_tkd, -0.1, 0.2);
  files["chi_xqsm_png"] = png("chi_xqsm", chi_xqsm, std::nullopt, std::nullopt);
  files["local_field_png"] = png("local_field", ph.local_field, std::nullopt, std::nullopt);

  nlohmann::json j;
  j["command"] = "qsm demo";
  j["phantom"] = {{"dims", po.dims},
                  {"voxel_mm", po.voxel_mm},
                  {"b0_tesla", po.b0_t},
                  {"b0_dir", po.b0_dir},
                  {"forward_model", "qsm-forward: chi*mask padded to 2N with the corner voxel, D(0) = 1/3"},
                  {"simulate_seconds", sim_seconds}};
  j["xqsm"] = {{"model_path", model_path},
               {"sha256", sha},
               {"published_weights", published},
               {"note", published ? "published xQSM weights (SHA-256 matches the registry)"
                                  : "NOT the published weights (e.g. the architecture twin with random weights): "
                                    "its metrics are not meaningful; the run proves the pipeline"},
               {"seconds", net_seconds},
               {"predicted_peak_bytes", net.predicted_peak_bytes},
               {"measured_peak_bytes", net.measured_peak_bytes},
               {"tiles", net.tiles},
               {"tiles_in_flight", net.tiles_in_flight},
               {"warnings", net.warnings},
               {"metrics", metrics_json(s_xqsm)}};
  j["xqsm"]["stages"] = nlohmann::json::array();
  for (const StageTime& s : net.stages) j["xqsm"]["stages"].push_back({{"stage", s.stage}, {"seconds", s.seconds}});
  j["tkd"] = {{"threshold", tkd_opts.threshold}, {"seconds", tkd_seconds}, {"metrics", metrics_json(s_tkd)}};
  j["metrics_definition"] = "QSM-CI (physics.md §5) against the ground-truth chi, ROI = brain mask; NRMSE in percent";
  j["process_peak_rss_bytes"] = process_peak_rss();
  j["files"] = files;
  const std::string summary_path = (dir / "demo.json").string();
  j["total_seconds"] = seconds_since(t_start);
  const std::string text = j.dump(2) + "\n";
  io::write_file_atomically(staged.stage(summary_path), std::as_bytes(std::span(text)));
  staged.commit();

  // ---- what the user sees --------------------------------------------------------------------------------
  std::printf("qsm demo: head phantom %s, B0 %.0f T along z; local field simulated as qsm-forward (%.1f s)\n",
              describe_grid(ph.chi).c_str(), po.b0_t, sim_seconds);
  std::printf("\n  %-16s %9s %8s %8s %9s\n", "reconstruction", "NRMSE %", "HFEN", "XSIM", "time s");
  const auto row = [](const char* name, const Scored& s, double t) {
    if (s.m)
      std::printf("  %-16s %9.1f %8.3f %8.3f %9.2f\n", name, s.m->nrmse, s.m->hfen, s.m->xsim, t);
    else
      std::printf("  %-16s %9s %8s %8s %9.2f   (%s)\n", name, "n/a", "n/a", "n/a", t, s.why.c_str());
  };
  row(published ? "xQSM" : "xQSM (twin)", s_xqsm, net_seconds);
  row("TKD (t = 0.19)", s_tkd, tkd_seconds);
  std::printf("  metrics as QSM-CI computes them, against the ground-truth χ inside the brain mask\n\n");
  if (published)
    std::printf("xQSM: the published weights (SHA-256 matches the registry).\n");
  else
    std::printf(
        "xQSM: NOT the published network (the SHA-256 of %s differs from the registry's).\n"
        "  It is the xQSM architecture with random weights, so its χ and metrics are not meaningful; the run\n"
        "  proves the pipeline: NIfTI I/O, padding, the ONNX engine and memory accounting.\n"
        "  `qsm fetch xqsm` gets the published weights.\n",
        model_path.c_str());
  std::printf("xQSM memory: predicted peak %s, measured %s (engine accounting); process peak RSS %s\n",
              mib(net.predicted_peak_bytes).c_str(), mib(net.measured_peak_bytes).c_str(),
              mib(process_peak_rss()).c_str());
  for (const std::string& w : net.warnings) std::printf("xQSM warning: %s\n", w.c_str());
  std::printf("wrote %s/: chi_true, local_field, mask, chi_xqsm, chi_tkd (.nii.gz and .png), demo.json\n",
              a.out.c_str());
}

}  // namespace

void register_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "demo", "Head phantom -> local field -> xQSM (run_network) and TKD -> metrics, memory, NIfTI/PNG/JSON");
  cmd->footer(
      "The xQSM file is looked up like `qsm run xqsm` does (QSM_MODEL_DIR_XQSM, QSM_MODEL_DIR, the caches; never "
      "downloaded) unless --model names it. tools/demo.sh generates the xQSM architecture twin (random weights) "
      "for it: its metrics are then not meaningful, the run proves the pipeline.");
  auto args = std::make_shared<DemoArgs>();
  cmd->add_option("--out", args->out, "output folder (default qsm-demo, created if missing)");
  cmd->add_option("--size", args->size, "edge of the cubic phantom in 1 mm voxels (default 128)")
      ->check(CLI::Range(16, 512));
  cmd->add_option("--threads", args->threads, kThreadsHelp)->check(CLI::NonNegativeNumber);
  cmd->add_option("--mem-budget", args->mem_budget, kMemBudgetHelp);
  cmd->add_option("--residency", args->residency, "where xQSM's weights live: full | layerwise[:…] | stream[:…]")
      ->capture_default_str();
  cmd->add_option("--model", args->model, "the xQSM ONNX file to run (default: the registry's lookup)");
  cmd->add_option("--backend", args->backend, "onednn | reference")->check(CLI::IsMember({"onednn", "reference"}));
  cmd->add_flag("--quiet", args->quiet, "no progress bar");
  cmd->callback([args] { demo(*args); });
}

}  // namespace qsmcore::cli
