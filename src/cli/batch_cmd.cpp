// qsm batch plan|submit|status|resume|run|task: a cohort through one registry network, or each
// subject's raw scan through `qsm pipeline` (--pipeline), on a SLURM cluster (array jobs sized by
// the memory model) or on this machine (src/batch/).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "batch/fingerprint.h"
#include "batch/jobs.h"
#include "batch/local.h"
#include "batch/pipeline_plan.h"
#include "batch/plan.h"
#include "batch/scripts.h"
#include "batch/slurm.h"
#include "batch/status.h"
#include "batch/submit.h"
#include "cli/byte_size.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/pipeline_cmd.h"
#include "cli/staged_outputs.h"
#include "io/atomic_file.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"
#include "qsmcore/process_limits.h"
#include "qsmcore/residency.h"

namespace qsmcore::cli {
namespace {

namespace fs = std::filesystem;

struct PlanArgs {
  std::string manifest, model, out, tile, residency = "full", backend = "onednn", max_mem, partition, account;
  int threads = 2;
  double phase_sign = -1.0;
  double seconds_per_voxel = 0;
  std::int64_t max_array_size = 0;
  bool no_verify = false, no_flips = false, ignore_domain = false;
  bool pipeline = false;
  std::vector<std::string> pipeline_tokens;      // after `--`: `qsm pipeline`'s options
  std::vector<const CLI::Option*> network_only;  // the options that mean nothing to a pipeline
};

// This binary, for the tasks to exec (the same build that planned them).
std::string self_path() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorKind::Io, "cannot find the qsm binary (/proc/self/exe): " + ec.message());
  return p.string();
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
}

void check_batch_folder(const PlanArgs& a) {
  const std::string folder = fs::absolute(a.out).string();
  if (folder.find_first_of(" \t\n'\"") != std::string::npos)
    throw Error(ErrorKind::InvalidInput, "--out " + a.out + ": the batch folder's path (" + folder +
                                             ") may not hold blanks or quotes (sbatch's #SBATCH --output line "
                                             "cannot quote them)");
}

// What plan's options have in common for networks and pipelines.
batch::PlanOptions common_plan_options(const PlanArgs& a) {
  check_batch_folder(a);
  batch::PlanOptions o;
  o.manifest = a.manifest;
  o.out_dir = a.out;
  o.qsm = self_path();
  if (!a.max_mem.empty()) o.max_mem = parse_byte_size(a.max_mem, "--max-mem");
  if (a.seconds_per_voxel > 0) o.seconds_per_voxel = a.seconds_per_voxel;
  o.max_array_size = a.max_array_size;
  o.partition = a.partition;
  o.account = a.account;
  return o;
}

// The plan's options twice: parsed, for the prediction; as `qsm run` arguments, for the tasks.
batch::PlanOptions plan_options(const PlanArgs& a) {
  batch::PlanOptions o = common_plan_options(a);
  o.model_id = a.model;
  o.net.model.backend = backend_from_string(a.backend);
  o.net.model.threads = a.threads;
  o.net.model.residency = parse_residency(a.residency);
  if (!a.tile.empty()) o.net.tile = parse_tile(a.tile);
  o.net.test_time_flips = !a.no_flips;
  o.net.phase_sign = a.phase_sign;
  o.net.ignore_domain = a.ignore_domain;
  o.net.park_inputs = true;  // each job is a `qsm run`, which parks its inputs over the budget
  o.verify = !a.no_verify;
  o.run_args = {"--threads",    std::to_string(a.threads),    "--residency", a.residency, "--backend", a.backend,
                "--phase-sign", a.phase_sign < 0 ? "-1" : "1"};
  if (!a.tile.empty()) o.run_args.insert(o.run_args.end(), {"--tile", a.tile});
  if (a.no_verify) o.run_args.push_back("--no-verify");
  if (a.no_flips) o.run_args.push_back("--no-flips");
  if (a.ignore_domain) o.run_args.push_back("--ignore-domain");
  return o;
}

