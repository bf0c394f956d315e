// qsmcore.stages.field_pipeline: qsmcore/pipeline.h's run_field_pipeline on arrays — the scan made
// from them (make_scan's checks), then mask → field map → background removal (→ TKD), each stage
// timed and its memory predicted and measured. As `qsm pipeline` does, a run whose prediction
// does not fit the budget is refused before the arrays are even copied into the engine, and the
// top-level memory figures count the scan's copy as the command's count the scan it read.
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>

#include "convert.h"
#include "qsmcore/error.h"
#include "qsmcore/inversion.h"
#include "qsmcore/memory.h"
#include "qsmcore/pipeline.h"
#include "qsmcore/scan.h"
#include "stage_args.h"
#include "stages_bind.h"

namespace qsmpy::stages {
namespace {

using qsmcore::Error;
using qsmcore::ErrorKind;
using qsmcore::Volume;

void mask_choice(const py::dict& kw, qsmcore::FieldPipelineOptions& o) {
  const std::string m = arg<std::string>(kw, "mask_method");
  if (!kw["mask"].is_none()) {
    o.mask_source = qsmcore::MaskSource::Given;
  } else if (m == "hd-bet") {
    o.mask_source = qsmcore::MaskSource::Network;
    o.mask_net_files = arg<std::vector<std::string>>(kw, "mask_net_files");
  } else if (m == "quality") {
    o.masking.method = qsmcore::MaskMethod::PhaseQuality;
  } else if (m == "magnitude") {
    o.masking.method = qsmcore::MaskMethod::Magnitude;
  } else {
    throw Error(ErrorKind::InvalidInput, "mask_method '" + m + "': expected 'quality', 'magnitude' or 'hd-bet'");
  }
}

qsmcore::FieldPipelineOptions pipeline_options(const py::dict& kw) {
  qsmcore::FieldPipelineOptions o;
  mask_choice(kw, o);
  o.field_beyond_mask = arg<bool>(kw, "field_beyond_mask");
  o.fieldmap.unwrap = qsmcore::parse_unwrap_method(arg<std::string>(kw, "unwrap"));
  o.fieldmap.remove_phase_offset = arg<bool>(kw, "offset_correction");
  o.fieldmap.weighting = qsmcore::parse_echo_weighting(arg<std::string>(kw, "weighting"), "weighting");
  if (auto bfr = optional_arg<std::string>(kw, "bfr")) o.bfr.method = qsmcore::parse_bfr_method(*bfr);
  o.bfr.radii_mm = arg<std::vector<double>>(kw, "bfr_radii");
  const std::string inv = arg<std::string>(kw, "inversion");
  if (inv != "none") {
    o.invert = true;
    o.inversion.threshold = arg<double>(kw, "tkd_threshold");
    const std::vector<std::string> nets = qsmcore::network_inversion_ids();
    if (std::find(nets.begin(), nets.end(), inv) != nets.end()) {
      o.inversion_network = inv;
      o.inversion_network_files = arg<std::vector<std::string>>(kw, "inversion_files");
      o.network_consistency = arg<bool>(kw, "consistency");
    } else {
      o.inversion.method = qsmcore::parse_inversion_method(inv);
    }
  }
  if (auto lf = optional_arg<std::string>(kw, "local_field")) {
    if (*lf != "chi" && *lf != "removal")
      throw Error(ErrorKind::InvalidInput, "local_field '" + *lf + "': expected 'chi' or 'removal'");
    if (*lf == "chi" && inv != "tv")
      throw Error(ErrorKind::InvalidInput,
                  "local_field 'chi' is the field of TV-ADMM's χ: it needs inversion='tv', not '" + inv + "'");
    o.local_field_from_chi = *lf == "chi";
  }
  o.r2star = arg<bool>(kw, "r2star");
  o.engine.threads = arg<int>(kw, "threads");
  if (o.engine.threads < 0) throw Error(ErrorKind::InvalidInput, "threads must be >= 0");
  o.engine.precision = qsmcore::precision_from_string(arg<std::string>(kw, "precision"));
  o.engine.mem_budget = arg<std::int64_t>(kw, "mem_budget");
  if (o.engine.mem_budget > 0) o.engine.mem_budget_source = "mem_budget";
  return o;
}

std::string mib(std::int64_t b) {
  char t[48];
  std::snprintf(t, sizeof t, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  return t;
}

// The phase array's grid, from its shape alone (before it is copied into the engine).
struct ArrayGrid {
  qsmcore::Dims3 dims{};
  std::int64_t echoes = 1;
};

ArrayGrid array_grid(const py::handle& phase) {
  const auto a = py::array::ensure(phase);
  if (!a || (a.ndim() != 3 && a.ndim() != 4))
    throw Error(ErrorKind::InvalidInput, "phase: expected a 3-D array (or 4-D, echoes last)");
  return {{a.shape(0), a.shape(1), a.shape(2)}, a.ndim() == 4 ? a.shape(3) : 1};
}

// Refuses, before the arrays are copied, a run that cannot fit the budget: the engine's copy of
// the scan (and of a given mask) plus the stages' predicted peak above it.
void refuse_before_copying(const py::dict& kw, const qsmcore::FieldPipelineOptions& o, const qsmcore::Vec3& voxel) {
  const qsmcore::ModelOptions e = qsmcore::with_process_defaults(o.engine);
  if (e.mem_budget <= 0) return;
  const ArrayGrid g = array_grid(kw["phase"]);
  const std::int64_t n = g.dims[0] * g.dims[1] * g.dims[2];
  const std::int64_t scan = 2 * n * g.echoes * static_cast<std::int64_t>(sizeof(double));
  const std::int64_t mask = o.mask_source == qsmcore::MaskSource::Given ? n * 8 : 0;
  const qsmcore::PipelinePrediction p = qsmcore::predict_field_pipeline(g.dims, voxel, g.echoes, o, true);
  const std::int64_t need = qsmcore::memory_current() + scan + mask + p.peak_bytes;
  if (need <= e.mem_budget) return;
  throw Error(ErrorKind::OutOfBudget,
              "the field pipeline needs " + mib(need) + " (the scan's copy " + mib(scan) + ", then " +
                  mib(p.peak_bytes) + " at its peak in " + p.peak_stage + "), more than the budget of " +
                  mib(e.mem_budget) + " (" + e.mem_budget_source +
                  "); nothing was copied. The least budget that runs it: mem_budget=" + std::to_string(need));
}

py::list stages_list(const qsmcore::FieldPipelineResult& r) {
  py::list l;
  for (const qsmcore::StageRecord& s : r.stages) {
    py::dict d;
    d["stage"] = s.stage;
    d["method"] = s.method;
    d["seconds"] = s.seconds;
    d["predicted_peak_bytes"] = s.predicted_peak_bytes;
    d["measured_peak_bytes"] = s.measured_peak_bytes;
    d["held_at_start_bytes"] = s.held_at_start_bytes;
    for (const auto& [k, v] : s.figures) d[py::str(k)] = v;
    l.append(d);
  }
  return l;
}

void scan_facts(const qsmcore::Scan& s, py::dict& d) {
  d["te"] = s.te_s;
  d["b0"] = s.b0_t;
  d["b0_dir"] = py::make_tuple(s.b0_dir[0], s.b0_dir[1], s.b0_dir[2]);
  d["b0_dir_source"] = s.b0_dir_source;
  py::dict scaling;
  scaling["factor"] = s.phase_scaling.factor;
  scaling["raw_offset"] = s.phase_scaling.raw_offset;
  scaling["assumed"] = s.phase_scaling.assumed;
  d["phase_scaling"] = scaling;
}

py::dict results(qsmcore::FieldPipelineResult&& r, std::vector<std::string> notes, std::int64_t predicted,
                 std::int64_t measured) {
  py::dict d;
  if (!r.total_field_hz.empty()) d["total_field_hz"] = volume_to_numpy(std::move(r.total_field_hz));
  if (!r.local_field_ppm.empty()) d["local_field"] = volume_to_numpy(std::move(r.local_field_ppm));
  if (!r.r2star_hz.empty()) d["r2star"] = volume_to_numpy(std::move(r.r2star_hz));
  d["mask"] = volume_to_numpy(std::move(r.local_mask));
  d["brain_mask"] = volume_to_numpy(std::move(r.mask));
  if (!r.chi_ppm.empty()) d["chi"] = volume_to_numpy(std::move(r.chi_ppm));
  d["eroded_voxels"] = r.eroded_voxels;
  d["stages"] = stages_list(r);
  d["predicted_peak_bytes"] = predicted;
  d["measured_peak_bytes"] = measured;
  d["stages_predicted_peak_bytes"] = r.predicted_peak_bytes;
  d["stages_measured_peak_bytes"] = r.measured_peak_bytes;
  for (std::string& n : r.notes) notes.push_back(std::move(n));
  d["notes"] = notes;
  return d;
}

py::dict field_pipeline(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  qsmcore::FieldPipelineOptions o = pipeline_options(kw);
  qsmcore::ScanOverrides ov;
  ov.te_s = arg<std::vector<double>>(kw, "te");
  ov.b0_t = arg<double>(kw, "b0");
  if (!kw["b0_dir"].is_none()) ov.b0_dir = to_vec3(kw["b0_dir"], "b0_dir");
  ov.phase_scale = optional_arg<double>(kw, "phase_scale");
  refuse_before_copying(kw, o, g.voxel_mm);

  // As the command: the scan (here the engine's copy of the arrays) and the given mask are what
  // the run holds before its stages start.
  const std::int64_t start = qsmcore::memory_current();
  qsmcore::reset_memory_peak();
  Volume mag = volume_arg(kw, "magnitude", g, true);
  Volume phase = volume_arg(kw, "phase", g, true);
  require_shape(mag, "magnitude", phase, "phase", phase.frames());
  std::optional<Volume> mask = optional_volume(kw, "mask", g, false);
  if (mask) {
    require_shape(*mask, "mask", phase, "phase");
    o.mask = &*mask;
  }
  std::optional<Volume> region = optional_volume(kw, "reference_region", g, false);
  if (region) {
    require_shape(*region, "reference_region", phase, "phase");
    o.inversion.reference = qsmcore::Reference::Region;
    o.inversion.reference_region = &*region;
  } else if (!arg<bool>(kw, "reference")) {
    o.inversion.reference = qsmcore::Reference::None;
  }
  qsmcore::Scan scan = qsmcore::make_scan(std::move(mag), std::move(phase), ov, "field_pipeline");
  py::dict facts;
  scan_facts(scan, facts);
  std::vector<std::string> notes = scan.notes;
  const std::int64_t held = qsmcore::memory_current() - start;
  std::int64_t measured = qsmcore::memory_peak() - start;

  Progress progress(kw["progress"]);
  o.progress = progress.staged();
  qsmcore::FieldPipelineResult r;
  {
    py::gil_scoped_release release;
    r = qsmcore::run_field_pipeline(std::move(scan), o);
  }
  progress.rethrow();
  measured = std::max(measured, held + r.measured_peak_bytes);
  const std::int64_t predicted = held + r.predicted_peak_bytes;  // refined once a mask from the data had its size
  py::dict d = results(std::move(r), std::move(notes), predicted, measured);
  for (auto item : facts) d[item.first] = item.second;
  return d;
}

}  // namespace

void bind_pipeline(py::module_& s) {
  s.def("field_pipeline", &field_pipeline, py::arg("options"));
  s.def("network_inversion_ids", &qsmcore::network_inversion_ids);
}

}  // namespace qsmpy::stages
