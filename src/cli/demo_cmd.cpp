// qsm demo: the whole pipeline on a numerical head, end to end, in seconds.
//  1. the analytic head phantom (physics.md §4.3): ground-truth χ and the brain mask;
//  2. its local field, simulated as qsm-forward does (physics.md §3 step 1, on χ·mask);
//  3. reconstructions of χ from that field: a dipole-inversion network through run_network (the
//     same path `qsm run ID` takes) — by default qsmcore-invnet, the network qsmcore trains
//     itself on synthetic heads and ships (tools/train, models/qsmcore-invnet.md) — and the
//     classical TKD, at its usual threshold and at the threshold that scores best here;
//  4. QSM-CI's metrics of each against the ground truth (physics.md §5), the network run's
//     predicted and measured peak memory, NIfTI volumes, PNG previews and demo.json.
// `--model` takes another registry id (its weights looked up locally, never downloaded) or an
// ONNX file; a file whose SHA-256 is not the registry's (e.g. an architecture twin with random
// weights) is run and labelled as such: its metrics are then not meaningful.
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
#include "qsmcore/demo.h"
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
  std::string model = "qsmcore-invnet";  // a registry id or an ONNX file
  std::string network;                   // the recipe for a --model file ("" = from its hash or name)
  std::string mem_budget;                // "" = what the process may use, "none", or a byte size
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

// What the demo runs and what its weights are: the user is told plainly when they are not
// trained ones.
enum class Weights { Shipped, Published, Unverified };

struct DemoNetwork {
  const ModelSpec* spec = nullptr;
  std::string path;
  std::string sha;
  Weights weights = Weights::Unverified;
  std::string label;  // the row name in the table
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
  r.scored = score(r.chi, ph.chi, ph.mask);
  return r;
}
TkdResult best_tkd(const Phantom& ph, const Vec3& b0_dir) {
  std::optional<TkdResult> best;
  for (double t : {0.05, 0.08, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.4}) {
    TkdResult r = run_tkd(ph, b0_dir, t);
    if (r.scored.m && (!best || r.scored.m->nrmse < best->scored.m->nrmse)) best = std::move(r);
  }
  if (!best) throw Error(ErrorKind::Internal, "TKD could not be scored at any threshold");
  return std::move(*best);
}

struct DemoResults {
  PhantomOptions po;
  Phantom ph;
  double sim_seconds = 0.0;
  DemoNetwork net;
  NetworkRun run;
  Volume chi_net;
  Scored s_net;
  double net_seconds = 0.0;
  TkdResult tkd_usual, tkd_best;
};

NetworkRun run_demo_network(const DemoArgs& a, const DemoResults& d, ProgressBar& bar) {
  const NetworkInputs in = demo_network_inputs(d.ph, d.po);
  NetworkOptions opts;
  opts.model.backend = backend_from_string(a.backend);
  opts.model.threads = a.threads;
  apply_mem_budget(a.mem_budget, opts.model);
  opts.model.residency = parse_residency(a.residency);
  opts.park_inputs = true;  // the phantom's volumes, which nothing else reads during the run
  const std::string name(d.net.spec->name);
  if (bar.enabled())
    opts.progress = [&bar, name](double f, const std::string& stage) { bar.update(f, name + ": " + stage); };
  return run_network(*d.net.spec, {d.net.path}, in, opts);
}

