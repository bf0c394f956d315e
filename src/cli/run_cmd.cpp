// qsm run ID --in F.nii.gz …: one registry network on the user's volumes (networks.h). Every
// check that can fail on the user's input runs before the network does, and before anything
// is written: options, required inputs (network_needs), each file (readable, complete, 3-D,
// finite: read_nifti), one grid for all inputs, TE/B0 where the units need them. The weights
// are then resolved like `qsm fetch` does (QSM_MODEL_DIR_<ID>, QSM_MODEL_DIR, the caches, a
// download), the network runs with its progress on stderr (a bar on a terminal, plain lines in
// a log), and the outputs, the preview and the report are written as one set (staged
// temporaries renamed at the end, missing folders made).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/staged_outputs.h"
#include "io/atomic_file.h"
#include "io/input_check.h"
#include "io/nifti.h"
#include "io/png_preview.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/physics.h"
#include "qsmcore/residency.h"
#include "spill/spill.h"

namespace qsmcore::cli {
namespace {

namespace fs = std::filesystem;

// Every option of `qsm run`, as typed. One field per option, so adding one is one line here
// and one add_option below.
struct RunArgs {
  std::string id;
  std::string in, mask, magnitude, r2star, r2prime, qsm;
  std::string te, unit, b0_dir;
  std::optional<double> b0;
  std::string out, preview, report;
  std::string plan_fingerprint;  // `qsm batch task`'s subject fingerprint, recorded in the report
  std::string tile, mem_budget, backend = "onednn";
  std::string precision = "f32";
  std::string residency = "full";
  std::string spill_dir;
  int threads = 0;
  double phase_sign = -1.0;
  bool no_verify = false, quiet = false, no_flips = false, ignore_domain = false, no_spill = false;
};

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorKind::InvalidInput, message);
}

// One input volume: the option that named it and what was read.
struct Input {
  const char* role;    // "field", "magnitude", ...
  const char* option;  // "--in", "--mask", ...
  std::string path;
  Volume volume;
};

// Same file? (Compares resolved paths; an output may not overwrite an input.)
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  const fs::path pa = fs::weakly_canonical(a, ec1), pb = fs::weakly_canonical(b, ec2);
  return !ec1 && !ec2 && pa == pb;
}

// What the options say, before any file is read: the network's options and inputs (units,
// TE, B0 and its direction), and the echo times as given.
struct RunSetup {
  NetworkOptions opts;
  NetworkInputs in;
  std::vector<double> tes;
};

// An input option of `qsm run`: which role it fills, and whether the network needs it.
struct Slot {
  const char* role;
  const char* option;
  std::string what;
  bool needed;
  const std::string* path;
};

void check_output_names(const RunArgs& a) {
  if (!(a.out.ends_with(".nii.gz") || a.out.ends_with(".nii")))
    invalid("--out " + a.out + ": the output name must end in .nii.gz or .nii");
  require_parent_folder(a.out, "--out");
  if (!a.preview.empty()) {
    if (!a.preview.ends_with(".png")) invalid("--preview " + a.preview + ": the preview name must end in .png");
    require_parent_folder(a.preview, "--preview");
  }
  if (!a.report.empty()) require_parent_folder(a.report, "--report");
}

std::vector<double> parse_echo_times(const std::string& te) {
  if (te.empty()) return {};
  std::vector<double> tes = parse_number_list(te, "--te");
  for (double t : tes)
    if (!(t > 0.0)) invalid("--te " + te + ": echo times are in seconds and must be positive");
  for (double t : tes)
    if (t > 1.0) invalid("--te " + te + ": echo times are in seconds (" + std::to_string(t) + " s is not one)");
  return tes;
}

