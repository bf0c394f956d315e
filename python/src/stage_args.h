// What the phase-to-χ stage bindings (stages*.cpp) share: reading their keyword dicts (the
// Python wrappers in python/qsmcore/stages.py fill every key, so a missing one is a bug there),
// arrays to volumes with grid checks that name the argument, the thread count and the progress
// callback around an engine call made with the GIL released.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

// The engine's thread count is not in its public headers; the extension links the same library.
#include "core/parallel.h"
#include "qsmcore/volume.h"

namespace qsmpy::stages {

namespace py = pybind11;

/// Error{InvalidInput} "<key>: wrong type".
[[noreturn]] void throw_bad_type(const char* key);

/// kw[key] cast to T; Error{InvalidInput} naming `key` when it cannot be.
template <class T>
T arg(const py::dict& kw, const char* key) {
  if (!kw.contains(key)) throw std::logic_error(std::string("stages: keyword '") + key + "' missing");
  try {
    return kw[key].cast<T>();
  } catch (const py::cast_error&) {
    throw_bad_type(key);
  }
}

/// kw[key] unless it is None.
template <class T>
std::optional<T> optional_arg(const py::dict& kw, const char* key) {
  if (!kw.contains(key) || kw[key].is_none()) return std::nullopt;
  return arg<T>(kw, key);
}

/// The grid every array of a call is placed on: kw["voxel_size"] (mm) and kw["affine"] (4×4 or None).
qsmcore::Geometry geometry_of(const py::dict& kw);

/// kw[key] as a volume on `g` (a copy, float64); 4-D (frames last) only when `frames`.
qsmcore::Volume volume_arg(const py::dict& kw, const char* key, const qsmcore::Geometry& g, bool frames);
/// The same, or nothing when kw[key] is None.
std::optional<qsmcore::Volume> optional_volume(const py::dict& kw, const char* key, const qsmcore::Geometry& g,
                                               bool frames);

/// Error{InvalidInput} "<what>: shape (…) does not match <ref_what>'s (…)" unless v has ref's
/// (nx, ny, nz); and, when `frames` > 0, unless v has that many frames.
void require_shape(const qsmcore::Volume& v, const std::string& what, const qsmcore::Volume& ref,
                   const std::string& ref_what, std::int64_t frames = 0);

/// A frame index in [0, frames), else Error{InvalidInput} naming `what`.
std::int64_t frame_index(std::int64_t e, std::int64_t frames, const std::string& what);

/// Echo times (s), one per echo of `echoes`: the Python wrapper checked their values.
std::vector<double> echo_times(const py::dict& kw, std::int64_t echoes);

/// The Python progress(fraction, stage) callback, called from whichever engine thread reports.
/// The GIL is taken for each call; an exception it raises is kept (an engine worker thread
/// cannot unwind) and raised by rethrow() once the engine returns; later reports are dropped.
/// Hidden like pybind11's own types, whose objects it holds.
class __attribute__((visibility("hidden"))) Progress {
 public:
  explicit Progress(py::object callback) : callback_(std::move(callback)) {}
  bool enabled() const { return !callback_.is_none(); }
  void operator()(double fraction, const std::string& stage);
  /// A one-stage reporter for engine calls whose callback takes the fraction only; empty when
  /// no callback was given.
  std::function<void(double)> stage(const std::string& name);
  std::function<void(double, const std::string&)> staged();
  void rethrow();

 private:
  py::object callback_;
  std::optional<py::error_already_set> error_;
};

/// Threads for an engine call: kw["threads"] (0 = what the process may use), held for its scope.
class Threads {
 public:
  explicit Threads(const py::dict& kw);

 private:
  std::optional<qsmcore::ScopedThreads> scoped_;
};

/// Runs f() with the GIL released under the call's thread count, then raises what the progress
/// callback raised.
template <class F>
auto run_engine(const py::dict& kw, Progress& progress, F&& f) {
  Threads threads(kw);
  auto result = [&] {
    py::gil_scoped_release release;
    return f();
  }();
  progress.rethrow();
  return result;
}

}  // namespace qsmpy::stages