void write_outputs(const DemoArgs& a, const DemoResults& d) {
  const fs::path dir(a.out);  // made by the staging when the first file is, removed if writing fails
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
  const bool trained = d.net.weights != Weights::Unverified;
  nlohmann::json files;
  files["chi_true"] = nii("chi_true", d.ph.chi, io::NiftiStore::F32, "ground-truth chi (ppm)");
  files["local_field"] = nii("local_field", d.ph.local_field, io::NiftiStore::F32, "local field (ppm)");
  files["mask"] = nii("mask", d.ph.mask, io::NiftiStore::U8, "brain mask");
  files["chi_network"] = nii("chi_network", d.chi_net, io::NiftiStore::F32, "chi by " + d.net.label + " (ppm)");
  files["chi_tkd"] = nii("chi_tkd", d.tkd_usual.chi, io::NiftiStore::F32, "chi by TKD (ppm)");
  // χ maps share one window (−0.1..0.2 ppm) so they can be compared by eye; an untrained
  // twin's output gets its own percentiles, since it may be far outside it.
  files["chi_true_png"] = png("chi_true", d.ph.chi, -0.1, 0.2);
  files["chi_tkd_png"] = png("chi_tkd", d.tkd_usual.chi, -0.1, 0.2);
  files["chi_network_png"] =
      trained ? png("chi_network", d.chi_net, -0.1, 0.2) : png("chi_network", d.chi_net, std::nullopt, std::nullopt);
  files["local_field_png"] = png("local_field", d.ph.local_field, std::nullopt, std::nullopt);

  nlohmann::json j;
  j["command"] = "qsm demo";
  j["phantom"] = {{"dims", d.po.dims},
                  {"voxel_mm", d.po.voxel_mm},
                  {"b0_tesla", d.po.b0_t},
                  {"b0_dir", d.po.b0_dir},
                  {"forward_model", "qsm-forward: chi*mask padded to 2N with the corner voxel, D(0) = 1/3"},
                  {"simulate_seconds", d.sim_seconds}};
  j["network"] = {{"id", d.net.spec->id},
                  {"name", d.net.spec->name},
                  {"model_path", d.net.path},
                  {"sha256", d.net.sha},
                  {"weights", d.net.weights == Weights::Shipped     ? "shipped"
                              : d.net.weights == Weights::Published ? "published"
                                                                    : "unverified"},
                  {"trained_weights", trained},
                  {"note", weights_note(d.net)},
                  {"seconds", d.net_seconds},
                  {"predicted_peak_bytes", d.run.predicted_peak_bytes},
                  {"measured_peak_bytes", d.run.measured_peak_bytes},
                  {"tiles", d.run.tiles},
                  {"tiles_in_flight", d.run.tiles_in_flight},
                  {"warnings", d.run.warnings},
                  {"metrics", metrics_json(d.s_net)}};
  j["network"]["stages"] = nlohmann::json::array();
  for (const StageTime& s : d.run.stages)
    j["network"]["stages"].push_back({{"stage", s.stage}, {"seconds", s.seconds}});
  j["tkd"] = {{"threshold", d.tkd_usual.threshold},
              {"seconds", d.tkd_usual.seconds},
              {"metrics", metrics_json(d.tkd_usual.scored)}};
  j["tkd_best"] = {{"threshold", d.tkd_best.threshold},
                   {"chosen", "lowest NRMSE against the ground truth over a sweep of thresholds"},
                   {"metrics", metrics_json(d.tkd_best.scored)}};
  j["metrics_definition"] = "QSM-CI (physics.md §5) against the ground-truth chi, ROI = brain mask; NRMSE in percent";
  j["process_peak_rss_bytes"] = process_peak_rss();
  j["files"] = files;
  const std::string summary_path = (dir / "demo.json").string();
  const std::string text = j.dump(2) + "\n";
  io::write_file_atomically(staged.stage(summary_path), std::as_bytes(std::span(text)));
  staged.commit();
}