RunSetup parse_setup(const RunArgs& a, const ModelSpec& spec, bool phase_net) {
  RunSetup r;
  r.opts.model.backend = backend_from_string(a.backend);
  r.opts.model.precision = precision_from_string(a.precision);
  r.opts.model.threads = a.threads;
  apply_mem_budget(a.mem_budget, r.opts.model);
  r.opts.model.spill_dir = a.spill_dir;
  r.opts.model.spill_activations = !a.no_spill;
  r.opts.park_inputs = true;                           // qsm run reads its inputs only before and after the graphs run
  r.opts.model = with_process_defaults(r.opts.model);  // the report records what the run used
  r.opts.model.residency = parse_residency(a.residency);
  if (!a.tile.empty()) r.opts.tile = parse_tile(a.tile);
  r.opts.test_time_flips = !a.no_flips;
  r.opts.phase_sign = a.phase_sign;
  r.opts.ignore_domain = a.ignore_domain;
  if (!a.unit.empty())
    r.in.field_unit = parse_field_unit(a.unit);
  else if (phase_net)
    r.in.field_unit = FieldUnit::Rad;
  if (phase_net && r.in.field_unit != FieldUnit::Rad)
    invalid(std::string(spec.id) + " takes wrapped phase in radians; --unit " + a.unit + " does not apply");
  r.tes = parse_echo_times(a.te);
  if (a.b0 && !(*a.b0 > 0.0)) invalid("--b0 must be a positive field strength in tesla");
  if (!a.b0_dir.empty()) r.in.b0_dir = parse_b0_dir(a.b0_dir);
  r.in.b0_tesla = a.b0;
  if (r.tes.size() == 1) r.in.te_s = r.tes[0];
  return r;
}

// --in is the network's primary input: its field (or phase), else its magnitude, else its R2*.
std::string primary_role(const ModelSpec& spec, const NetworkNeeds& needs) {
  const char* primary = needs.field       ? "field"
                        : needs.magnitude ? "magnitude"
                        : needs.r2star    ? "r2star"
                        : needs.qsm       ? "qsm"
                                          : nullptr;
  if (primary == nullptr) invalid(std::string(spec.id) + ": the network declares no volume input");
  return primary;
}

std::string field_what(const NetworkNeeds& needs) {
  return needs.field_kind.empty() ? std::string("field") : needs.field_kind;
}

std::vector<Slot> input_slots(const RunArgs& a, const NetworkNeeds& needs) {
  return {
      {"field", "--in", field_what(needs), needs.field, &a.in},
      {"magnitude", "--magnitude", "magnitude", needs.magnitude, &a.magnitude},
      {"r2star", "--r2star", "R2* map in Hz", needs.r2star, &a.r2star},
      {"qsm", "--qsm", "χ map in ppm", needs.qsm, &a.qsm},
      {"r2prime", "--r2prime", "R2' map in Hz", needs.r2prime, &a.r2prime},
      {"mask", "--mask", "brain mask", needs.mask, &a.mask},
  };
}

// Every input the network needs is named (and its primary input once, with --in), and a field
// in Hz or rad comes with what converts it to ppm.
void check_required_inputs(const RunArgs& a, const ModelSpec& spec, const NetworkNeeds& needs,
                           const std::vector<Slot>& slots, const std::string& primary, const RunSetup& r,
                           bool phase_net) {
  std::vector<std::string> missing;
  for (const Slot& s : slots) {
    const bool is_primary = s.role == primary;
    if (s.path == &a.in && !is_primary) continue;  // --in always names the primary input
    if (is_primary && s.path != &a.in && !s.path->empty())
      invalid(std::string(s.option) + " and --in both name the " + s.what + " of " + std::string(spec.id) +
              " (its primary input); give it once, with --in");
    const std::string& given = is_primary ? a.in : *s.path;
    if (s.needed && given.empty())
      missing.push_back(std::string(is_primary ? "--in" : s.option) + " (the " + s.what + ")");
  }
  if (needs.te && r.tes.empty()) missing.push_back("--te (echo time in s)");
  if (needs.b0 && !a.b0) missing.push_back("--b0 (field strength in T)");
  if (!missing.empty()) {
    std::string m = std::string(spec.id) + " (" + std::string(spec.name) + ", " +
                    (needs.field_kind.empty() ? std::string(to_string(spec.stage)) : "input: " + needs.field_kind) +
                    ") needs ";
    for (std::size_t i = 0; i < missing.size(); ++i) m += (i ? ", " : "") + missing[i];
    invalid(m);
  }
  if (needs.field && !phase_net) {
    try {
      (void)field_to_ppm_factor(r.in.field_unit, r.in.b0_tesla, r.in.te_s);
    } catch (const Error& e) {
      invalid("--unit " + a.unit + ": " + e.what() + "; give " +
              (r.in.field_unit == FieldUnit::Rad ? "--b0 and --te" : "--b0"));
    }
  }
}

