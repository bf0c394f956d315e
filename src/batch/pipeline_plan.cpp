// Planning a cohort of scans for `qsm pipeline` (pipeline_plan.h).
#include "batch/pipeline_plan.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "batch/bids_runs.h"
#include "batch/manifest.h"
#include "io/input_check.h"
#include "io/nifti.h"
#include "memory/byte_size.h"
#include "qsmcore/error.h"
#include "qsmcore/physics.h"
#include "qsmcore/pipeline.h"

namespace qsmcore::batch {
// A named namespace, not an anonymous one: the library may be compiled as unity batches, where
// plan.cpp's helpers of similar names would meet these.
namespace pipeline_plan_detail {

namespace fs = std::filesystem;
using memory::kMiB;

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  for (std::size_t a = 0; a <= text.size();) {
    const std::size_t b = std::min(text.find(',', a), text.size());
    parts.push_back(text.substr(a, b - a));
    a = b + 1;
  }
  return parts;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& p : parts) text += (text.empty() ? "" : ",") + p;
  return text;
}

std::string grid_text(const Dims3& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

std::string mib_text(std::int64_t bytes) {
  return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB";
}

// A plan-wide te, b0 or b0_dir where the scan gives none of its own.
void fill_defaults(PipelineScan& s, const std::map<std::string, std::string>& defaults) {
  for (const auto& [column, value] : defaults) {
    std::string& cell = column == "te" ? s.te : column == "b0" ? s.b0 : s.b0_dir;
    if (cell.empty()) cell = value;
  }
}

std::vector<PipelineScan> scans_from_manifest(const std::string& path) {
  std::vector<PipelineScan> scans;
  for (const ManifestRow& row : read_pipeline_manifest(path)) {
    auto value = [&](const char* c) { return row.values.count(c) ? row.values.at(c) : std::string(); };
    PipelineScan s;
    s.id = row.id;
    s.source = path + " line " + std::to_string(row.line);
    if (!value("magnitude").empty()) s.files.magnitude = split_commas(value("magnitude"));
    if (!value("phase").empty()) s.files.phase = split_commas(value("phase"));
    s.mask = value("mask");
    s.te = value("te");
    s.b0 = value("b0");
    s.b0_dir = value("b0_dir");
    s.error = row.error.empty() ? "" : path + ": " + row.error;
    for (const auto& f : s.files.magnitude)
      if (f.empty() && s.error.empty()) s.error = s.source + ": an empty file name in the magnitude's list";
    for (const auto& f : s.files.phase)
      if (f.empty() && s.error.empty()) s.error = s.source + ": an empty file name in the phase's list";
    scans.push_back(std::move(s));
  }
  return scans;
}

std::vector<PipelineScan> scans_from_bids(const std::string& given, const BidsRunFilter& filter) {
  const std::string dir = fs::absolute(given).lexically_normal().string();
  std::vector<PipelineScan> scans;
  for (const BidsRun& run : find_bids_runs(dir, filter)) {
    PipelineScan s;
    s.id = run.name;
    s.source = (fs::path(dir) / run.anat_dir).string();
    s.files = run.files;
    s.error = run.error.empty() ? "" : dir + ": " + run.error;
    scans.push_back(std::move(s));
  }
  return scans;
}

// The headers of one side (magnitude or phase): all on the first file's grid; its echo count.
std::int64_t series_echoes(const std::vector<std::string>& files, const char* what, io::NiftiHeader& first) {
  io::NiftiReadOptions frames_ok;
  frames_ok.allow_frames = true;
  std::int64_t echoes = 0;
  for (std::size_t k = 0; k < files.size(); ++k) {
    const io::NiftiHeader h = io::read_nifti_header(files[k], frames_ok);
    if (k == 0) first = h;
    if (h.dims != first.dims)
      throw Error(ErrorKind::InvalidInput, files[k] + ": the " + what + "'s grid " + grid_text(h.dims) +
                                               " is not that of its first echo " + files[0] + " (" +
                                               grid_text(first.dims) + ")");
    echoes += h.frames;
  }
  return echoes;
}

// The echo times the files' sidecars give, counted per side: a file counts when its sidecar's
// EchoTime has one value per frame (what read_scan takes).
std::int64_t sidecar_echo_times(const std::vector<std::string>& files, std::string& first_without) {
  io::NiftiReadOptions frames_ok;
  frames_ok.allow_frames = true;
  std::int64_t n = 0;
  for (const auto& f : files) {
    const std::optional<Sidecar> car = read_sidecar_beside(f);
    const auto frames = static_cast<std::size_t>(io::read_nifti_header(f, frames_ok).frames);
    if (car && car->echo_time_s.size() == frames)
      n += static_cast<std::int64_t>(frames);
    else if (first_without.empty())
      first_without =
          car ? car->path + " has no EchoTime for each of its echoes" : "there is no sidecar " + sidecar_path_for(f);
  }
  return n;
}

bool sidecar_gives_b0(const ScanFiles& files) {
  for (const auto* side : {&files.phase, &files.magnitude})
    for (const auto& f : *side) {
      const std::optional<Sidecar> car = read_sidecar_beside(f);
      if (car && car->field_strength_t) return true;
    }
  return false;
}

void check_echo_times(const PipelineScan& s, std::int64_t echoes) {
  if (!s.te.empty()) {
    const std::size_t n = split_commas(s.te).size();
    if (static_cast<std::int64_t>(n) != echoes)
      throw Error(ErrorKind::InvalidInput, s.source + ": te gives " + std::to_string(n) + " echo time(s) for " +
                                               std::to_string(echoes) + " echoes (" + s.files.phase[0] + ")");
    return;
  }
  std::string why_phase, why_mag;
  if (sidecar_echo_times(s.files.phase, why_phase) < echoes && sidecar_echo_times(s.files.magnitude, why_mag) < echoes)
    throw Error(ErrorKind::InvalidInput, s.files.phase[0] + ": no echo time for every echo: " + why_phase +
                                             (why_mag.empty() ? "" : ", and " + why_mag) +
                                             "; give a te column (seconds, comma-separated) or --te");
}

// The plan's time per voxel-echo from one run of the pipeline here, on `s`.
double time_one_run(const PipelineScan& s, const PlanOptions& o, std::int64_t budget) {
  ScanOverrides ov;
  if (!s.te.empty()) ov.te_s = cell_numbers(s.te, "te", s.source);
  if (!s.b0.empty()) ov.b0_t = cell_number(s.b0, "b0", s.source);
  if (!s.b0_dir.empty()) ov.b0_dir = parse_b0_dir(s.b0_dir);
  ov.phase_scale = o.phase_scale;
  FieldPipelineOptions opts = o.pipeline_opts;
  opts.progress = nullptr;
  opts.engine.mem_budget = budget;
  opts.engine.mem_budget_source = "the task's budget (the calibration run on " + s.id + ")";
  // A region to reference χ to is read by `qsm pipeline` with the scan; its mean costs no time
  // worth timing here.
  if (opts.inversion.reference == Reference::Region && opts.inversion.reference_region == nullptr)
    opts.inversion.reference = Reference::MaskMean;
  const auto t0 = std::chrono::steady_clock::now();
  Scan scan = read_scan(s.files, ov);
  Volume mask;
  if (!s.mask.empty()) {
    mask = io::read_mask_on_grid(s.mask, scan.phase, "phase", s.files.phase[0]);
    opts.mask_source = MaskSource::Given;
    opts.mask = &mask;
  }
  run_field_pipeline(std::move(scan), opts);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs the pipeline on the smallest planned scan (by voxels × echoes); a scan whose contents
// read_scan refuses is that subject's error, and the next smallest is tried.
void calibrate_pipeline(BatchPlan& p, const PlanOptions& o, const std::vector<PipelineScan>& scans) {
  if (o.seconds_per_voxel) {
    p.seconds_per_voxel = *o.seconds_per_voxel;
    p.time_source = "--seconds-per-voxel (per voxel and echo)";
    return;
  }
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < p.subjects.size(); ++k)
    if (p.subjects[k].error.empty()) order.push_back(k);
  auto work = [&](std::size_t k) {
    const SubjectPlan& s = p.subjects[k];
    return s.dims[0] * s.dims[1] * s.dims[2] * s.frames;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return work(a) < work(b); });
  for (std::size_t k : order) {
    SubjectPlan& s = p.subjects[k];
    double seconds = 0;
    try {
      // Under the budget the task will run with (issue #51): its --mem less the reserve, not what
      // this login node has free.
      p.calibration_budget_bytes = task_budget_bytes(s.mem_mib * kMiB);
      seconds = time_one_run(scans[k], o, p.calibration_budget_bytes);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::OutOfBudget)
        throw Error(ErrorKind::OutOfBudget, "the time per voxel cannot be measured here on " + s.id + ": " + e.what() +
                                                "; give --seconds-per-voxel");
      s.error = e.what();  // its contents: this subject cannot run, the next one is timed
      continue;
    }
    p.seconds_per_voxel = seconds / static_cast<double>(work(k));
    p.time_source = "calibration run of the pipeline on " + s.id + " (" + grid_text(s.dims) + " x " +
                    std::to_string(s.frames) + " echoes) under a budget of " +
                    std::to_string(p.calibration_budget_bytes) + " bytes, " + std::to_string(seconds) + " s";
    return;
  }
}