// `qsm batch plan --pipeline`: why a flag and not `--model pipeline`. --model names a registry
// network whose weights the plan resolves and whose options (--tile, --residency, --backend,
// --phase-sign, --no-flips, --ignore-domain) shape its runs; a pipeline has none of those, and
// may itself run a network (`--inversion xqsm`, `--mask-net hd-bet`), so "pipeline" as a model id
// would read as a network of that name. The pipeline's own options follow `--`, exactly as
// `qsm pipeline` takes them: its parser (register_pipeline_command) reads them, so the plan
// accepts what its tasks will and refuses the rest before anything is written.

// How the plan uses each of `qsm pipeline`'s options given after `--`.
enum class PipelineOptionUse {
  Task,         // every task gets it as given; the prediction and the calibration parse it
  ScanDefault,  // --te, --b0, --b0-dir: every subject whose row (or sidecars) does not give its own
  BidsFilter,   // --participant-label, --session: which runs of a BIDS cohort
  Refused,      // `why` says what to do instead
};

struct PipelineOptionRule {
  PipelineOptionUse use;
  bool flag = false;
  std::string column_or_why;
};

// A rule per option of `qsm pipeline`. One the planner does not know is refused (it may change
// what a run holds, which the plan must predict).
const std::map<std::string, PipelineOptionRule>& pipeline_option_rules() {
  using U = PipelineOptionUse;
  static const std::map<std::string, PipelineOptionRule> rules{
      {"--mask-net", {U::Task, false, ""}},
      {"--mask-method", {U::Task, false, ""}},
      {"--mask-erode", {U::Task, false, ""}},
      {"--field-in-mask-only", {U::Task, true, ""}},
      {"--no-consistency", {U::Task, true, ""}},
      {"--local-field", {U::Task, false, ""}},
      {"--unwrap", {U::Task, false, ""}},
      {"--no-offset-correction", {U::Task, true, ""}},
      {"--offset-sigma", {U::Task, false, ""}},
      {"--echo-weighting", {U::Task, false, ""}},
      {"--bfr", {U::Task, false, ""}},
      {"--bfr-radii", {U::Task, false, ""}},
      {"--inversion", {U::Task, false, ""}},
      {"--tkd-threshold", {U::Task, false, ""}},
      {"--lambda", {U::Task, false, ""}},
      {"--phase-scale", {U::Task, false, ""}},
      {"--reference", {U::Task, false, ""}},
      {"--no-verify", {U::Task, true, ""}},
      {"--no-r2star", {U::Task, true, ""}},
      {"--swi", {U::Task, true, ""}},
      {"--no-preview", {U::Task, true, ""}},
      {"--quiet", {U::Task, true, ""}},
      {"--te", {U::ScanDefault, false, "te"}},
      {"--b0", {U::ScanDefault, false, "b0"}},
      {"--b0-dir", {U::ScanDefault, false, "b0_dir"}},
      {"--participant-label", {U::BidsFilter, false, ""}},
      {"--session", {U::BidsFilter, false, ""}},
      {"--mag", {U::Refused, false, "each subject's magnitude is the manifest's magnitude column"}},
      {"--phase", {U::Refused, false, "each subject's phase is the manifest's phase column"}},
      {"--mask", {U::Refused, false, "each subject's mask is the manifest's mask column"}},
      {"--dicom", {U::Refused, false, "a cohort is a TSV of NIfTI files or a BIDS dataset (convert DICOM first)"}},
      {"--report", {U::Refused, false, "each subject's report is DIR/subjects/ID/report.json"}},
      {"--plan-fingerprint", {U::Refused, false, "each task passes its subject's own"}},
      {"--threads", {U::Refused, false, "give plan's own --threads (each task's --cpus-per-task too)"}},
      {"--mem-budget", {U::Refused, false, "each task's budget is its --mem less the reserve (--max-mem caps --mem)"}},
      {"BIDS_DIR", {U::Refused, false, "the cohort is plan's MANIFEST|BIDS_DIR, before --"}},
  };
  return rules;
}