void print_summary(const DemoArgs& a, const DemoResults& d) {
  std::printf("qsm demo: head phantom %s, B0 %.0f T along z; local field simulated as qsm-forward (%.1f s)\n",
              describe_grid(d.ph.chi).c_str(), d.po.b0_t, d.sim_seconds);
  std::printf("\n  %-28s %9s %8s %8s %9s\n", "reconstruction", "NRMSE %", "HFEN", "XSIM", "time s");
  const auto row = [](const std::string& name, const Scored& s, double t) {
    if (s.m)
      std::printf("  %-28s %9.1f %8.3f %8.3f %9.2f\n", name.c_str(), s.m->nrmse, s.m->hfen, s.m->xsim, t);
    else
      std::printf("  %-28s %9s %8s %8s %9.2f   (%s)\n", name.c_str(), "n/a", "n/a", "n/a", t, s.why.c_str());
  };
  char usual[64], best[64];
  std::snprintf(usual, sizeof usual, "TKD (t = %.2f)", d.tkd_usual.threshold);
  std::snprintf(best, sizeof best, "TKD (best t = %.3g)", d.tkd_best.threshold);
  row(d.net.label, d.s_net, d.net_seconds);
  row(usual, d.tkd_usual.scored, d.tkd_usual.seconds);
  row(best, d.tkd_best.scored, d.tkd_best.seconds);
  std::printf(
      "  metrics as QSM-CI computes them, against the ground-truth χ inside the brain mask;\n"
      "  TKD's best threshold is chosen with the ground truth, which a real scan does not have\n\n");
  std::printf("%s: %s.\n", d.net.label.c_str(), weights_note(d.net).c_str());
  if (d.net.weights == Weights::Unverified)
    std::printf(
        "  The SHA-256 of %s differs from the registry's. An architecture twin has random weights,\n"
        "  so its χ and metrics are not meaningful; the run proves the pipeline: NIfTI I/O,\n"
        "  padding, the ONNX engine and memory accounting.\n",
        d.net.path.c_str());
  std::printf("%s memory: predicted peak %s, measured %s (engine accounting); process peak RSS %s\n",
              d.net.label.c_str(), mib(d.run.predicted_peak_bytes).c_str(), mib(d.run.measured_peak_bytes).c_str(),
              mib(process_peak_rss()).c_str());
  for (const std::string& w : d.run.warnings) std::printf("%s warning: %s\n", d.net.label.c_str(), w.c_str());
  std::printf("wrote %s/: chi_true, local_field, mask, chi_network, chi_tkd (.nii.gz and .png), demo.json\n",
              a.out.c_str());
}

void demo(const DemoArgs& a) {
  DemoResults d;
  d.net = choose_network(a);  // a missing file should fail before seconds of simulation

  d.po = demo_phantom_options(a.size);  // shared with the web page (qsmcore/demo.h)
  ProgressBar bar(a.quiet);
  bar.update(0.0, "simulating the phantom");
  const auto t_sim = Clock::now();
  d.ph = make_head_phantom(d.po);
  d.sim_seconds = seconds_since(t_sim);

  const auto t_net = Clock::now();
  d.run = run_demo_network(a, d, bar);
  d.net_seconds = seconds_since(t_net);
  d.chi_net = std::move(chi_output(d.run, d.net.spec->id).volume);

  bar.update(1.0, "TKD");
  d.tkd_usual = run_tkd(d.ph, d.po.b0_dir, TkdOptions{}.threshold);
  d.tkd_best = best_tkd(d.ph, d.po.b0_dir);
  bar.update(1.0, "metrics");
  d.s_net = score(d.chi_net, d.ph.chi, d.ph.mask);
  bar.finish();
  write_outputs(a, d);
  print_summary(a, d);
}

}  // namespace

void register_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "demo", "Head phantom -> local field -> a dipole-inversion network (run_network) and TKD -> metrics, memory");
  cmd->footer(
      "By default the network is qsmcore-invnet, which qsmcore trains on synthetic heads and ships. --model takes "
      "another registry id (weights looked up like `qsm run ID` does; never downloaded) or an ONNX file; a file whose "
      "SHA-256 is not the registry's (e.g. the xQSM architecture twin with random weights: tools/twins/make --only "
      "xqsm) is run and "
      "labelled untrained: its metrics are then not meaningful.");
  auto args = std::make_shared<DemoArgs>();
  cmd->add_option("--out", args->out, "output folder (default qsm-demo, created if missing)");
  cmd->add_option("--size", args->size, "edge of the cubic phantom in 1 mm voxels (default 128)")
      ->check(CLI::Range(16, 512));
  cmd->add_option("--threads", args->threads, kThreadsHelp)->check(CLI::NonNegativeNumber);
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