// One scan planned: its headers checked, its run predicted, its request.
void plan_scan(const PipelineScan& scan, const PlanOptions& o, SubjectPlan& s) {
  if (!scan.error.empty()) throw Error(ErrorKind::InvalidInput, scan.error);
  FieldPipelineOptions opts = o.pipeline_opts;
  if (!scan.mask.empty() && opts.mask_source == MaskSource::Network)
    throw Error(ErrorKind::InvalidInput,
                scan.source + ": a mask is given, and --mask-net too; give one (the mask column or --mask-net)");
  opts.engine.mem_budget = o.max_mem > 0 ? task_budget_bytes(o.max_mem) : 0;
  const ScanShape shape = check_scan_headers(scan);
  s.dims = shape.dims;
  s.frames = shape.echoes;
  s.voxel_mm = shape.voxel_mm;
  const PipelineNeed need = pipeline_need(shape, opts, !scan.mask.empty());
  s.input_bytes = need.input;
  s.predicted_bytes = need.peak;
  s.mem_mib = mem_request_mib(need.input + need.peak);
  if (o.max_mem > 0 && s.mem_mib * kMiB > o.max_mem)
    throw Error(ErrorKind::OutOfBudget, "the pipeline needs --mem " + std::to_string(s.mem_mib) + "M (the scan's " +
                                            std::to_string(shape.echoes) + " echoes " + mib_text(need.input) +
                                            ", then " + mib_text(need.peak) + " at its peak in " + need.peak_stage +
                                            "), more than --max-mem " + mib_text(o.max_mem));
}

