// The stage bindings' shared argument handling (stage_args.h).
#include "stage_args.h"

#include <pybind11/stl.h>

#include <sstream>

#include "convert.h"
#include "qsmcore/error.h"
#include "qsmcore/process_limits.h"

namespace qsmpy::stages {

using qsmcore::Error;
using qsmcore::ErrorKind;

void throw_bad_type(const char* key) {
  throw Error(ErrorKind::InvalidInput, std::string(key) + ": wrong type");
}

qsmcore::Geometry geometry_of(const py::dict& kw) {
  return make_geometry(to_vec3(kw["voxel_size"], "voxel_size"), kw["affine"]);
}

qsmcore::Volume volume_arg(const py::dict& kw, const char* key, const qsmcore::Geometry& g, bool frames) {
  if (!kw.contains(key) || kw[key].is_none()) throw Error(ErrorKind::InvalidInput, std::string(key) + ": missing");
  return volume_from_numpy(kw[key], g, key, frames);
}

std::optional<qsmcore::Volume> optional_volume(const py::dict& kw, const char* key, const qsmcore::Geometry& g,
                                               bool frames) {
  if (!kw.contains(key) || kw[key].is_none()) return std::nullopt;
  return volume_from_numpy(kw[key], g, key, frames);
}

namespace {

std::string shape_text(const qsmcore::Volume& v) {
  std::ostringstream s;
  s << "(" << v.nx() << ", " << v.ny() << ", " << v.nz();
  if (v.frames() > 1) s << ", " << v.frames();
  s << ")";
  return s.str();
}

}  // namespace

void require_shape(const qsmcore::Volume& v, const std::string& what, const qsmcore::Volume& ref,
                   const std::string& ref_what, std::int64_t frames) {
  if (v.dims() != ref.dims())
    throw Error(ErrorKind::InvalidInput,
                what + ": shape " + shape_text(v) + " does not match " + ref_what + "'s " + shape_text(ref));
  if (frames > 0 && v.frames() != frames)
    throw Error(ErrorKind::InvalidInput, what + ": " + std::to_string(v.frames()) + " frame(s), expected " +
                                             std::to_string(frames) + " (one per echo of " + ref_what + ")");
}

std::int64_t frame_index(std::int64_t e, std::int64_t frames, const std::string& what) {
  if (e < 0 || e >= frames)
    throw Error(ErrorKind::InvalidInput,
                what + ": " + std::to_string(e) + " is not an echo in [0, " + std::to_string(frames) + ")");
  return e;
}

std::vector<double> echo_times(const py::dict& kw, std::int64_t echoes) {
  auto te = arg<std::vector<double>>(kw, "te");
  if (static_cast<std::int64_t>(te.size()) != echoes)
    throw Error(ErrorKind::InvalidInput, "te: " + std::to_string(te.size()) + " echo time(s) for " +
                                             std::to_string(echoes) + " echo(es); give one per echo");
  return te;
}

void Progress::operator()(double fraction, const std::string& stage) {
  py::gil_scoped_acquire gil;
  if (error_) return;
  try {
    callback_(fraction, stage);
  } catch (py::error_already_set& e) {
    error_.emplace(std::move(e));
  }
}

std::function<void(double)> Progress::stage(const std::string& name) {
  if (!enabled()) return {};
  return [this, name](double f) { (*this)(f, name); };
}

std::function<void(double, const std::string&)> Progress::staged() {
  if (!enabled()) return {};
  return [this](double f, const std::string& s) { (*this)(f, s); };
}

void Progress::rethrow() {
  if (error_) {
    py::error_already_set e = std::move(*error_);
    error_.reset();
    throw e;
  }
}

Threads::Threads(const py::dict& kw) {
  const int n = arg<int>(kw, "threads");
  if (n < 0) throw Error(ErrorKind::InvalidInput, "threads must be >= 0 (0 or None: what the process may use)");
  scoped_.emplace(n > 0 ? n : qsmcore::usable_cpus());
}

}  // namespace qsmpy::stages
