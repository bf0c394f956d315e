// `qsm measure --wasm BUILD`: a network's wasm32 figures (NetworkMemory::wasm_fixed_bytes and
// wasm_bytes_per_voxel), measured in the WebAssembly build. Each point is a fresh Node process
// running BUILD/qsm-measure-node.js (src/wasm/measure_main.cpp): the linear memory never shrinks,
// so points cannot share a process. The figure is the growth of the memory's size (what a host
// reads as HEAP8.buffer.byteLength) from main's start to the end of load + one run.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace qsmcore::cli {

struct WasmPoint {
  std::array<std::size_t, 3> spatial{};
  std::uint64_t voxels = 0;
  std::int64_t heap_start_bytes = 0;  // memory size when main started
  std::int64_t heap_bytes = 0;        // memory size at the end: the high-water
  std::int64_t growth_bytes = 0;      // heap_bytes − heap_start_bytes
  double seconds = 0.0;               // load + run inside the module
};

struct WasmMeasurement {
  std::vector<WasmPoint> fit;    // the points the figures come from
  std::vector<WasmPoint> check;  // points measured the same way, not used in the fit
  std::uint64_t fixed_bytes = 0;
  std::uint64_t bytes_per_voxel = 0;
  double fit_residual_bytes = 0.0;
  int threads = 1;
  // What the table's fixed part adds to the fit's so that the check points lie under the line
  // too (whole pages): a check is first a validation of the fit (the markdown's error column),
  // then one more measurement the registry's bound must cover. The wasm heap grows where the
  // allocator finds no hole, so a shape between fitted ones can need a few MB more than the line.
  std::uint64_t check_raise_bytes = 0;

  /// The fit's prediction, which the check points validate.
  std::uint64_t predicted_growth(std::uint64_t voxels) const { return fixed_bytes + bytes_per_voxel * voxels; }
  /// The registry's fixed part: the fit's, raised to cover the check points.
  std::uint64_t table_fixed_bytes() const { return fixed_bytes + check_raise_bytes; }
};

/// Runs a Node driver (argv[0] "node") and returns the last line of its output that is a JSON
/// object. Throws Error{Io} naming the command and the driver's last stderr line when it fails,
/// Error{Internal} when it prints no such line.
nlohmann::json run_node_driver(const std::vector<std::string>& argv);
/// The command as one line, for messages.
std::string command_text(const std::vector<std::string>& argv);

/// One point: `node DRIVER_JS [--threads N] [--shape S] FILES...`. No shape: the network's one
/// fixed shape. Throws Error naming the command and the driver's message when it fails.
WasmPoint measure_wasm_point(const std::string& driver_js, const std::vector<std::string>& files,
                             const std::optional<std::array<std::size_t, 3>>& shape, int threads);

/// The points at `fit_shapes` (≥ 3 distinct voxel counts; none for a fixed-shape network) fitted
/// as the native figures are (least squares, slope rounded up, fixed part raised to the highest
/// point) plus the scatter allowance of fit_wasm_heap_growth, then the `check_shapes` measured
/// and left out of the fit.
WasmMeasurement measure_wasm(const std::string& driver_js, const std::vector<std::string>& files,
                             const std::vector<std::array<std::size_t, 3>>& fit_shapes,
                             const std::vector<std::array<std::size_t, 3>>& check_shapes, int threads);

/// A shape between the fit's (about 1.5 times its smallest per axis, rounded up to `multiple`),
/// to validate at: its voxel count differs from every fit shape's.
std::array<std::size_t, 3> held_out_shape(const std::vector<std::array<std::size_t, 3>>& fit_shapes,
                                          std::array<std::size_t, 3> multiple);

/// Markdown: the figures, then each point's measured growth and high-water against the
/// prediction (fit points, then held-out ones), with the prediction's error in %.
std::string wasm_measurement_markdown(const std::string& id, const WasmMeasurement& m);

}  // namespace qsmcore::cli