std::vector<std::string> task_args(const PipelineScan& scan) {
  std::vector<std::string> a{"--mag", joined(scan.files.magnitude), "--phase", joined(scan.files.phase)};
  if (!scan.mask.empty()) a.insert(a.end(), {"--mask", scan.mask});
  if (!scan.te.empty()) a.insert(a.end(), {"--te", scan.te});
  if (!scan.b0.empty()) a.insert(a.end(), {"--b0", scan.b0});
  if (!scan.b0_dir.empty()) a.insert(a.end(), {"--b0-dir", scan.b0_dir});
  return a;
}

}  // namespace pipeline_plan_detail

std::vector<PipelineScan> pipeline_scans(const PlanOptions& o) {
  using namespace pipeline_plan_detail;
  const bool bids = fs::is_directory(o.manifest);
  if (!bids && (!o.bids_filter.participants.empty() || o.bids_filter.session))
    throw Error(ErrorKind::InvalidInput, o.manifest +
                                             ": --participant-label and --session choose runs of a BIDS dataset, "
                                             "and this is a TSV manifest");
  std::vector<PipelineScan> scans = bids ? scans_from_bids(o.manifest, o.bids_filter) : scans_from_manifest(o.manifest);
  for (PipelineScan& s : scans) fill_defaults(s, o.scan_defaults);
  return scans;
}