struct GivenPipelineOption {
  std::string name;
  std::vector<std::string> values;
};

// The tokens parsed into `pa` by `qsm pipeline`'s own options (add_pipeline_options: nothing
// runs); the options given, in its order. --out is the plan's (each subject's folder).
std::vector<GivenPipelineOption> parse_pipeline_tokens(const std::vector<std::string>& tokens,
                                                       pipeline_cli::PipelineArgs& pa) {
  for (const auto& t : tokens)
    if (t == "--out" || t.rfind("--out=", 0) == 0)
      throw Error(ErrorKind::InvalidInput, "after --: --out is the plan's: each subject writes DIR/subjects/ID/");
  CLI::App app;
  CLI::App* cmd = app.add_subcommand("pipeline");
  pipeline_cli::add_pipeline_options(cmd, pa);
  std::vector<std::string> args{"pipeline"};
  args.insert(args.end(), tokens.begin(), tokens.end());
  args.insert(args.end(), {"--out", "planned"});
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    throw Error(ErrorKind::InvalidInput, "after --: `qsm pipeline --help` lists the pipeline's options");
  } catch (const CLI::ParseError& e) {
    throw Error(ErrorKind::InvalidInput, std::string("after --: as `qsm pipeline` options: ") + e.what());
  }
  std::vector<GivenPipelineOption> given;
  for (const CLI::Option* opt : cmd->get_options()) {
    if (opt->count() == 0 || opt->get_name() == "--out") continue;
    given.push_back({opt->get_name(), opt->results()});
  }
  return given;
}

// What the tokens say, sorted by use; every value checked by `qsm pipeline`'s own parse_setup.
batch::PlanOptions pipeline_plan_options(const PlanArgs& a) {
  for (const CLI::Option* opt : a.network_only)
    if (opt->count() > 0)
      throw Error(ErrorKind::InvalidInput, opt->get_name() +
                                               " is a network's option; with --pipeline give `qsm "
                                               "pipeline`'s options after --");
  batch::PlanOptions o = common_plan_options(a);
  o.pipeline = true;
  pipeline_cli::PipelineArgs pa;
  for (const GivenPipelineOption& g : parse_pipeline_tokens(a.pipeline_tokens, pa)) {
    const auto rule = pipeline_option_rules().find(g.name);
    if (rule == pipeline_option_rules().end())
      throw Error(ErrorKind::InvalidInput, "after --: " + g.name +
                                               " is an option of `qsm pipeline` that `qsm batch plan` does not know "
                                               "how to plan for (it may change what a run holds)");
    const PipelineOptionRule& r = rule->second;
    if (r.use == PipelineOptionUse::Refused)
      throw Error(ErrorKind::InvalidInput, "after --: " + g.name + " is not a plan-wide option: " + r.column_or_why);
    if (r.use == PipelineOptionUse::BidsFilter) {
      o.bids_filter.session = pa.session;
      o.bids_filter.participants = pa.participants;
      continue;
    }
    const std::string value = r.flag || g.values.empty() ? std::string() : g.values[0];
    if (r.use == PipelineOptionUse::ScanDefault) {
      o.scan_defaults[r.column_or_why] = value;
      continue;
    }
    o.run_args.push_back(g.name);
    // A region's file (--reference) is found from wherever a task starts.
    const bool file = g.name == "--reference" && value != "mask" && value != "none";
    if (!r.flag) o.run_args.push_back(file ? fs::absolute(value).string() : value);
  }
  o.run_args.insert(o.run_args.end(), {"--threads", std::to_string(a.threads)});
  pa.bids_dir.clear();  // the cohort's runs are the plan's: parse_setup checks one scan's options
  pa.participants.clear();
  pa.session.reset();
  pa.mag = pa.phase = pa.out = "planned";  // parse_setup opens no file
  pa.threads = a.threads;
  const pipeline_cli::Setup setup = pipeline_cli::parse_setup(pa);
  o.pipeline_opts = setup.opts;
  o.phase_scale = setup.overrides.phase_scale;
  return o;
}

