// measure_network_memory: load from nothing, then plan + run once per shape from the loaded
// state, reading the accounting layer's counters around each phase (measure.h).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "qsmcore/error.h"
#include "qsmcore/measure.h"
#include "qsmcore/memory.h"

namespace qsmcore {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::size_t> dynamic_positions(const ValueDesc& d) {
  std::vector<std::size_t> pos;
  for (std::size_t i = 0; i < d.dims.size(); ++i)
    if (d.dims[i] < 0) pos.push_back(i);
  return pos;
}

// The declared shape with its dynamic dimensions filled by `spatial` (a dynamic batch, when
// there are four, is 1).
Shape fill_dynamic(const std::string& file, const ValueDesc& d, std::array<std::size_t, 3> spatial) {
  if (!d.has_shape)
    throw Error(ErrorKind::InvalidInput,
                file + ": input '" + d.name + "' declares no shape; pass its shapes explicitly");
  Shape s(d.dims.begin(), d.dims.end());
  std::vector<std::size_t> pos = dynamic_positions(d);
  if (pos.size() == 4 && pos[0] == 0) {
    s[0] = 1;
    pos.erase(pos.begin());
  }
  if (pos.empty()) return s;
  if (pos.size() != 3)
    throw Error(ErrorKind::InvalidInput, file + ": input '" + d.name + "' has " + std::to_string(pos.size()) +
                                             " dynamic dimensions; a spatial shape fills exactly 3");
  for (std::size_t k = 0; k < 3; ++k) s[pos[k]] = static_cast<std::int64_t>(spatial[k]);
  return s;
}

// The spatial shape of an input: its dynamic dimensions when it has three (four with a dynamic
// batch), else the three axes after batch and channel (channels-last when the last axis is the
// small one).
std::array<std::size_t, 3> spatial_of(const ValueDesc& d, const Shape& s) {
  std::vector<std::size_t> pos = dynamic_positions(d);
  if (pos.size() == 4 && pos[0] == 0) pos.erase(pos.begin());
  if (pos.size() != 3) {
    const std::size_t r = s.size();
    if (r < 3) return {static_cast<std::size_t>(numel(s)), 1, 1};
    const bool channels_last = r == 5 && s[4] <= 4 && s[1] > 4;
    const std::size_t first = channels_last ? 1 : r - 3;
    pos = {first, first + 1, first + 2};
  }
  return {static_cast<std::size_t>(s[pos[0]]), static_cast<std::size_t>(s[pos[1]]),
          static_cast<std::size_t>(s[pos[2]])};
}

Tensor input_tensor(const ValueDesc& d, const Shape& s) {
  const DType t = d.dtype == DType::Undefined ? DType::F32 : d.dtype;
  Tensor x = Tensor::empty(t, s, MemCategory::IO);
  // Ones, not zeros: every page is written (the process view sees it), and no network divides
  // by zero or takes the log of it on this input. Memory does not depend on the values.
  if (t == DType::F32) {
    std::fill(x.span<float>().begin(), x.span<float>().end(), 1.0f);
  } else if (x.nbytes() > 0) {
    std::memset(x.raw(), 0, x.nbytes());
  }
  return x;
}

bool any_dynamic(const std::vector<OnnxModel>& models) {
  for (const auto& m : models)
    for (const auto& d : m.inputs())
      if (!d.has_shape || !dynamic_positions(d).empty()) return true;
  return false;
}

// Plans and runs `m` once at `shapes`, from the loaded state, filling the per-phase figures.
ShapeMeasurement measure_one(OnnxModel& m, const std::vector<Shape>& shapes) {
  ShapeMeasurement sm;
  m.clear_plans();
  const auto t0 = Clock::now();
  const std::int64_t resident = memory_current();
  const bool hwm_reset = reset_process_hwm();
  const std::int64_t rss0 = process_rss_bytes();
  reset_memory_peak();
  const PlanMemory pm = m.plan_memory(shapes);
  sm.plan_peak_bytes = memory_peak() - resident;
  sm.plan_bytes = memory_current() - resident;
  sm.predicted_run_bytes = pm.run_peak_bytes();
  const std::int64_t least_run = m.min_run_bytes(shapes);
  sm.least_inference_bytes = std::max(sm.plan_peak_bytes, sm.plan_bytes + least_run);
  reset_memory_peak();
  const std::int64_t planned = memory_current();
  {
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < shapes.size(); ++i) inputs.push_back(input_tensor(m.inputs()[i], shapes[i]));
    std::vector<Tensor> outputs = m.run(inputs);
  }
  sm.run_peak_bytes = memory_peak() - planned;
  sm.inference_bytes = std::max(sm.plan_peak_bytes, sm.plan_bytes + sm.run_peak_bytes);
  if (hwm_reset && rss0 >= 0) sm.process_hwm_bytes = process_hwm_bytes() - rss0;
  m.clear_plans();
  sm.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return sm;
}