// Inputs a network does not require may still be used (iQSM weights echoes by magnitude when
// given), so every given one is read, checked (on the primary input's grid) and passed on.
std::vector<Input> read_inputs(const RunArgs& a, const std::vector<Slot>& slots, const std::string& primary,
                               const std::string& primary_what, bool phase_net) {
  std::vector<Input> inputs;
  inputs.reserve(slots.size());
  io::NiftiReadOptions ro;
  ro.allow_frames = phase_net || primary == "magnitude";
  for (const Slot& s : slots)
    if (s.role == primary) inputs.push_back({s.role, "--in", a.in, io::read_nifti(a.in, ro)});
  const Volume& ref = inputs[0].volume;
  for (const Slot& s : slots) {
    if (s.role == primary || s.path == &a.in || s.path->empty()) continue;
    if (std::string(s.role) == "mask") {
      inputs.push_back({s.role, s.option, *s.path, io::read_mask_on_grid(*s.path, ref, primary_what, a.in)});
    } else {
      io::NiftiReadOptions o;
      o.allow_frames = std::string(s.role) == "magnitude";
      inputs.push_back({s.role, s.option, *s.path, io::read_on_grid(*s.path, s.what, ref, primary_what, a.in, o)});
    }
  }
  return inputs;
}

// Echo times against the phase's echoes; the volumes into the network's inputs; no output may
// overwrite an input.
void bind_inputs(const RunArgs& a, const ModelSpec& spec, const std::vector<Input>& inputs, const std::string& what,
                 bool phase_net, RunSetup& r) {
  const std::int64_t echoes = inputs[0].volume.frames();
  if (phase_net) {
    if (echoes > 1 && static_cast<std::int64_t>(r.tes.size()) != echoes)
      invalid(a.in + ": the phase has " + std::to_string(echoes) + " echoes but --te gives " +
              std::to_string(r.tes.size()) + " echo time(s); give one per echo, comma-separated");
    if (echoes == 1 && r.tes.size() > 1)
      invalid("--te " + a.te + ": " + std::to_string(r.tes.size()) + " echo times for a single-echo phase " + a.in);
    if (echoes > 1) r.in.echo_times_s = r.tes;
  } else if (r.tes.size() > 1) {
    invalid("--te " + a.te + ": several echo times are only for multi-echo phase (" + std::string(spec.id) +
            " takes a " + what + ")");
  }
  for (const Input& i : inputs) {
    const std::string role = i.role;
    if (role == "field") r.in.field = &i.volume;
    if (role == "magnitude") r.in.magnitude = &i.volume;
    if (role == "r2star") r.in.r2star = &i.volume;
    if (role == "r2prime") r.in.r2prime = &i.volume;
    if (role == "qsm") r.in.qsm = &i.volume;
    if (role == "mask") r.in.mask = &i.volume;
  }
  for (const Input& i : inputs) {
    for (const std::string* o : {&a.out, &a.preview, &a.report})
      if (!o->empty() && same_file(*o, i.path))
        invalid(*o + ": this output would overwrite the input " + i.path + " (" + i.option + ")");
  }
}

nlohmann::json model_json(const ModelSpec& spec, const std::vector<ResolvedWeight>& weights) {
  nlohmann::json model;
  model["id"] = std::string(spec.id);
  model["name"] = std::string(spec.name);
  model["stage"] = to_string(spec.stage);
  model["files"] = nlohmann::json::array();
  for (const ResolvedWeight& w : weights) {
    std::string registry_sha;
    for (const WeightFile& f : spec.files)
      if (f.name == w.file) registry_sha = std::string(f.sha256);
    const std::string sha = w.sha256.empty() ? weight_file_sha256(w.path) : w.sha256;
    model["files"].push_back({{"name", w.file},
                              {"path", w.path.string()},
                              {"source", to_string(w.source)},
                              {"sha256", sha},
                              {"verified", w.verified},
                              {"matches_registry", !registry_sha.empty() && sha == registry_sha}});
  }
  return model;
}

nlohmann::json options_json(const RunArgs& a, const RunSetup& r, const Volume& primary, bool verify) {
  nlohmann::json o;
  o["te_s"] = r.tes;
  o["b0_tesla"] = a.b0 ? nlohmann::json(*a.b0) : nlohmann::json(nullptr);
  if (r.in.b0_dir) {
    o["b0_dir"] = *r.in.b0_dir;
    o["b0_dir_from"] = "--b0-dir";
  } else {
    try {
      o["b0_dir"] = b0_dir_from_affine(primary.affine());
      o["b0_dir_from"] = "affine";
    } catch (const Error&) {
      o["b0_dir"] = nullptr;
    }
  }
  const NetworkOptions& opts = r.opts;
  o["field_unit"] = to_string(r.in.field_unit);
  o["tile"] =
      opts.tile ? nlohmann::json{{"core", opts.tile->core}, {"halo", opts.tile->halo}} : nlohmann::json(nullptr);
  o["mem_budget_bytes"] = opts.model.mem_budget + opts.model.mem_budget_outside;
  o["mem_budget_engine_bytes"] = opts.model.mem_budget;
  o["mem_budget_source"] = opts.model.mem_budget_source;
  o["threads"] = opts.model.threads;
  o["backend"] = to_string(opts.model.backend);
  o["precision"] = to_string(opts.model.precision);
  o["residency"] = to_string(opts.model.residency);
  o["test_time_flips"] = opts.test_time_flips;
  o["phase_sign"] = opts.phase_sign;
  o["ignore_domain"] = opts.ignore_domain;
  o["verify_weights"] = verify;
  return o;
}