// The fingerprint of the plan the folder holds now ("" when none, or one written before them).
std::string previous_fingerprint(const std::string& out) {
  if (!fs::exists(fs::path(out) / "batch.json")) return "";
  try {
    return batch::read_plan(out).fingerprint;
  } catch (const Error&) {  // not a plan: write_plan replaces it
    return "";
  }
}

void plan_cmd(const PlanArgs& a) {
  const batch::BatchPlan p = batch::make_plan(a.pipeline ? pipeline_plan_options(a) : plan_options(a));
  const std::string before = previous_fingerprint(p.out_dir);
  batch::write_plan(p);
  if (!before.empty() && before != p.fingerprint)
    say("note: " + p.out_dir +
        " held a plan with another fingerprint (another model, weights, options or inputs): the outputs made "
        "under it are not counted as done");
  int refused = 0;
  for (const auto& s : p.subjects)
    if (!s.error.empty()) {
      ++refused;
      std::fprintf(stderr, "qsm: %s: %s\n", s.id.c_str(), s.error.c_str());
    }
  say("planned " + std::to_string(p.subjects.size() - static_cast<std::size_t>(refused)) + " of " +
      std::to_string(p.subjects.size()) + " subject(s) of " + p.label() + " in " + std::to_string(p.buckets.size()) +
      " bucket(s); time per voxel from " +
      (p.time_source.empty() ? std::string("nothing (no subject)") : p.time_source));
  for (const auto& b : p.buckets)
    say("  " + b.name + ": " + std::to_string(b.subjects.size()) + " subject(s), --mem " + std::to_string(b.mem_mib) +
        "M, --time " + std::to_string(b.time_min) + " min, --cpus-per-task " + std::to_string(p.threads));
  say("wrote " + p.out_dir + "/batch.json and " + p.out_dir + "/sbatch/");
}

void submit_cmd(const std::string& dir) {
  const batch::BatchPlan p = batch::read_plan(dir);
  batch::Jobs jobs = batch::read_jobs(p.out_dir);
  for (const auto& line : batch::submit(p, jobs)) say(line);
}

std::vector<batch::SubjectStatus> current_status(const batch::BatchPlan& p, const batch::Jobs& jobs) {
  const batch::SchedulerAnswer answer = batch::query_tasks(jobs.job_ids());
  return batch::classify(p, jobs, answer.records, answer.silent);
}

void status_cmd(const std::string& dir) {
  const batch::BatchPlan p = batch::read_plan(dir);
  const batch::Jobs jobs = batch::read_jobs(p.out_dir);
  const auto st = current_status(p, jobs);
  batch::write_status(p, st);
  std::printf("%s", batch::status_text(st).c_str());
  // The table says "unknown" of them; the exit status says the answer is incomplete.
  const auto silent = std::count_if(st.begin(), st.end(), [](const auto& x) { return x.scheduler_silent; });
  if (silent > 0)
    throw Error(ErrorKind::Io, "the scheduler did not answer: " + std::to_string(silent) +
                                   " subject(s) unknown, which may still be queued or running; run `qsm batch "
                                   "status` again once squeue answers");
}

void resume_cmd(const std::string& dir, bool force) {
  const batch::BatchPlan p = batch::read_plan(dir);
  batch::Jobs jobs = batch::read_jobs(p.out_dir);
  const auto st = current_status(p, jobs);
  for (const auto& line : batch::resume(p, jobs, st, force)) say(line);
}

