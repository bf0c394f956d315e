// `qsm batch plan`: a cohort sized by the memory model before anything runs. Each subject's
// headers are read (not its voxels), its run's peak is predicted by the engine itself (the
// network's own files loaded and planned for that grid under the run's options, nothing run:
// NetworkOptions::predict_only), and turned into what a scheduler must be asked for: --mem such
// that the task's own default budget (SLURM_MEM_PER_NODE less the stated reserve) admits the
// predicted run, and a time limit from the per-voxel time measured on this machine. Subjects
// with the same request share a bucket: one array job per bucket (batch/slurm.h). A pipeline
// cohort (`--pipeline`: each subject a `qsm pipeline` run from its raw scan) is planned the same
// way from predict_field_pipeline's peak (batch/pipeline_plan.h).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "batch/bids_runs.h"
#include "qsmcore/networks.h"
#include "qsmcore/pipeline.h"

namespace qsmcore::batch {

struct PlanOptions {
  std::string model_id;
  std::string manifest;               // the TSV read
  std::string out_dir;                // DIR: batch.json, sbatch/, logs/, subjects/
  std::string qsm;                    // absolute path of the qsm binary the tasks exec
  NetworkOptions net;                 // the options each run gets, parsed (threads, backend, residency, tile, ...)
  std::vector<std::string> run_args;  // the same options as `qsm run` arguments, passed to every task
  bool verify = true;                 // resolve the weights with their SHA-256 checked
  std::int64_t max_mem = 0;           // the largest --mem a task may request (bytes); 0 = no cap
  std::optional<double> seconds_per_voxel;  // skips the calibration run
  std::int64_t max_array_size = 0;          // 0 = the cluster's MaxArraySize (scontrol), else 1001
  std::string partition, account;           // optional #SBATCH lines
  // A pipeline cohort (pipeline_plan.h): each subject `qsm pipeline` with run_args; model_id
  // and net unused.
  bool pipeline = false;
  FieldPipelineOptions pipeline_opts;                // as `qsm pipeline` parses run_args: what is predicted and timed
  std::optional<double> phase_scale;                 // --phase-scale given to every subject
  std::map<std::string, std::string> scan_defaults;  // te, b0, b0_dir for every subject whose row gives none
  BidsRunFilter bids_filter;                         // a BIDS cohort: the runs taken
};

// One subject. For a pipeline plan: args are `qsm pipeline`'s --mag, --phase, --mask, --te, --b0,
// --b0-dir; frames the echoes; input_bytes the scan's echoes as f64 and a given mask;
// predicted_bytes predict_field_pipeline's peak; out the subject's folder (report.json in it).
struct SubjectPlan {
  std::string id;
  std::vector<std::string> args;  // this subject's input options of `qsm run` (--in, --mask, --te, ...)
  std::array<std::int64_t, 3> dims{0, 0, 0};
  std::int64_t frames = 1;
  std::array<double, 3> voxel_mm{0, 0, 0};
  std::int64_t input_bytes = 0;      // the inputs as the run holds them (f64 voxels × frames)
  std::int64_t predicted_bytes = 0;  // the engine's predicted peak above the inputs
  std::int64_t tiles = 1, tiles_in_flight = 1;
  std::int64_t mem_mib = 0;  // what the task asks the scheduler for
  std::int64_t time_min = 0;
  std::string bucket;  // "" while not runnable
  std::string error;   // why it cannot run (its input, its size); "" = planned
  std::string out, report, preview, log_local;
  /// What makes an output this plan's (batch/fingerprint.h): the plan's fingerprint with this
  /// subject's arguments and its input files' paths, sizes and mtimes. "" in plans written
  /// before fingerprints (their outputs count as they did).
  std::string fingerprint;
  /// BIDS echoes given one file each: the task stacks `files` into `path` (one frame per echo)
  /// before it runs, when `path` does not exist yet.
  struct Stack {
    std::string path;
    std::vector<std::string> files;
  };
  std::vector<Stack> stacks;
};

struct Bucket {
  std::string name;  // "b0", "b1", ...: sbatch/NAME-cK.sbatch, one per array chunk
  std::int64_t mem_mib = 0, time_min = 0;
  std::vector<std::string> subjects;
};

struct BatchPlan {
  std::string kind = "network";  // "network": tasks exec `qsm run MODEL`; "pipeline": `qsm pipeline`
  std::string model_id, manifest, out_dir, qsm;
  std::vector<std::string> model_files;  // resolved once, at plan time
  std::string model_dir;                 // the tasks' QSM_MODEL_DIR_<ID>
  std::vector<std::string> run_args;
  int threads = 1;
  double seconds_per_voxel = 0, load_seconds = 0;
  std::string time_source;  // "calibration on AxBxC", "--seconds-per-voxel"
  // The calibration run (none with --seconds-per-voxel): the budget it ran under, the task's own
  // (its subject's --mem less the reserve), so that it takes the task's path, tiles and spilling
  // included; the accounted peak it measured (within that budget), and the tiles it ran as (a
  // pipeline's: 0).
  std::int64_t calibration_budget_bytes = 0;
  std::int64_t calibration_peak_bytes = 0;
  std::int64_t calibration_tiles = 0;
  std::int64_t max_array_size = 1001;
  std::string partition, account;
  std::vector<SubjectPlan> subjects;
  std::vector<Bucket> buckets;
  /// The model id (or "pipeline"), the weights' SHA-256 and the run arguments, hashed
  /// (batch/fingerprint.h); "" in plans written before fingerprints.
  std::string fingerprint;

  const SubjectPlan* find(const std::string& id) const;
  bool is_pipeline() const { return kind == "pipeline"; }
  /// What the tasks run, for job names and messages: the model's id, or "pipeline".
  std::string label() const { return is_pipeline() ? std::string("pipeline") : model_id; }
};

/// --mem (MiB) whose default budget (the limit less qsmcore's reserve, process_limits.h) admits
/// a run that holds `bytes`, rounded up to the bucket ladder: steps of 1/16 of the power of two
/// below (at least 16 MiB), so a request is at most 6 % (or 16 MiB) above what it must be.
std::int64_t mem_request_mib(std::int64_t bytes);
/// The default budget a task with a memory limit of `limit_bytes` gets (the limit less qsmcore's
/// reserve, process_limits.h); at least 1 byte, so a tiny limit refuses every run, as there.
std::int64_t task_budget_bytes(std::int64_t limit_bytes);
/// `mib` rounded up to that ladder.
std::int64_t ladder_mib(std::int64_t mib);

/// Time limit (minutes) of a run of `voxels` (the network's whole input) from the per-voxel time
/// and the load time measured: 3 × the estimate + 2 min, at least 5 min.
std::int64_t time_request_min(double seconds_per_voxel, double load_seconds, std::int64_t voxels);

/// Reads the manifest and headers, predicts, buckets; writes nothing.
BatchPlan make_plan(const PlanOptions& o);

/// Groups the runnable subjects by request (one bucket per --mem and --time).
void assign_buckets(BatchPlan& p);

/// Writes each stack of `s` that is not there yet (what a task does before `qsm run`).
void stack_inputs(const SubjectPlan& s);

/// DIR/batch.json (atomically) and one sbatch script + task list per bucket chunk.
void write_plan(const BatchPlan& p);
BatchPlan read_plan(const std::string& out_dir);

}  // namespace qsmcore::batch
