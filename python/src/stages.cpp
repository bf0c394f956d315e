// qsmcore.stages, first part: a scan from files or arrays (qsmcore/scan.h) and the brain mask
// from the data (qsmcore/masking.h); bind_stages registers every stage binding (the others are
// in stages_*.cpp). Each function takes one keyword dict that python/qsmcore/stages.py fills
// (defaults, nibabel images, checks that name the Python argument) and returns arrays in NIfTI
// index order, float64, Fortran-ordered, owning their engine volume.
#include <pybind11/stl.h>

#include "bindings.h"
#include "convert.h"
#include "qsmcore/error.h"
#include "qsmcore/masking.h"
#include "qsmcore/scan.h"
#include "stage_args.h"
#include "stages_bind.h"

namespace qsmpy {
namespace stages {
namespace {

using qsmcore::Error;
using qsmcore::ErrorKind;

qsmcore::ScanOverrides overrides_of(const py::dict& kw) {
  qsmcore::ScanOverrides o;
  if (auto te = optional_arg<std::vector<double>>(kw, "te")) o.te_s = *te;
  o.b0_t = optional_arg<double>(kw, "b0");
  if (!kw["b0_dir"].is_none()) o.b0_dir = to_vec3(kw["b0_dir"], "b0_dir");
  o.phase_scale = optional_arg<double>(kw, "phase_scale");
  return o;
}

py::dict scan_dict(qsmcore::Scan&& s) {
  py::dict d;
  d["affine"] = affine_to_numpy(s.phase.affine());
  const auto& v = s.phase.voxel_mm();
  d["voxel_size"] = py::make_tuple(v[0], v[1], v[2]);
  d["te"] = s.te_s;
  d["b0"] = s.b0_t;
  d["b0_dir"] = py::make_tuple(s.b0_dir[0], s.b0_dir[1], s.b0_dir[2]);
  d["te_source"] = s.te_source;
  d["b0_source"] = s.b0_source;
  d["b0_dir_source"] = s.b0_dir_source;
  py::dict scaling;
  scaling["factor"] = s.phase_scaling.factor;
  scaling["raw_offset"] = s.phase_scaling.raw_offset;
  scaling["assumed"] = s.phase_scaling.assumed;
  scaling["raw_min"] = s.phase_scaling.raw_min;
  scaling["raw_max"] = s.phase_scaling.raw_max;
  d["phase_scaling"] = scaling;
  d["notes"] = s.notes;
  py::dict files;
  files["magnitude"] = s.files.magnitude;
  files["phase"] = s.files.phase;
  d["files"] = files;
  d["magnitude"] = volume_to_numpy(std::move(s.magnitude));
  d["phase"] = volume_to_numpy(std::move(s.phase));
  return d;
}

py::dict read_scan(const py::dict& kw) {
  qsmcore::ScanFiles files;
  files.magnitude = arg<std::vector<std::string>>(kw, "magnitude");
  files.phase = arg<std::vector<std::string>>(kw, "phase");
  const qsmcore::ScanOverrides o = overrides_of(kw);
  qsmcore::Scan s = [&] {
    py::gil_scoped_release release;
    return qsmcore::read_scan(files, o);
  }();
  return scan_dict(std::move(s));
}

py::dict make_scan(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  qsmcore::Volume mag = volume_arg(kw, "magnitude", g, true);
  qsmcore::Volume phase = volume_arg(kw, "phase", g, true);
  require_shape(mag, "magnitude", phase, "phase", phase.frames());
  const qsmcore::ScanOverrides o = overrides_of(kw);
  qsmcore::Scan s = [&] {
    py::gil_scoped_release release;
    return qsmcore::make_scan(std::move(mag), std::move(phase), o, "make_scan");
  }();
  return scan_dict(std::move(s));
}

qsmcore::MaskMethod mask_method(const std::string& m) {
  if (m == "quality") return qsmcore::MaskMethod::PhaseQuality;
  if (m == "magnitude") return qsmcore::MaskMethod::Magnitude;
  throw Error(ErrorKind::InvalidInput, "method '" + m + "': expected 'quality' or 'magnitude'");
}

py::array brain_mask(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  const qsmcore::Volume mag = volume_arg(kw, "magnitude", g, true);
  const qsmcore::Volume phase = volume_arg(kw, "phase", g, true);
  require_shape(mag, "magnitude", phase, "phase", phase.frames());
  const std::vector<double> te = echo_times(kw, phase.frames());
  qsmcore::MaskOptions o;
  o.method = mask_method(arg<std::string>(kw, "method"));
  o.dilate = arg<int>(kw, "dilate");
  o.erode = arg<int>(kw, "erode");
  o.fill_holes_fraction = arg<double>(kw, "fill_holes");
  o.largest_component = arg<bool>(kw, "largest_component");
  Progress progress(kw["progress"]);
  o.progress = progress.stage("brain mask");
  qsmcore::Volume m = run_engine(kw, progress, [&] { return qsmcore::brain_mask(mag, phase, te, o); });
  return volume_to_numpy(std::move(m));
}

}  // namespace

void bind_scan_and_mask(py::module_& s) {
  s.def("read_scan", &read_scan, py::arg("options"));
  s.def("make_scan", &make_scan, py::arg("options"));
  s.def("brain_mask", &brain_mask, py::arg("options"));
}

}  // namespace stages

void bind_stages(py::module_& m) {
  py::module_ s = m.def_submodule("stages", "The phase-to-χ stages (use qsmcore.stages, not this module)");
  stages::bind_scan_and_mask(s);
  stages::bind_unwrap(s);
  stages::bind_field(s);
  stages::bind_relaxometry(s);
  stages::bind_pipeline(s);
}

}  // namespace qsmpy
