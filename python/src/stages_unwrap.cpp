// qsmcore.stages: phase unwrapping (qsmcore/unwrap.h) on arrays — ROMEO on one echo, its voxel
// quality, every echo (ROMEO with temporal unwrapping), and Laplacian unwrapping.
#include <pybind11/stl.h>

#include "convert.h"
#include "qsmcore/error.h"
#include "qsmcore/unwrap.h"
#include "stage_args.h"
#include "stages_bind.h"

namespace qsmpy::stages {
namespace {

using qsmcore::Error;
using qsmcore::ErrorKind;
using qsmcore::Volume;

qsmcore::RomeoWeights romeo_weights(const py::dict& kw) {
  qsmcore::RomeoWeights w{false, false, false, false};
  for (const std::string& name : arg<std::vector<std::string>>(kw, "weights")) {
    if (name == "phase_coherence") {
      w.phase_coherence = true;
    } else if (name == "phase_gradient_coherence") {
      w.phase_gradient_coherence = true;
    } else if (name == "phase_linearity") {
      w.phase_linearity = true;
    } else if (name == "magnitude_coherence") {
      w.magnitude_coherence = true;
    } else {
      throw Error(ErrorKind::InvalidInput, "weights: '" + name +
                                               "' is not one of phase_coherence, phase_gradient_coherence, "
                                               "phase_linearity, magnitude_coherence");
    }
  }
  return w;
}

// The arrays one spatial ROMEO call reads, held for its duration.
struct RomeoArrays {
  Volume phase;
  std::optional<Volume> magnitude, mask;
  qsmcore::RomeoInput in;
};

// The second echo whose phase feeds the gradient-coherence term and the seed's 2π class:
// kw["second_echo"], else the next echo (the previous one for the last), when TEs are given.
void second_echo(const py::dict& kw, RomeoArrays& a) {
  const auto te = optional_arg<std::vector<double>>(kw, "te");
  const auto given = optional_arg<std::int64_t>(kw, "second_echo");
  const std::int64_t frames = a.phase.frames();
  if (!te) {
    if (given) throw Error(ErrorKind::InvalidInput, "second_echo: needs te (the echo times, s) for the TE ratio");
    return;
  }
  if (static_cast<std::int64_t>(te->size()) != frames)
    throw Error(ErrorKind::InvalidInput, "te: " + std::to_string(te->size()) + " echo time(s) for the phase's " +
                                             std::to_string(frames) + " echo(es)");
  if (frames < 2 && !given) return;
  const std::int64_t e = a.in.echo;
  const std::int64_t s = given ? frame_index(*given, frames, "second_echo") : (e + 1 < frames ? e + 1 : e - 1);
  if (s == e) throw Error(ErrorKind::InvalidInput, "second_echo: must differ from echo");
  a.in.second_phase = &a.phase;
  a.in.second_echo = s;
  a.in.te_ratio = (*te)[e] / (*te)[s];
}

void romeo_arrays(const py::dict& kw, RomeoArrays& a) {
  const qsmcore::Geometry g = geometry_of(kw);
  a.phase = volume_arg(kw, "phase", g, true);
  a.magnitude = optional_volume(kw, "magnitude", g, true);
  a.mask = optional_volume(kw, "mask", g, false);
  a.in.phase = &a.phase;
  a.in.echo = frame_index(arg<std::int64_t>(kw, "echo"), a.phase.frames(), "echo");
  if (a.magnitude) {
    const std::int64_t mf = a.magnitude->frames();
    require_shape(*a.magnitude, "magnitude", a.phase, "phase", mf == 1 ? 1 : a.phase.frames());
    a.in.magnitude = &*a.magnitude;
    a.in.magnitude_echo = mf == 1 ? 0 : a.in.echo;
  }
  if (a.mask) {
    require_shape(*a.mask, "mask", a.phase, "phase");
    a.in.mask = &*a.mask;
  }
  second_echo(kw, a);
}

py::array romeo_unwrap(const py::dict& kw) {
  RomeoArrays a;
  romeo_arrays(kw, a);
  qsmcore::RomeoOptions o;
  o.weights = romeo_weights(kw);
  o.max_seeds = arg<int>(kw, "max_seeds");
  Progress progress(kw["progress"]);
  o.progress = progress.stage("romeo");
  Volume u = run_engine(kw, progress, [&] { return qsmcore::romeo_unwrap(a.in, o); });
  return volume_to_numpy(std::move(u));
}

py::array romeo_voxel_quality(const py::dict& kw) {
  RomeoArrays a;
  romeo_arrays(kw, a);
  const qsmcore::RomeoWeights w = romeo_weights(kw);
  Progress progress{py::none()};
  Volume q = run_engine(kw, progress, [&] { return qsmcore::romeo_voxel_quality(a.in, w); });
  return volume_to_numpy(std::move(q));
}

py::array unwrap_echoes(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  const Volume phase = volume_arg(kw, "phase", g, true);
  const auto mag = optional_volume(kw, "magnitude", g, true);
  const auto mask = optional_volume(kw, "mask", g, false);
  if (mag) require_shape(*mag, "magnitude", phase, "phase", mag->frames() == 1 ? 1 : phase.frames());
  if (mask) require_shape(*mask, "mask", phase, "phase");
  const std::vector<double> te = echo_times(kw, phase.frames());
  qsmcore::EchoUnwrapOptions o;
  o.romeo.weights = romeo_weights(kw);
  o.romeo.max_seeds = arg<int>(kw, "max_seeds");
  o.template_echo = frame_index(arg<std::int64_t>(kw, "template"), phase.frames(), "template");
  o.individual = arg<bool>(kw, "individual");
  Progress progress(kw["progress"]);
  o.romeo.progress = progress.stage("romeo");
  Volume u = run_engine(kw, progress, [&] {
    return qsmcore::romeo_unwrap_echoes(phase, mag ? &*mag : nullptr, te, mask ? &*mask : nullptr, o);
  });
  return volume_to_numpy(std::move(u));
}

py::array laplacian_unwrap(const py::dict& kw) {
  const qsmcore::Geometry g = geometry_of(kw);
  const Volume phase = volume_arg(kw, "phase", g, true);
  const auto mask = optional_volume(kw, "mask", g, false);
  if (mask) require_shape(*mask, "mask", phase, "phase");
  const std::int64_t echo = frame_index(arg<std::int64_t>(kw, "echo"), phase.frames(), "echo");
  qsmcore::LaplacianUnwrapOptions o;
  o.congruent = arg<bool>(kw, "congruent");
  Progress progress(kw["progress"]);
  o.progress = progress.stage("laplacian unwrap");
  Volume u =
      run_engine(kw, progress, [&] { return qsmcore::laplacian_unwrap(phase, echo, mask ? &*mask : nullptr, o); });
  return volume_to_numpy(std::move(u));
}

}  // namespace

void bind_unwrap(py::module_& s) {
  s.def("romeo_unwrap", &romeo_unwrap, py::arg("options"));
  s.def("romeo_voxel_quality", &romeo_voxel_quality, py::arg("options"));
  s.def("unwrap_echoes", &unwrap_echoes, py::arg("options"));
  s.def("laplacian_unwrap", &laplacian_unwrap, py::arg("options"));
}

}  // namespace qsmpy::stages
