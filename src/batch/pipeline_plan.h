// `qsm batch plan --pipeline`: a cohort of raw multi-echo scans, each subject one `qsm pipeline`
// run (scan to χ) instead of one network's. The scans come from a TSV (columns id, magnitude,
// phase, mask, te, b0, b0_dir: manifest.h) or a raw BIDS dataset (every run find_bids_runs finds,
// its id the run's name). Each scan is planned from its headers and sidecars alone: its grid and
// echo count, then the peak `qsm pipeline` will predict for it before it reads a voxel (the scan's
// echoes as f64, a given mask, and predict_field_pipeline's peak above them: what
// refuse_before_reading in src/cli/pipeline_cmd.cpp counts), turned into --mem by the networks'
// ladder (mem_request_mib). The time limit comes from a per-voxel-and-echo time: given, or
// measured by running the pipeline once here on the smallest scan. A scan whose files are broken
// is that subject's error, naming the file; the others are planned.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "batch/plan.h"
#include "qsmcore/scan.h"

namespace qsmcore::batch {

/// One scan of a pipeline cohort: a manifest row or a BIDS run, with the plan-wide te, b0 and
/// b0_dir filled in where it gives none.
struct PipelineScan {
  std::string id;
  std::string source;                // for messages: "cohort.tsv line 3" or the BIDS run's folder
  ScanFiles files;                   // magnitude and phase: one 4-D file each, or one file per echo
  std::string mask, te, b0, b0_dir;  // as `qsm pipeline` takes them (--mask, --te s,s,…, --b0 T, --b0-dir x,y,z)
  std::string error;                 // why it cannot run as given (naming the file); "" = complete
};

/// The scans of o.manifest: a TSV (read_pipeline_manifest) or, for a folder, a raw BIDS dataset
/// (find_bids_runs with o.bids_filter). Error when the manifest as a whole is unusable.
std::vector<PipelineScan> pipeline_scans(const PlanOptions& o);

/// A scan's grid from its headers, and its echo count.
struct ScanShape {
  Dims3 dims{};
  Vec3 voxel_mm{};
  std::int64_t echoes = 0;
};

/// The checks that need no voxel: every file's header readable, the echoes of magnitude and
/// phase on one grid and as many of each, a mask on that grid, an echo time for every echo (the
/// te given, else the sidecars' EchoTime) and a field strength (b0, else a sidecar's
/// MagneticFieldStrength). Error{InvalidInput} (Error{Io} for a missing file) naming the file.
/// read_scan checks the rest (affines, values, units) when the task runs.
ScanShape check_scan_headers(const PipelineScan& s);

/// The bytes one `qsm pipeline` run of `shape` holds at its peak under `opts`, as the command
/// predicts it before reading a voxel: the scan's echoes as f64 (magnitude and phase), a given
/// mask and a region χ is referenced to (`input`), and predict_field_pipeline's peak above them
/// (`peak`).
struct PipelineNeed {
  std::int64_t input = 0, peak = 0;
  std::string peak_stage;
};
PipelineNeed pipeline_need(const ScanShape& shape, const FieldPipelineOptions& opts, bool mask_given);

/// The subjects of a pipeline plan (p.kind "pipeline"), each predicted or refused with its
/// reason, and the time per voxel-echo; make_plan buckets them.
void plan_pipeline_subjects(const PlanOptions& o, BatchPlan& p);

}  // namespace qsmcore::batch
