// qsm pipeline's pieces shared by its two modes: one scan named by its files, written to a folder
// (pipeline_cmd.cpp), and every run of a BIDS dataset, written as BIDS derivatives
// (pipeline_bids.cpp). Both read a scan, predict and refuse it on its own, run the stages and
// describe them with the same report; both write every volume the run produced.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/nifti.h"
#include "qsmcore/pipeline.h"
#include "qsmcore/scan.h"
#include "qsmcore/volume.h"

namespace qsmcore::cli::pipeline_cli {

struct PipelineArgs {
  std::string bids_dir;                   // the positional BIDS_DIR (BIDS mode), else ""
  std::vector<std::string> participants;  // --participant-label (BIDS mode)
  std::optional<std::string> session;     // --session (BIDS mode)
  std::string mag, phase, dicom, mask, mask_net, mask_method = "quality";
  std::string out, report;
  std::string plan_fingerprint;  // `qsm batch task`'s subject fingerprint, recorded in the report
  std::string inversion = "tv";
  std::string unwrap = "romeo", bfr, bfr_radii, weighting = "snr";
  std::string te, b0_dir;
  std::optional<double> b0, phase_scale, tkd_threshold, offset_sigma, lambda;
  std::string reference = "mask";  // --reference: mask | none | a region's file
  std::string local_field;         // --local-field: chi | removal ("" = chi after TV-ADMM)
  bool no_offset = false, no_preview = false, quiet = false, no_r2star = false, swi = false, no_verify = false,
       no_consistency = false, field_in_mask_only = false;
  std::string mem_budget;
  int threads = 0;
  std::string precision = "f32";  // of the network inversions' convolutions
  std::optional<int> mask_erode;
};

/// Everything the options say, checked before a file is opened; `files` is the scan in file mode
/// (BIDS mode fills it per run).
struct Setup {
  ScanFiles files;
  ScanOverrides overrides;
  FieldPipelineOptions opts;
};
Setup parse_setup(const PipelineArgs& a);

/// Every option of `qsm pipeline`, parsed into `a`: the command's own parser, and `qsm batch plan
/// --pipeline`'s for the options after its `--`, so both accept exactly the same.
void add_pipeline_options(CLI::App* cmd, PipelineArgs& a);

/// What the command's run of one scan held at its peak: the scan read, then the stages on top of
/// what was held when they started (held_before_stages: the scan and a given mask, which the
/// stages' own figures are counted above).
struct CommandMemory {
  std::int64_t predicted = 0, measured = 0;
  std::int64_t held_before_stages = 0;
};

/// One scan read and run through the stages.
struct ScanRun {
  FieldPipelineResult result;
  nlohmann::json scan;  // what the report says of the scan (files, echo times, field, phase units)
  std::vector<std::string> notes;
  CommandMemory memory;
};

/// Refuses the scan `s.files` from its headers when it cannot fit the budget (nothing read),
/// then reads it (and --mask) and runs the stages. `notes` come first in the result's notes
/// (dcm2niix's); the scan's notes are printed unless --quiet. Nothing is written.
ScanRun run_scan(const PipelineArgs& a, Setup s, std::vector<std::string> notes);

/// A volume of the result that is written, in the order the files are written.
struct Product {
  std::string file_stem;    // file mode: OUT/<file_stem>.nii.gz
  std::string bids_suffix;  // BIDS mode: <run>_<bids_suffix>.nii.gz
  const Volume* volume = nullptr;
  io::NiftiStore store = io::NiftiStore::F32;
  std::string what;  // "chi (ppm)"
  std::string unit;  // "ppm", "Hz", "label"
  bool preview = false;
};
/// Every non-empty volume of `r` (a phase network leaves no fields; R2* only when asked for).
std::vector<Product> products(const FieldPipelineResult& r);

/// The report's "options" and "stages".
nlohmann::json options_json(const PipelineArgs& a, const Setup& s);
nlohmann::json stages_json(const FieldPipelineResult& r);

/// The report of one scan's run: the scan, the options, each stage's seconds and memory, the
/// top-level predicted_peak_bytes / measured_peak_bytes / process_peak_rss_bytes, the notes and
/// the outputs.
nlohmann::json report_json(const PipelineArgs& a, const Setup& s, const ScanRun& run, double seconds,
                           const nlohmann::json& outputs);

/// BIDS mode (pipeline_bids.cpp): every run of a.bids_dir the filters choose, each predicted,
/// refused, run and written on its own; a summary; Error naming the failed runs when any failed.
void run_bids_pipeline(const PipelineArgs& a);

}  // namespace qsmcore::cli::pipeline_cli