// Everything the report says about one finished run.
struct RunRecord {
  const RunArgs& a;
  const ModelSpec& spec;
  const std::vector<ResolvedWeight>& weights;
  const std::vector<Input>& inputs;
  const RunSetup& setup;
  bool verify;
  const NetworkRun& result;
  double run_seconds, total_seconds;
  const std::vector<std::string>& warnings;
  const nlohmann::json& outputs;
};

std::string report_text(const RunRecord& r) {
  nlohmann::json j;
  j["command"] = "qsm run";
  // A batch plan's run (batch/fingerprint.h): status counts the report as that plan's only when
  // it carries the plan's fingerprint for the subject.
  if (!r.a.plan_fingerprint.empty()) j["plan_fingerprint"] = r.a.plan_fingerprint;
  j["model"] = model_json(r.spec, r.weights);
  nlohmann::json ins;
  for (const Input& i : r.inputs) {
    nlohmann::json v = volume_json(i.path, i.volume);
    if (std::string(i.role) == "field") v["unit"] = to_string(r.setup.in.field_unit);
    ins[i.role] = std::move(v);
  }
  j["inputs"] = std::move(ins);
  j["options"] = options_json(r.a, r.setup, r.inputs[0].volume, r.verify);
  j["memory"] = {{"predicted_peak_bytes", r.result.predicted_peak_bytes},
                 {"measured_peak_bytes", r.result.measured_peak_bytes},
                 {"process_peak_rss_bytes", process_peak_rss()}};
  j["stages"] = nlohmann::json::array();
  for (const StageTime& s : r.result.stages) j["stages"].push_back({{"stage", s.stage}, {"seconds", s.seconds}});
  j["run_seconds"] = r.run_seconds;
  j["total_seconds"] = r.total_seconds;
  j["tiles"] = r.result.tiles;
  j["tiles_in_flight"] = r.result.tiles_in_flight;
  j["threads_per_run"] = r.result.threads_per_run;
  j["warnings"] = r.warnings;
  j["residency"] = nlohmann::json::array();
  for (const auto& rep : r.result.residency_reports) j["residency"].push_back(nlohmann::json::parse(rep));
  j["spill"] = spill_json(static_cast<std::uint64_t>(r.result.spill_file_bytes),
                          static_cast<std::uint64_t>(r.result.spill_written_bytes),
                          static_cast<std::uint64_t>(r.result.spill_read_bytes), r.result.spill_seconds,
                          r.result.spill_written_bytes + r.result.spill_read_bytes > 0
                              ? residency::SpillFile::resolve_dir(r.setup.opts.model.spill_dir)
                              : std::string());
  j["spill"]["chain_window_share"] = r.result.chain_window_share;
  j["spill"]["direct_bytes"] = r.result.spill_direct_bytes;
  j["spill"]["parked_bytes"] = r.result.parked_bytes;
  j["spill"]["parked_between_bytes"] = r.result.parked_between_bytes;
  j["outputs"] = r.outputs;
  j["preview"] = r.a.preview.empty() ? nlohmann::json(nullptr) : nlohmann::json(fs::absolute(r.a.preview).string());
  return j.dump(2) + "\n";
}