// The network's figure at one point is the worst of its files: they run one after the other.
void merge_worst(ShapeMeasurement& into, const ShapeMeasurement& f) {
  into.plan_peak_bytes = std::max(into.plan_peak_bytes, f.plan_peak_bytes);
  into.plan_bytes = std::max(into.plan_bytes, f.plan_bytes);
  into.run_peak_bytes = std::max(into.run_peak_bytes, f.run_peak_bytes);
  into.predicted_run_bytes = std::max(into.predicted_run_bytes, f.predicted_run_bytes);
  into.inference_bytes = std::max(into.inference_bytes, f.inference_bytes);
  into.least_inference_bytes = std::max(into.least_inference_bytes, f.least_inference_bytes);
  into.process_hwm_bytes = std::max(into.process_hwm_bytes, f.process_hwm_bytes);
  into.seconds += f.seconds;
}

}  // namespace

namespace {

// The points to measure at: per point, per file, the input shapes (the options' explicit ones;
// else a static network's own shapes; else the options' spatial shapes filled into each input).
std::vector<std::vector<std::vector<Shape>>> measure_points(const std::vector<std::string>& files,
                                                            const std::vector<OnnxModel>& models,
                                                            const MeasureOptions& opts) {
  std::vector<std::vector<std::vector<Shape>>> points = opts.explicit_shapes;
  if (points.empty()) {
    if (!any_dynamic(models)) {
      std::vector<std::vector<Shape>> one;
      for (const auto& m : models) {
        std::vector<Shape> s;
        for (const auto& d : m.inputs()) s.push_back(Shape(d.dims.begin(), d.dims.end()));
        one.push_back(std::move(s));
      }
      points.push_back(std::move(one));
    } else {
      if (opts.shapes.empty()) throw Error(ErrorKind::InvalidInput, files[0] + ": no shapes to measure at");
      for (const auto& sp : opts.shapes) {
        std::vector<std::vector<Shape>> per_file;
        for (std::size_t f = 0; f < models.size(); ++f) {
          std::vector<Shape> s;
          for (const auto& d : models[f].inputs()) s.push_back(fill_dynamic(files[f], d, sp));
          per_file.push_back(std::move(s));
        }
        points.push_back(std::move(per_file));
      }
    }
  }
  return points;
}

// The registry's figures from the measured points (memory.md §2): inference_* as the line
// through the plan + run peaks with the fixed part raised to cover every measured peak, the run's
// own line, and the 64³ tile's cost per voxel; a fixed-shape network's one point per voxel.
void fit_figures(MemoryMeasurement& out, const std::vector<std::string>& files) {
  std::vector<std::uint64_t> xs;
  std::vector<std::int64_t> ys, linear, runs;
  for (const auto& p : out.points) {
    xs.push_back(p.voxels);
    ys.push_back(p.inference_bytes);
    linear.push_back(p.plan_bytes + p.run_peak_bytes);
    runs.push_back(p.run_peak_bytes);
  }
  constexpr std::uint64_t kTilePatchVoxels = 64 * 64 * 64;
  if (out.points.size() == 1) {
    // A fixed-shape network is only ever run at its one shape: all of its peak per voxel.
    const std::uint64_t v = std::max<std::uint64_t>(xs[0], 1);
    out.memory.inference_bytes_per_voxel = (static_cast<std::uint64_t>(ys[0]) + v - 1) / v;
    out.memory.inference_fixed_bytes = 0;
    out.run_bytes_per_voxel = (static_cast<std::uint64_t>(runs[0]) + v - 1) / v;
    out.tile_bytes_per_voxel = out.run_bytes_per_voxel;
    return;
  }
  if (out.points.size() < 3)
    throw Error(ErrorKind::InvalidInput,
                files[0] + ": the fit needs at least 3 shapes, " + std::to_string(out.points.size()) + " given");
  // The inference peak is max(planning's transient peak, the plan + the run): flat while
  // planning dominates, then linear. A line fitted to that bends low at large shapes, so the
  // slope comes from the plan + run part alone, and the fixed part is raised until the line
  // covers every measured peak, planning's included.
  const LinearFit fit = fit_fixed_plus_per_voxel(xs, linear);
  std::int64_t fixed = static_cast<std::int64_t>(fit.fixed_bytes);
  for (std::size_t i = 0; i < xs.size(); ++i)
    fixed = std::max(fixed, ys[i] - static_cast<std::int64_t>(fit.bytes_per_voxel * xs[i]));
  // Not every byte is linear in voxels: oneDNN's scratchpads depend on the shape itself, and a
  // streamed conv chain holds whole planes (its windows are reserved linearly, its per-call
  // buffers round to planes). A fixed allowance covers that between and beyond the measured
  // shapes (memory.md M2 allows P ≤ 1.05 T + 4 MiB; under-predicting is not allowed).
  constexpr std::int64_t kShapeAllowance = std::int64_t{1} << 20;
  fixed += kShapeAllowance;
  out.memory.inference_fixed_bytes = static_cast<std::uint64_t>(fixed);
  out.memory.inference_bytes_per_voxel = fit.bytes_per_voxel;
  out.fit_residual_bytes = fit.max_abs_residual;
  const LinearFit run_fit = fit_fixed_plus_per_voxel(xs, runs);
  out.run_fixed_bytes = run_fit.fixed_bytes;
  out.run_bytes_per_voxel = run_fit.bytes_per_voxel;
  out.tile_bytes_per_voxel =
      (run_fit.fixed_bytes + run_fit.bytes_per_voxel * kTilePatchVoxels + kTilePatchVoxels - 1) / kTilePatchVoxels;
}

}  // namespace