// SLURM_ARRAY_TASK_ID as an index: digits only (strtol would take "" or "x" for task 0).
std::size_t array_task_index(const char* text, std::size_t tasks, const std::string& group) {
  const std::string t = text;
  const bool digits = !t.empty() && t.size() < 10 && std::all_of(t.begin(), t.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
  const std::size_t k = digits ? static_cast<std::size_t>(std::stoul(t)) : tasks;
  if (k >= tasks)
    throw Error(ErrorKind::InvalidInput, "SLURM_ARRAY_TASK_ID '" + t + "' is not a task of " + group + " (" +
                                             std::to_string(tasks) + " tasks, 0 to " +
                                             std::to_string(tasks == 0 ? 0 : tasks - 1) + ")");
  return k;
}

// What tasks killed here left behind in the subjects' folders: a task killed after its outputs
// were all in place (the subject counts as done, so no run stages there again) may leave a
// temporary of this host's dead process; a run that starts in the folder removes its own kind.
void remove_stale_subject_temporaries(const batch::BatchPlan& p) {
  for (const batch::SubjectPlan& s : p.subjects) {
    std::vector<std::string> folders;
    for (const std::string& f : {s.out, s.report, s.preview})
      if (!f.empty()) folders.push_back(p.is_pipeline() && f == s.out ? f : fs::path(f).parent_path().string());
    std::sort(folders.begin(), folders.end());
    folders.erase(std::unique(folders.begin(), folders.end()), folders.end());
    for (const std::string& folder : folders)
      if (fs::is_directory(folder)) remove_stale_staging(folder);
    if (!s.fingerprint.empty()) io::remove_stale_temporaries(batch::fingerprint_path(s), ".tmp");
  }
}

void run_local_cmd(const std::string& dir, int jobs_at_once, const std::string& budget) {
  const batch::BatchPlan p = batch::read_plan(dir);
  remove_stale_subject_temporaries(p);
  batch::Jobs jobs = batch::read_jobs(p.out_dir);
  batch::LocalOptions o;
  o.jobs = jobs_at_once;
  ModelOptions mo;
  apply_mem_budget(budget, mo);
  if (mo.mem_budget == kAutoMemBudget) {
    const MemBudget b = process_mem_budget();
    mo.mem_budget = b.bytes;
    say("budget: " + format_bytes(b.bytes) + " (" + b.source + ")");
  }
  // The batch's budget is shared out whole among the jobs, each of which leaves its own share to
  // what its process holds outside the engine.
  o.budget_bytes = mo.mem_budget + mo.mem_budget_outside;
  o.say = say;
  const int failed = batch::run_local(p, jobs, o);
  const auto st = batch::classify(p, jobs, {});
  batch::write_status(p, st);
  std::printf("%s", batch::status_text(st).c_str());
  if (failed > 0) throw Error(ErrorKind::InvalidInput, std::to_string(failed) + " subject(s) failed; see above");
}

// One subject: `qsm run` (or `qsm pipeline`) with the plan's arguments, exec'd (this process
// becomes the run).
[[noreturn]] void task_cmd(const std::string& dir, const std::string& group, const std::string& subject,
                           const std::vector<std::string>& extra) {
  const batch::BatchPlan p = batch::read_plan(dir);
  std::string id = subject;
  if (id.empty()) {
    const char* index = std::getenv("SLURM_ARRAY_TASK_ID");
    if (group.empty() || index == nullptr)
      throw Error(ErrorKind::InvalidInput, "qsm batch task needs --group and SLURM_ARRAY_TASK_ID, or --subject");
    const auto tasks = batch::read_tasks(p, group);
    id = tasks[array_task_index(index, tasks.size(), group)];
  }
  const batch::SubjectPlan* s = p.find(id);
  if (s == nullptr) throw Error(ErrorKind::NotFound, "subject '" + id + "' is not in " + dir + "/batch.json");
  std::vector<std::string> args;
  if (p.is_pipeline()) {  // the subject's folder: `qsm pipeline` writes its maps and report.json there
    fs::create_directories(s->out);
    args = {p.qsm, "pipeline"};
    args.insert(args.end(), s->args.begin(), s->args.end());
    args.insert(args.end(), p.run_args.begin(), p.run_args.end());
    args.insert(args.end(), {"--out", s->out, "--report", s->report});
  } else {
    fs::create_directories(fs::path(s->out).parent_path());
    batch::stack_inputs(*s);  // BIDS echoes, one file each: stacked once, atomically
    args = {p.qsm, "run", p.model_id};
    args.insert(args.end(), s->args.begin(), s->args.end());
    args.insert(args.end(), p.run_args.begin(), p.run_args.end());
    args.insert(args.end(), {"--out", s->out, "--report", s->report, "--preview", s->preview});
    ::setenv(model_dir_env_var(p.model_id).c_str(), p.model_dir.c_str(), 1);
  }
  // Its report carries the subject's fingerprint: what status and resume compare (fingerprint.h).
  if (!s->fingerprint.empty()) args.insert(args.end(), {"--plan-fingerprint", s->fingerprint});
  args.insert(args.end(), extra.begin(), extra.end());
  // The run this task starts is this plan's: a report counts only if not older than the
  // fingerprint it is written under (one already there for this plan keeps its date, so a report
  // this plan's runs wrote before stays counted if this one is killed).
  if (!s->fingerprint.empty() && batch::read_fingerprint(*s) != s->fingerprint) batch::write_fingerprint(*s);
  io::remove_stale_temporaries(batch::fingerprint_path(*s), ".tmp");  // a task killed as it wrote it
  std::string shown;
  for (const auto& x : args) shown += " " + batch::shell_quote(x);
  std::fprintf(stderr, "qsm batch: subject %s:%s\n", id.c_str(), shown.c_str());
  std::fflush(stderr);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& x : args) argv.push_back(x.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  throw Error(ErrorKind::Io, "cannot run " + p.qsm + ": " + std::strerror(errno));
}

void add_plan(CLI::App& batch) {
  auto a = std::make_shared<PlanArgs>();
  auto* c =
      batch.add_subcommand("plan", "Predict each subject's memory and time; write DIR/batch.json and sbatch scripts");
  c->add_option("manifest", a->manifest,
                "TSV with a header: id, in, and as the network needs mask, magnitude, r2star, "
                "r2prime, qsm, te, b0, unit, b0_dir (paths relative to the TSV); with --pipeline: id, magnitude, "
                "phase (a 4-D file or comma-separated per-echo files each), mask, te, b0, b0_dir; or a BIDS "
                "dataset's folder")
      ->required();
  c->add_option("pipeline_options", a->pipeline_tokens,
                "with --pipeline, after --: `qsm pipeline`'s options for every subject (--inversion, --bfr, ...)");
  c->add_option("--model", a->model, "registry id (qsm models); or --pipeline");
  c->add_flag("--pipeline", a->pipeline,
              "each subject's raw scan through `qsm pipeline` (scan to chi) instead of a network; its options "
              "after --");
  c->add_option("--out", a->out, "batch folder: batch.json, sbatch/, logs/, subjects/ID/")->required();
  c->add_option("--threads", a->threads, "threads (and --cpus-per-task) per subject")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--max-mem", a->max_mem,
                "the largest --mem a task may ask for (e.g. a node's memory); larger subjects run "
                "fewer tiles at once or are refused with the reason");
  a->network_only = {
      c->add_option("--tile", a->tile, "CORE[,HALO] as `qsm run --tile`"),
      c->add_option("--residency", a->residency, "as `qsm run --residency`")->capture_default_str(),
      c->add_option("--backend", a->backend, "onednn | reference")->check(CLI::IsMember({"onednn", "reference"})),
      c->add_option("--phase-sign", a->phase_sign, "as `qsm run --phase-sign`")->check(CLI::IsMember({-1.0, 1.0})),
      c->add_flag("--no-flips", a->no_flips, "as `qsm run --no-flips`"),
      c->add_flag("--ignore-domain", a->ignore_domain, "as `qsm run --ignore-domain`"),
      c->add_flag("--no-verify", a->no_verify, "use local weight files without checking their SHA-256")};
  c->add_option("--seconds-per-voxel", a->seconds_per_voxel,
                "time per voxel (with --pipeline: per voxel and echo) for the time limits (default: measured by "
                "one run on the smallest subject)");
  c->add_option("--max-array-size", a->max_array_size, "array chunk size (default: the cluster's MaxArraySize - 1)");
  c->add_option("--partition", a->partition, "#SBATCH --partition");
  c->add_option("--account", a->account, "#SBATCH --account");
  c->footer(
      "Pipeline cohorts: qsm batch plan COHORT.tsv|BIDS_DIR --pipeline --out DIR [--threads N] [--max-mem B] -- "
      "[qsm pipeline's options: --inversion, --bfr, --unwrap, --mask-net, --te, --b0, --participant-label, ...]. "
      "Each task runs `qsm pipeline --mag ... --phase ... --out DIR/subjects/ID/` with those options.");
  c->callback([a] {
    if (a->pipeline == !a->model.empty())
      throw Error(ErrorKind::InvalidInput, "give --model ID (a network) or --pipeline (the scan-to-chi pipeline)");
    if (!a->pipeline && !a->pipeline_tokens.empty())
      throw Error(ErrorKind::InvalidInput, "unexpected argument(s) after the manifest (" + a->pipeline_tokens[0] +
                                               "): `qsm pipeline`'s options after -- go with --pipeline");
    plan_cmd(*a);
  });
}

}  // namespace