// The outputs (one file per output of a several-output network) and the preview, staged;
// returns what the report lists of them.
nlohmann::json stage_outputs(const RunArgs& a, const ModelSpec& spec, const NetworkRun& result,
                             const std::vector<Input>& inputs, StagedOutputs& staged) {
  const bool several = result.outputs.size() > 1;
  nlohmann::json outputs_json = nlohmann::json::array();
  for (const NetworkOutput& o : result.outputs) {
    const std::string path = several ? with_suffix(a.out, o.name) : a.out;
    for (const Input& i : inputs)
      if (same_file(path, i.path)) invalid(path + ": this output would overwrite the input " + i.path);
    io::NiftiWriteOptions w;
    w.store = store_for(o);
    w.description = "qsm run " + std::string(spec.id) + ": " + o.name + " (" + o.unit + ")";
    io::write_nifti(staged.stage(path), o.volume, w);
    nlohmann::json oj = volume_json(path, o.volume);
    oj["name"] = o.name;
    oj["unit"] = o.unit;
    outputs_json.push_back(std::move(oj));
  }
  if (!a.preview.empty()) io::write_png_preview(staged.stage(a.preview), result.outputs[0].volume);
  return outputs_json;
}

void run(const RunArgs& a) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  const ModelSpec& spec = require_model(a.id);
  const NetworkNeeds needs = network_needs(spec);
  const bool phase_net = needs.field_kind == "wrapped phase";

  // Options, then which inputs the network needs and whether they were given: no file read yet.
  check_output_names(a);
  RunSetup setup = parse_setup(a, spec, phase_net);
  const std::string primary = primary_role(spec, needs);
  const std::vector<Slot> slots = input_slots(a, needs);
  check_required_inputs(a, spec, needs, slots, primary, setup, phase_net);

  // Every input read and checked, then the weights resolved.
  const std::string what = field_what(needs);
  const std::string primary_what = primary == "field" ? what : primary;
  const std::vector<Input> inputs = read_inputs(a, slots, primary, primary_what, phase_net);
  bind_inputs(a, spec, inputs, what, phase_net, setup);
  FetchOptions fetch;
  fetch.verify = !a.no_verify;
  fetch.download.progress = a.quiet ? DownloadOptions::Progress::Never : DownloadOptions::Progress::Auto;
  const std::vector<ResolvedWeight> weights = resolve_weights(spec, fetch);
  std::vector<std::string> model_paths;
  for (const ResolvedWeight& w : weights) model_paths.push_back(w.path.string());

  // The run, with its progress on stderr.
  ProgressBar bar(a.quiet);
  if (bar.enabled()) setup.opts.progress = [&bar](double f, const std::string& stage) { bar.update(f, stage); };
  const auto t_run = Clock::now();
  NetworkRun result = run_network(spec, model_paths, setup.in, setup.opts);
  const double run_seconds = std::chrono::duration<double>(Clock::now() - t_run).count();
  bar.finish();
  if (result.outputs.empty())
    throw Error(ErrorKind::Internal, std::string(spec.id) + ": the network returned no output");
  std::vector<std::string> warnings;
  for (const std::string& w : result.warnings) {
    std::fprintf(stderr, "qsm: warning: %s\n", w.c_str());
    warnings.push_back(w);
  }

  // Outputs, preview, report: staged, then renamed together.
  StagedOutputs staged;
  const nlohmann::json outputs_json = stage_outputs(a, spec, result, inputs, staged);
  if (!a.report.empty()) {
    const RunRecord record{a,        spec,        weights,
                           inputs,   setup,       fetch.verify,
                           result,   run_seconds, std::chrono::duration<double>(Clock::now() - t_start).count(),
                           warnings, outputs_json};
    const std::string text = report_text(record);
    io::write_file_atomically(staged.stage(a.report), std::as_bytes(std::span(text)));
  }
  staged.commit();

  if (!a.quiet) {
    for (const std::string& p : staged.final_paths()) std::printf("wrote %s\n", p.c_str());
    std::printf("%s on %s: %.2f s, %lld tile(s) (%lld in flight); memory predicted %s, measured %s\n",
                std::string(spec.id).c_str(), describe_grid(inputs[0].volume).c_str(), run_seconds,
                static_cast<long long>(result.tiles), static_cast<long long>(result.tiles_in_flight),
                mib(result.predicted_peak_bytes).c_str(), mib(result.measured_peak_bytes).c_str());
    if (result.spill_written_bytes + result.spill_read_bytes > 0)
      std::printf(
          "whole volume within the budget: activations spilled to disk, %s written and %s read back "
          "(kernels waited %.2f s for it)\n",
          mib(result.spill_written_bytes).c_str(), mib(result.spill_read_bytes).c_str(), result.spill_seconds);
    if (result.parked_bytes > 0)
      std::printf("inputs and wrapper buffers waited on disk while the graphs ran: %s written and read back\n",
                  mib(result.parked_bytes).c_str());
    if (result.parked_between_bytes > 0)
      std::printf("  of which %s between the graph runs too, back only for the steps that read them\n",
                  mib(result.parked_between_bytes).c_str());
  }
}

}  // namespace

