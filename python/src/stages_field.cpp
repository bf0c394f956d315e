// qsmcore.stages: the total field from the echoes (qsmcore/fieldmap.h), background field removal
// (qsmcore/bgremove.h) and dipole inversion (qsmcore/inversion.h) on arrays.
#include <pybind11/stl.h>

#include "convert.h"
#include "qsmcore/bgremove.h"
#include "qsmcore/error.h"
#include "qsmcore/fieldmap.h"
#include "qsmcore/inversion.h"
#include "qsmcore/pipeline.h"
#include "stage_args.h"
#include "stages_bind.h"

namespace qsmpy::stages {
namespace {

using qsmcore::Error;
using qsmcore::ErrorKind;
using qsmcore::Volume;

qsmcore::FieldMapOptions fieldmap_options(const py::dict& kw, std::int64_t echoes) {
  qsmcore::FieldMapOptions o;
  o.remove_phase_offset = arg<bool>(kw, "offset_correction");
  const auto oe = arg<std::vector<std::int64_t>>(kw, "offset_echoes");
  if (oe.size() != 2) throw Error(ErrorKind::InvalidInput, "offset_echoes: expected two echo indices");
  if (o.remove_phase_offset && echoes > 1) {
    o.offset_echoes[0] = frame_index(oe[0], echoes, "offset_echoes");
    o.offset_echoes[1] = frame_index(oe[1], echoes, "offset_echoes");
  }
  o.offset_sigma_mm = arg<double>(kw, "offset_sigma");
  o.unwrap = qsmcore::parse_unwrap_method(arg<std::string>(kw, "unwrap"));
  o.romeo.template_echo = frame_index(arg<std::int64_t>(kw, "template"), echoes, "template");
  o.romeo.individual = arg<bool>(kw, "individual");
  o.romeo.romeo.max_seeds = arg<int>(kw, "max_seeds");
  o.weighting = qsmcore::parse_echo_weighting(arg<std::string>(kw, "weighting"), "weighting");
  o.output_phase_offset = arg<bool>(kw, "return_phase_offset");
  return o;
}

py::dict map_field(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  const Volume mag = volume_arg(kw, "magnitude", g, true);
  const Volume phase = volume_arg(kw, "phase", g, true);
  const Volume mask = volume_arg(kw, "mask", g, false);
  require_shape(mag, "magnitude", phase, "phase", phase.frames());
  require_shape(mask, "mask", phase, "phase");
  const std::vector<double> te = echo_times(kw, phase.frames());
  qsmcore::FieldMapOptions o = fieldmap_options(kw, phase.frames());
  Progress progress(kw["progress"]);
  o.progress = progress.staged();
  qsmcore::FieldMap f = run_engine(kw, progress, [&] { return qsmcore::map_field(mag, phase, te, mask, o); });
  py::dict d;
  d["total_field_hz"] = volume_to_numpy(std::move(f.total_field_hz));
  d["noise_hz"] = volume_to_numpy(std::move(f.noise_hz));
  if (o.output_phase_offset) d["phase_offset"] = volume_to_numpy(std::move(f.phase_offset));
  d["notes"] = f.notes;
  return d;
}

qsmcore::Vec3 b0_dir_of(const py::dict& kw) {
  return to_vec3(kw["b0_dir"], "b0_dir");
}

py::dict remove_background(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  const Volume field = volume_arg(kw, "total_field", g, false);
  const Volume mask = volume_arg(kw, "mask", g, false);
  require_shape(mask, "mask", field, "total_field");
  const auto weights = optional_volume(kw, "weights", g, false);
  if (weights) require_shape(*weights, "weights", field, "total_field");
  qsmcore::BfrOptions o;
  o.method = qsmcore::parse_bfr_method(arg<std::string>(kw, "method"));
  o.radii_mm = arg<std::vector<double>>(kw, "radii");
  o.threshold = arg<double>(kw, "threshold");
  o.lambda = arg<double>(kw, "lambda");
  o.tolerance = arg<double>(kw, "tolerance");
  o.max_iterations = arg<int>(kw, "max_iterations");
  o.weights = weights ? &*weights : nullptr;
  const qsmcore::Vec3 b0 = b0_dir_of(kw);
  Progress progress(kw["progress"]);
  o.progress = progress.stage("background removal");
  qsmcore::BfrResult r = run_engine(kw, progress, [&] { return qsmcore::remove_background(field, mask, b0, o); });
  py::dict d;
  d["local_field"] = volume_to_numpy(std::move(r.local_field));
  d["mask"] = volume_to_numpy(std::move(r.mask));
  d["eroded_voxels"] = r.eroded_voxels;
  d["iterations"] = r.iterations;
  d["residual"] = r.residual;
  return d;
}

qsmcore::TikhonovPrior tikhonov_prior(const std::string& p) {
  if (p == "identity") return qsmcore::TikhonovPrior::Identity;
  if (p == "gradient") return qsmcore::TikhonovPrior::Gradient;
  throw Error(ErrorKind::InvalidInput, "tikhonov_prior '" + p + "': expected 'identity' or 'gradient'");
}

qsmcore::InversionOptions inversion_options(const py::dict& kw) {
  qsmcore::InversionOptions o;
  o.method = qsmcore::parse_inversion_method(arg<std::string>(kw, "method"));
  o.threshold = arg<double>(kw, "threshold");
  o.lambda = arg<double>(kw, "lambda");
  o.rho = arg<double>(kw, "rho");
  o.mu = arg<double>(kw, "mu");
  o.tolerance = arg<double>(kw, "tolerance");
  o.max_iterations = arg<int>(kw, "max_iterations");
  o.lsmr_iterations = arg<int>(kw, "lsmr_iterations");
  o.tikhonov_prior = tikhonov_prior(arg<std::string>(kw, "tikhonov_prior"));
  o.laplacian_weights = arg<bool>(kw, "laplacian_weights");
  o.tv_masked_data = arg<bool>(kw, "masked_data");
  o.data_erode = arg<int>(kw, "data_erode");
  if (o.data_erode < 0) throw Error(ErrorKind::InvalidInput, "data_erode must be 0 or more voxels");
  o.pad = arg<int>(kw, "pad");
  return o;
}

py::dict invert_dipole(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  const Volume field = volume_arg(kw, "local_field", g, false);
  const Volume mask = volume_arg(kw, "mask", g, false);
  require_shape(mask, "mask", field, "local_field");
  const auto region = optional_volume(kw, "reference_region", g, false);
  qsmcore::InversionOptions o = inversion_options(kw);
  const std::string ref = arg<std::string>(kw, "reference");
  if (region) {
    require_shape(*region, "reference", field, "local_field");
    o.reference = qsmcore::Reference::Region;
    o.reference_region = &*region;
  } else if (ref == "mask") {
    o.reference = qsmcore::Reference::MaskMean;
  } else if (ref == "none") {
    o.reference = qsmcore::Reference::None;
  } else {
    throw Error(ErrorKind::InvalidInput, "reference '" + ref + "': expected 'mask', 'none' or a region mask");
  }
  const qsmcore::Vec3 b0 = b0_dir_of(kw);
  Progress progress(kw["progress"]);
  o.progress = progress.stage(std::string("inversion: ") + qsmcore::to_string(o.method));
  const std::int64_t predicted = qsmcore::predict_inversion_bytes(field.dims(), o);
  qsmcore::InversionResult r = run_engine(kw, progress, [&] { return qsmcore::invert_dipole(field, mask, b0, o); });
  py::dict d;
  d["chi"] = volume_to_numpy(std::move(r.chi));
  d["iterations"] = r.iterations;
  d["final_change"] = r.final_change;
  d["predicted_peak_bytes"] = predicted;
  return d;
}

}  // namespace

void bind_field(py::module_& s) {
  s.def("map_field", &map_field, py::arg("options"));
  s.def("remove_background", &remove_background, py::arg("options"));
  s.def("invert_dipole", &invert_dipole, py::arg("options"));
  s.def("default_bfr_method", [] { return std::string(qsmcore::to_string(qsmcore::default_bfr_options().method)); });
}

}  // namespace qsmpy::stages