void register_batch_commands(CLI::App& app) {
  auto* batch = app.add_subcommand("batch", "Cohorts: SLURM array jobs sized by the memory model, or local runs");
  batch->require_subcommand(1);
  add_plan(*batch);

  auto dir = std::make_shared<std::string>();
  auto* submit = batch->add_subcommand("submit", "Submit the plan's array jobs and a summary job after them");
  submit->add_option("dir", *dir, "batch folder (qsm batch plan --out)")->required();
  submit->callback([dir] { submit_cmd(*dir); });

  auto* status = batch->add_subcommand(
      "status", "Each subject: done, failed (its error), oom, timeout, pending, running; writes DIR/status.tsv");
  status->add_option("dir", *dir, "batch folder")->required();
  status->callback([dir] { status_cmd(*dir); });

  auto* resume = batch->add_subcommand(
      "resume", "Resubmit what is not done: more memory after an OOM kill, more time after a timeout");
  resume->add_option("dir", *dir, "batch folder")->required();
  auto force = std::make_shared<bool>(false);
  resume->add_flag("--force", *force,
                   "also resubmit subjects whose tasks the scheduler did not answer about (squeue failed); one "
                   "still queued then runs twice");
  resume->callback([dir, force] { resume_cmd(*dir, *force); });

  struct LocalArgs {
    bool local = false;
    int jobs = 1;
    std::string budget;
  };
  auto la = std::make_shared<LocalArgs>();
  auto* run = batch->add_subcommand("run", "Run the plan on this machine: subjects at once while their requests fit");
  run->add_option("dir", *dir, "batch folder")->required();
  run->add_flag("--local", la->local, "run here (the only mode: a cluster runs `submit`)")->required();
  run->add_option("-j,--jobs", la->jobs, "subjects at once at most")->capture_default_str()->check(CLI::PositiveNumber);
  run->add_option("--mem-budget", la->budget, kMemBudgetHelp);
  run->callback([dir, la] { run_local_cmd(*dir, la->jobs, la->budget); });

  struct TaskArgs {
    std::string group, subject, mem_budget;
  };
  auto ta = std::make_shared<TaskArgs>();
  auto* task = batch->add_subcommand("task", "Run one subject of a plan (what each array task execs)");
  task->add_option("dir", *dir, "batch folder")->required();
  task->add_option("--group", ta->group, "script name under DIR/sbatch (the subject is SLURM_ARRAY_TASK_ID's line)");
  task->add_option("--subject", ta->subject, "the subject by id instead");
  task->add_option("--mem-budget", ta->mem_budget,
                   "passed to qsm run (default: what the task may use, e.g. SLURM_MEM_PER_NODE less the reserve)");
  task->callback([dir, ta] {
    std::vector<std::string> extra;
    if (!ta->mem_budget.empty()) extra = {"--mem-budget", ta->mem_budget};
    task_cmd(*dir, ta->group, ta->subject, extra);
  });
}

}  // namespace qsmcore::cli
