// qsmcore.stages: R2*, T2* and SWI from the same multi-echo scan (qsmcore/relaxometry.h) on arrays.
#include <pybind11/stl.h>

#include "convert.h"
#include "qsmcore/error.h"
#include "qsmcore/relaxometry.h"
#include "stage_args.h"
#include "stages_bind.h"

namespace qsmpy::stages {
namespace {

using qsmcore::Error;
using qsmcore::ErrorKind;
using qsmcore::Volume;

qsmcore::R2starOptions r2star_options(const py::dict& kw) {
  qsmcore::R2starOptions o;
  const std::string m = arg<std::string>(kw, "method");
  if (m == "loglinear") {
    o.method = qsmcore::R2starMethod::LogLinear;
  } else if (m == "arlo") {
    o.method = qsmcore::R2starMethod::Arlo;
  } else {
    throw Error(ErrorKind::InvalidInput, "method '" + m + "': expected 'loglinear' or 'arlo'");
  }
  const std::string w = arg<std::string>(kw, "weighting");
  if (w == "signal_squared") {
    o.weighting = qsmcore::LogLinearWeighting::SignalSquared;
  } else if (w == "unweighted") {
    o.weighting = qsmcore::LogLinearWeighting::Unweighted;
  } else {
    throw Error(ErrorKind::InvalidInput, "weighting '" + w + "': expected 'signal_squared' or 'unweighted'");
  }
  o.arlo_simpson_correction = arg<bool>(kw, "simpson_correction");
  o.max_r2star_hz = arg<double>(kw, "max_r2star");
  return o;
}

// R2* in Hz, or T2* in s with kw["t2star"].
py::array r2star(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  const Volume mag = volume_arg(kw, "magnitude", g, true);
  const auto mask = optional_volume(kw, "mask", g, false);
  if (mask) require_shape(*mask, "mask", mag, "magnitude");
  const std::vector<double> te = echo_times(kw, mag.frames());
  qsmcore::R2starOptions o = r2star_options(kw);
  const bool t2 = arg<bool>(kw, "t2star");
  Progress progress(kw["progress"]);
  o.progress = progress.stage(t2 ? "t2star" : "r2star");
  Volume r = run_engine(kw, progress, [&] {
    Volume r2 = qsmcore::r2star_map(mag, te, mask ? &*mask : nullptr, o);
    return t2 ? qsmcore::t2star_from_r2star(r2) : std::move(r2);
  });
  return volume_to_numpy(std::move(r));
}

qsmcore::SwiOptions swi_options(const py::dict& kw) {
  qsmcore::SwiOptions o;
  o.highpass_sigma_voxels = to_vec3(kw["highpass_sigma"], "highpass_sigma");
  const std::string s = arg<std::string>(kw, "scaling");
  if (s == "tanh") {
    o.scaling = qsmcore::SwiPhaseScaling::Tanh;
  } else if (s == "classic") {
    o.scaling = qsmcore::SwiPhaseScaling::Classic;
  } else {
    throw Error(ErrorKind::InvalidInput, "scaling '" + s + "': expected 'tanh' or 'classic'");
  }
  o.strength = arg<double>(kw, "strength");
  o.phase_echo = arg<int>(kw, "phase_echo");
  o.mip_slices = arg<int>(kw, "mip_slices");
  return o;
}

py::dict swi(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  const Volume mag = volume_arg(kw, "magnitude", g, true);
  const Volume field = volume_arg(kw, "field_hz", g, false);
  const Volume mask = volume_arg(kw, "mask", g, false);
  require_shape(field, "field_hz", mag, "magnitude");
  require_shape(mask, "mask", mag, "magnitude");
  const auto te = arg<std::vector<double>>(kw, "te");
  qsmcore::SwiOptions o = swi_options(kw);
  Progress progress(kw["progress"]);
  o.progress = progress.stage("swi");
  qsmcore::SwiResult r = run_engine(kw, progress, [&] { return qsmcore::swi(mag, field, mask, te, o); });
  py::dict d;
  d["swi"] = volume_to_numpy(std::move(r.swi));
  d["mip"] = volume_to_numpy(std::move(r.mip));
  return d;
}

}  // namespace

void bind_relaxometry(py::module_& s) {
  s.def("r2star", &r2star, py::arg("options"));
  s.def("swi", &swi, py::arg("options"));
}

}  // namespace qsmpy::stages