MemoryMeasurement measure_network_memory(const std::vector<std::string>& files, const MeasureOptions& opts) {
  if (files.empty()) throw Error(ErrorKind::InvalidInput, "measure: no model file given");
  MemoryMeasurement out;
  out.threads = opts.threads;
  out.backend = opts.backend;
  ModelOptions mo;
  mo.backend = opts.backend;
  mo.threads = opts.threads;

  // Load from nothing: whatever the process holds already is the baseline.
  const std::int64_t base = memory_current();
  reset_memory_peak();
  const auto t0 = Clock::now();
  std::vector<OnnxModel> models;
  for (const auto& f : files) models.push_back(OnnxModel::load(f, mo));
  out.load_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  out.memory.resident_bytes = static_cast<std::uint64_t>(memory_current() - base);
  out.memory.load_peak_bytes = static_cast<std::uint64_t>(memory_peak() - base);

  const std::vector<std::vector<std::vector<Shape>>> points = measure_points(files, models, opts);
  for (const auto& p : points) {
    if (p.size() != models.size())
      throw Error(ErrorKind::InvalidInput, files[0] + ": a point gives shapes for " + std::to_string(p.size()) +
                                               " file(s), the network has " + std::to_string(models.size()));
    ShapeMeasurement sm;
    sm.input_shapes = p;
    for (std::size_t f = 0; f < models.size(); ++f) {
      if (p[f].size() != models[f].inputs().size())
        throw Error(ErrorKind::InvalidInput, files[f] + ": " + std::to_string(p[f].size()) +
                                                 " input shape(s) given, the model takes " +
                                                 std::to_string(models[f].inputs().size()));
      merge_worst(sm, measure_one(models[f], p[f]));
    }
    sm.spatial = spatial_of(models[0].inputs()[0], p[0][0]);
    sm.voxels = voxel_count(sm.spatial);
    out.points.push_back(std::move(sm));
  }

  fit_figures(out, files);
  return out;
}

std::vector<std::array<std::size_t, 3>> default_measure_shapes(const ModelSpec& spec) {
  std::array<std::size_t, 3> b{};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t m = std::max<std::size_t>({1, spec.pad_multiple[i], spec.size_divisor});
    b[i] = (32 + m - 1) / m * m;
  }
  return {b, {2 * b[0], b[1], b[2]}, {2 * b[0], 2 * b[1], b[2]}, {2 * b[0], 2 * b[1], 2 * b[2]}};
}

std::vector<std::array<std::size_t, 3>> default_wasm_measure_shapes(const ModelSpec& spec) {
  constexpr std::size_t kDeep = 64;  // planes from which every registry network's chains form
  const auto s = default_measure_shapes(spec);
  const std::array<std::size_t, 3> b = s[0];
  if (b[0] >= kDeep) return s;
  return {s[1], s[2], s[3], {3 * b[0], 2 * b[1], 2 * b[2]}};
}

}  // namespace qsmcore