ScanShape check_scan_headers(const PipelineScan& s) {
  using namespace pipeline_plan_detail;
  if (s.files.magnitude.empty() || s.files.phase.empty())
    throw Error(ErrorKind::InvalidInput, s.source + ": " + (s.files.phase.empty() ? "no phase" : "no magnitude"));
  io::NiftiHeader phase, mag;
  const std::int64_t echoes = series_echoes(s.files.phase, "phase", phase);
  const std::int64_t mag_echoes = series_echoes(s.files.magnitude, "magnitude", mag);
  if (mag.dims != phase.dims)
    throw Error(ErrorKind::InvalidInput, s.files.magnitude[0] + ": the magnitude's grid " + grid_text(mag.dims) +
                                             " is not the phase's " + grid_text(phase.dims) + " (" + s.files.phase[0] +
                                             ")");
  if (mag_echoes != echoes)
    throw Error(ErrorKind::InvalidInput, s.files.magnitude[0] + ": the magnitude has " + std::to_string(mag_echoes) +
                                             " echo(es) but the phase " + std::to_string(echoes) + " (" +
                                             s.files.phase[0] + ")");
  if (!s.mask.empty()) {
    const io::NiftiHeader m = io::read_nifti_header(s.mask);
    if (m.dims != phase.dims)
      throw Error(ErrorKind::InvalidInput, s.mask + ": the mask's grid " + grid_text(m.dims) + " is not the phase's " +
                                               grid_text(phase.dims) + " (" + s.files.phase[0] + ")");
  }
  check_echo_times(s, echoes);
  if (s.b0.empty() && !sidecar_gives_b0(s.files))
    throw Error(ErrorKind::InvalidInput, s.files.phase[0] +
                                             ": no field strength: no sidecar gives MagneticFieldStrength; give a "
                                             "b0 column (tesla) or --b0");
  return {phase.dims, phase.geometry.voxel_mm, echoes};
}

PipelineNeed pipeline_need(const ScanShape& shape, const FieldPipelineOptions& opts, bool mask_given) {
  FieldPipelineOptions o = opts;
  if (mask_given) o.mask_source = MaskSource::Given;  // its size unknown here: every voxel, as the task's first check
  const std::int64_t n = shape.dims[0] * shape.dims[1] * shape.dims[2];
  const auto f64 = static_cast<std::int64_t>(sizeof(double));
  const PipelinePrediction p = predict_field_pipeline(shape.dims, shape.voxel_mm, shape.echoes, o, true);
  // A region χ is referenced to is read with the scan and held as f64 too.
  const bool region = o.invert && o.inversion.reference == Reference::Region;
  return {2 * n * shape.echoes * f64 + (mask_given ? n * f64 : 0) + (region ? n * f64 : 0), p.peak_bytes, p.peak_stage};
}

void plan_pipeline_subjects(const PlanOptions& o, BatchPlan& p) {
  using namespace pipeline_plan_detail;
  p.kind = "pipeline";
  const std::vector<PipelineScan> scans = pipeline_scans(o);
  for (const PipelineScan& scan : scans) {
    SubjectPlan s;
    s.id = scan.id;
    const fs::path folder = fs::path(p.out_dir) / "subjects" / s.id;
    s.out = folder.string();
    s.report = (folder / "report.json").string();
    s.preview = (folder / (o.pipeline_opts.invert ? "chi.png" : "local_field.png")).string();
    s.log_local = (fs::path(p.out_dir) / "logs" / ("local_" + s.id + ".log")).string();
    s.args = task_args(scan);
    try {
      plan_scan(scan, o, s);
    } catch (const std::exception& e) {  // a subject's error (its files, its size); the others go on
      s.error = e.what();
    }
    p.subjects.push_back(std::move(s));
  }
  calibrate_pipeline(p, o, scans);
  for (SubjectPlan& s : p.subjects)
    if (s.error.empty())
      s.time_min = time_request_min(p.seconds_per_voxel, 0.0, s.dims[0] * s.dims[1] * s.dims[2] * s.frames);
}

}  // namespace qsmcore::batch
