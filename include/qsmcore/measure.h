// Measuring a network's NetworkMemory (memory.md §2.1, §7 M1) with the accounting layer: load
// the model from nothing (resident bytes, load peak), then at each input shape plan and run it
// once from the loaded state (plan, run and whole-inference peaks), and fit the inference peak
// above the resident model as fixed + per-voxel bytes by least squares.
//
// The figures are the accounting layer's high-water (live engine bytes, the T of memory.md M2),
// not the process RSS: RSS also holds the allocator's and oneDNN's own bookkeeping, which the
// engine neither owns nor can budget. The process view is recorded next to them as a cross-check.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "qsmcore/model_spec.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/tensor.h"

namespace qsmcore {

/// One measurement point: one set of input shapes, planned and run once.
struct ShapeMeasurement {
  std::vector<std::vector<Shape>> input_shapes;  // per file, per graph input
  std::array<std::size_t, 3> spatial{};          // the network's spatial shape
  std::uint64_t voxels = 0;
  std::int64_t plan_peak_bytes = 0;    // high-water while planning, above the resident model
  std::int64_t plan_bytes = 0;         // what the plan holds once built (packed weights, ...)
  std::int64_t run_peak_bytes = 0;     // high-water of the run (inputs included) above the plan
  std::int64_t predicted_run_bytes = 0;  // the plan's own prediction of that (PlanMemory)
  std::int64_t inference_bytes = 0;    // high-water of plan + run above the resident model
  // The least the same could be, activations spilled to disk between their uses (ModelOptions::
  // spill_activations): resident model + this is the smallest budget the network runs within
  // at this shape, whole-volume and exact.
  std::int64_t least_inference_bytes = 0;
  std::int64_t process_hwm_bytes = -1;  // VmHWM growth over the resident state; -1 unknown
  double seconds = 0.0;
};

/// What `measure_network_memory` found, and how well the linear model fits it.
struct MemoryMeasurement {
  NetworkMemory memory;  // wasm fields stay 0: they come from `qsm measure --wasm` (cli/wasm_measure.h)
  std::vector<ShapeMeasurement> points;
  // Largest |measured − (a + b·voxels)| of the least-squares line through the plan + run
  // bytes, in bytes. The stored coefficients are that line moved up (slope rounded up,
  // intercept raised to the highest point, planning's transient peak included), so no
  // measured point lies above its prediction.
  double fit_residual_bytes = 0.0;
  // The run alone (above the built plan) fitted the same way: what each tile in flight adds,
  // since tiles share one plan. tile_bytes_per_voxel is that at a 64³ patch, per voxel
  // (memory.md §2.2: a whole 64³ tile per voxel, which over-counts larger patches slightly).
  std::uint64_t run_fixed_bytes = 0;
  std::uint64_t run_bytes_per_voxel = 0;
  std::uint64_t tile_bytes_per_voxel = 0;
  double load_seconds = 0.0;
  int threads = 1;
  Backend backend = kDefaultBackend;
};

struct MeasureOptions {
  Backend backend = kDefaultBackend;
  int threads = 1;  // memory.md §2.3: figures are measured single-threaded by default
  // Spatial shapes to measure. Each graph input's dynamic dimensions are filled, in order, with
  // the shape's three values; inputs without dynamic dimensions keep their declared shape.
  std::vector<std::array<std::size_t, 3>> shapes;
  // Alternatively, the exact shapes: explicit[k][f][i] is input i of file f at point k. When
  // non-empty it replaces `shapes`.
  std::vector<std::vector<std::vector<Shape>>> explicit_shapes;
};

/// Measures one network made of `files` (NeXtQSM: its two networks, both resident, run one
/// after the other). Needs at least 3 points with distinct voxel counts for a fit, except for
/// fixed-shape networks (no dynamic dimension), which are measured at their one shape and get
/// bytes_per_voxel = ceil(peak / voxels) with no fixed part. Throws Error{InvalidInput} naming
/// the file when a shape does not suit it.
MemoryMeasurement measure_network_memory(const std::vector<std::string>& files, const MeasureOptions& opts);

/// The default sweep for a registry network: its pad multiple per axis, rounded up from 32,
/// at 1, 2, 4 and 8 times that volume (axes doubled one at a time).
std::vector<std::array<std::size_t, 3>> default_measure_shapes(const ModelSpec& spec);
/// The wasm32 sweep: where the native base shape b is less than 64 deep, b at 2, 4, 8 and 12
/// times its volume, every shape at least 2·b deep; else the native sweep. The SIMD128 conv
/// chains form only in volumes deep enough for their plane windows (QSMnet's 32³ holds whole
/// volumes and lay 65 MB above the line through the deeper shapes), so the line is fitted where
/// a network's chains form, which is where brain volumes are; a shallower volume is
/// over-predicted (safe).
std::vector<std::array<std::size_t, 3>> default_wasm_measure_shapes(const ModelSpec& spec);

/// Least-squares line through (x, y) points and the upper envelope memory.md M2 needs.
struct LinearFit {
  double intercept = 0.0;
  double slope = 0.0;
  double max_abs_residual = 0.0;
  std::uint64_t fixed_bytes = 0;      // envelope: every point at or below it
  std::uint64_t bytes_per_voxel = 0;  // envelope slope: ceil(slope), at least 0
};
/// Throws Error{InvalidInput} for fewer than 2 distinct x values.
LinearFit fit_fixed_plus_per_voxel(const std::vector<std::uint64_t>& voxels, const std::vector<std::int64_t>& bytes);

/// The wasm32 figures' fit (NetworkMemory::wasm_*): the same envelope over the linear memory's
/// growth, its fixed part then raised by the line's scatter (max_abs_residual, or 0.5 % of the
/// largest growth fitted where that is more, rounded up to 64 KiB wasm pages) and one page more.
/// The memory grows in whole pages at the top of the heap, wherever malloc placed the last block,
/// so a shape between or beyond the fitted ones strays from the line by about as much as the
/// fitted ones did: without it, a held-out shape came out 0.1 % above the envelope (xQSM,
/// docs/wasm.md). Throws as fit_fixed_plus_per_voxel.
LinearFit fit_wasm_heap_growth(const std::vector<std::uint64_t>& voxels, const std::vector<std::int64_t>& bytes);

/// The NetworkMemory as JSON (the reference's field names), with the measurement's points.
std::string to_json_string(const MemoryMeasurement& m, int indent = 2);

}  // namespace qsmcore