void register_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a registry network on NIfTI volumes");
  cmd->footer(
      "--in is the network's primary input: the local or total field, or the wrapped phase (iQSM, iQFM, iQSM+: "
      "rad, one frame per echo with one --te per echo), or the magnitude (HD-BET, SynthSeg, RS2-Net), or R2* "
      "(R2PRIMEnet). `qsm models show ID` lists what each network takes.\n"
      "Outputs: a network with one output writes it to --out; one with several (e.g. χ-separation: chi_pos, "
      "chi_neg, chi_total) writes each to --out with _NAME before the extension (out_chi_pos.nii.gz, ...) and "
      "--out itself is not written. --preview shows the first output.\n"
      "Every input is checked before the network runs; on any error nothing is written. Outputs, preview and "
      "report are written to temporaries and renamed into place together.");
  auto args = std::make_shared<RunArgs>();
  cmd->add_option("id", args->id, "registry id (qsm models)")->required();
  cmd->add_option("--in", args->in, "primary input volume (.nii or .nii.gz), see below")->required();
  cmd->add_option("--mask", args->mask, "brain mask on the input's grid (above 0.5 = brain)");
  cmd->add_option("--magnitude", args->magnitude, "magnitude on the input's grid (frames = echoes)");
  cmd->add_option("--r2star", args->r2star, "R2* map in Hz on the input's grid");
  cmd->add_option("--r2prime", args->r2prime, "R2' map in Hz on the input's grid (SUSEP-Net, χ-sepnet)");
  cmd->add_option("--qsm", args->qsm, "χ map in ppm on the input's grid (χ-separation networks)");
  cmd->add_option("--te", args->te, "echo time(s) in s, comma-separated for multi-echo phase");
  cmd->add_option("--b0", args->b0, "field strength in T");
  cmd->add_option("--b0-dir", args->b0_dir, "B0 direction in voxel axes x,y,z (default: from the affine)");
  cmd->add_option("--unit", args->unit,
                  "unit of a field input: ppm (default), ppb, hz (needs --b0), rad (needs --b0 and --te); phase "
                  "networks take rad");
  cmd->add_option("--out", args->out, "output .nii.gz (or .nii); several outputs get _NAME suffixes")->required();
  cmd->add_option("--tile", args->tile,
                  "CORE[,HALO]: tile core N or XxYxZ voxels and halo (default: the network's); 0 = whole volume");
  cmd->add_option("--mem-budget", args->mem_budget, kMemBudgetHelp);
  cmd->add_option("--spill-dir", args->spill_dir, kSpillDirHelp);
  cmd->add_flag("--no-spill", args->no_spill, kNoSpillHelp);
  cmd->add_option("--threads", args->threads, kThreadsHelp)->check(CLI::NonNegativeNumber);
  cmd->add_option("--precision", args->precision, kPrecisionHelp)->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_option("--residency", args->residency,
                  "where weights live: full | layerwise[:depth=N,host=BYTES] | "
                  "stream[:device=BYTES,host=BYTES,lookahead=N,queue=N,evict=lru|lfu] (tiles then run "
                  "layer-major in batches)")
      ->capture_default_str();
  cmd->add_option("--backend", args->backend, "onednn | reference")->check(CLI::IsMember({"onednn", "reference"}));
  cmd->add_option("--phase-sign", args->phase_sign, "iQSM/iQFM/iQSM+: multiply the phase by this first (default -1)")
      ->check(CLI::IsMember({-1.0, 1.0}));
  cmd->add_flag("--no-flips", args->no_flips, "no test-time flip averaging where the recipe uses it");
  cmd->add_flag("--ignore-domain", args->ignore_domain, "warn instead of refusing inputs outside the trained domain");
  cmd->add_option("--preview", args->preview, "PNG of three orthogonal slices of the (first) output");
  cmd->add_option("--report", args->report, "JSON report: inputs, model files and SHA-256, options, memory, times");
  cmd->add_option("--plan-fingerprint", args->plan_fingerprint,
                  "recorded in the report as plan_fingerprint (`qsm batch` passes each subject's)");
  cmd->add_flag("--no-verify", args->no_verify, "use local weight files without checking their SHA-256");
  cmd->add_flag("--quiet", args->quiet, "no progress bar and no summary");
  cmd->callback([args] { run(*args); });
}

}  // namespace qsmcore::cli
