// ModelSpec: what qsmcore knows about one deep-learning QSM network before touching its weights:
// who made it, which reconstruction stage it implements, which ONNX file(s) hold it and how to
// check them, how its inputs must be padded, and (once measured) how much memory it needs.
// The registry (models.h) is a static table of these; the types are plain values (copy, ==).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace qsmcore {

/// Reconstruction stage a network implements. The order is the reference's (QSM.rs) and is
/// part of the contract: tests pin it.
enum class ModelStage : std::uint8_t {
  PhaseToField,       // wrapped phase -> local field (joint unwrapping + background removal)
  BackgroundRemoval,  // total field -> local field
  DipoleInversion,    // local field -> susceptibility
  SingleStep,         // total field or phase -> susceptibility
  ChiSeparation,      // -> paramagnetic and diamagnetic susceptibility
  BrainExtraction,    // magnitude -> brain mask
  R2PrimeGeneration,  // R2* -> R2'
  Segmentation,       // magnitude -> anatomical labels
};

/// Whether the weights are hosted. A Pending model may still be run from $QSM_MODEL_DIR.
enum class WeightStatus : std::uint8_t { Available, Pending };

/// Framework the weights were trained in, before the ONNX export.
enum class Framework : std::uint8_t { Onnx, PyTorch, TensorFlow, Matlab };

/// How a memory figure is meant: the native heap, or a wasm32 linear memory's growth.
enum class Heap : std::uint8_t { Native, Wasm32 };

/// The reference's (Rust) spelling: "DipoleInversion", "PyTorch", ...
const char* to_string(ModelStage stage);
const char* to_string(WeightStatus status);
const char* to_string(Framework framework);
const char* to_string(Heap heap);

/// One ONNX file a model needs at inference time.
struct WeightFile {
  std::string_view name{};    // file name: the cache key and the name under $QSM_MODEL_DIR
  std::string_view url{};     // "" = not hosted
  std::string_view sha256{};  // lowercase hex; "" = unknown (the file cannot be checked)
  std::uint64_t bytes = 0;    // 0 = unknown
  // Ships with qsmcore itself (the source tree's models/ folder, or share/qsmcore/models beside
  // an installed binary): found without any variable or download.
  bool shipped = false;

  bool is_hosted() const { return !url.empty() && !sha256.empty(); }
  friend bool operator==(const WeightFile&, const WeightFile&) = default;
};

/// Heap one network takes (memory.md §2.1), in bytes. Measured, never estimated: a ModelSpec
/// carries none until the measurement table has a row for it.
struct NetworkMemory {
  std::uint64_t resident_bytes = 0;             // parsed model, while loaded
  std::uint64_t load_peak_bytes = 0;            // high-water of parsing it from nothing
  std::uint64_t inference_fixed_bytes = 0;      // native: one inference, above the resident model
  std::uint64_t inference_bytes_per_voxel = 0;  // native: per voxel of the network's input
  // wasm32: growth of the linear memory's size from the program's start over load + one run
  // (docs/wasm.md); both 0 = not measured in wasm32 (peak_bytes(…, Heap::Wasm32) throws).
  std::uint64_t wasm_fixed_bytes = 0;
  std::uint64_t wasm_bytes_per_voxel = 0;

  friend bool operator==(const NetworkMemory&, const NetworkMemory&) = default;
};

/// One measured tile: a padded patch's voxels and the heap one tile in flight with it holds.
struct TilePoint {
  std::uint64_t voxels = 0;  // 0: unused entry
  std::uint64_t bytes = 0;
  friend bool operator==(const TilePoint&, const TilePoint&) = default;
};

/// The cost of one tile of a network qsmcore runs tiled (memory.md §2.2), fitted by `qsm measure
/// --all` (fit_tile_cost, qsmcore/tiling.h). From a medium patch up it is affine in the patch's
/// voxels: fixed_bytes + voxels · bytes_per_voxel, a line never below a measured point. Small
/// patches do not follow that line: a buffer whose size does not follow the patch holds their
/// peak, so their measured points are kept (`small`, up to and including the line's first
/// patch) and a patch among them costs the chord between the two it lies between, the first
/// point's bytes below it. The run's peak is convex in the patch's voxels (measured: its slope
/// rises to the line's), so a chord lies above it: never an under-count.
struct TileCost {
  std::uint64_t fixed_bytes = 0;      // whatever the patch (0 for a figure given as a slope alone)
  std::uint64_t bytes_per_voxel = 0;  // per voxel of the padded patch
  std::array<TilePoint, 3> small{};   // increasing voxels; none: the line everywhere

  /// Heap of one tile in flight with this padded patch (saturating): the line, or below the last
  /// small point the chord through the small points.
  std::uint64_t bytes(std::array<std::size_t, 3> patch) const;
  friend bool operator==(const TileCost&, const TileCost&) = default;
};

/// A tiled network's whole tiled run in wasm32 (memory.md §4.6), measured by `qsm measure --all
/// --wasm BUILD --wasm-tiles FILE` from the program break's rise over tiled runs of the web
/// page's own entry points (tools/wasm/web_run.js): the heap such a run takes is the input
/// volumes + held_bytes + the wrapper's volumes (tiled_wrapper_bytes) + one tile's bytes per tile
/// in flight: from the patch of core 32 up the line tile_fixed_bytes + tile_bytes_per_voxel per
/// voxel, below it the measured tiles as TileCost::small has them natively (tile_small).
/// Measured, not derived from the native figures: wasm32 kernels, allocator and thread stacks
/// differ, so the native cost under-counts a wasm32 run by up to 13 % (docs/wasm.md).
struct WasmTiledRun {
  std::uint64_t held_bytes = 0;            // the model, its plan, the runtime's pools: shared by the tiles
  std::uint64_t tile_fixed_bytes = 0;      // one more tile in flight: this +
  std::uint64_t tile_bytes_per_voxel = 0;  // this per voxel of its padded patch
  std::array<TilePoint, 3> tile_small{};   // TileCost::small: patches up to the line's first
  /// One tile's cost as a TileCost (its bytes(patch): the line, or the chord below it).
  TileCost tile_cost() const {
    return TileCost{.fixed_bytes = tile_fixed_bytes, .bytes_per_voxel = tile_bytes_per_voxel, .small = tile_small};
  }
  friend bool operator==(const WasmTiledRun&, const WasmTiledRun&) = default;
};

/// Voxels of a spatial shape, saturating at UINT64_MAX like every memory figure.
std::uint64_t voxel_count(std::array<std::size_t, 3> shape);

struct ModelSpec {
  std::string_view id{};  // stable, exact and case-sensitive: "qsmnet-plus"
  std::string_view name{};
  ModelStage stage = ModelStage::DipoleInversion;
  WeightStatus status = WeightStatus::Pending;
  Framework origin = Framework::Onnx;
  std::string_view description{};
  std::string_view paper{};
  std::string_view source{};            // upstream code repository
  std::string_view license{};           // "" grants nothing: never vendor such weights
  std::span<const WeightFile> files{};  // in the order the glue loads them (NeXtQSM: BFR, VJP)
  // Logical inputs, as the glue feeds or consumes them. They are not always the graph's
  // inputs: LPCNN's and MoDL's graphs take one stacked tensor (models.md §1.4).
  std::span<const std::string_view> inputs{};
  std::span<const std::string_view> outputs{};
  std::uint32_t size_divisor = 1;  // the reference's single divisor (0/1 = none)
  // What the whole-volume glue really pads each spatial axis to, in the order of the network's
  // own spatial axes ((z, y, x) for HD-BET): size_divisor is not the whole truth (§1.4).
  std::array<std::uint32_t, 3> pad_multiple{1, 1, 1};
  bool tiled = false;  // qsmcore runs it through the generic tiler (models.md §4)
  // Tile figures, tiled networks only, absent until measured (memory.md §4.5):
  //  - tile_bytes_per_voxel, the seed's field with the seed's meaning: measured in wasm32, the
  //    slope of the linear memory's high-water against patch voxels, one tile in flight
  //    (src/models/measured_wasm_tiles.h); what wasm_tile_bytes/wasm_tiles_in_flight budget with
  //    where wasm_tiled_run is absent;
  //  - native_tile_bytes_per_voxel + native_tile_fixed_bytes (+ native_tile_small): the native
  //    heap one more tile in flight adds (the run above the shared plan), affine in patch voxels
  //    from a medium patch up (src/models/measured_memory.h); what tile_cost(), tile_bytes and
  //    tile_concurrency use.
  std::optional<std::uint64_t> tile_bytes_per_voxel{};
  std::optional<std::uint64_t> native_tile_bytes_per_voxel{};
  std::uint64_t native_tile_fixed_bytes = 0;
  std::array<TilePoint, 3> native_tile_small{};  // TileCost::small
  // A whole tiled run in wasm32 (src/models/measured_wasm_tiles.h): what the web page's tile plan,
  // wasm_tile_bytes, wasm_tiles_in_flight and wasm_tiled_peak_bytes use where measured.
  std::optional<WasmTiledRun> wasm_tiled_run{};
  std::optional<NetworkMemory> memory{};  // absent until measured

  /// Available and every file has a URL and a hash (the reference code's test, stricter than
  /// its documentation's), or ships with qsmcore and has a hash.
  bool is_available() const;
  /// Sum of the known file sizes.
  std::uint64_t total_bytes() const;

  // Memory figures (memory.md §2.3). Each throws Error{NotFound} "memory of 'ID' not measured
  // yet" while `memory` is absent, so no caller budgets with a made-up number. `shape` is the
  // spatial shape the network itself sees; only its voxel count matters. For a whole-volume run
  // pass network_input_shape(spec, volume) (qsmcore/tiling.h): the wrapper's padding, which the
  // wrappers take from that same function; for a tile, its padded patch.
  std::uint64_t resident_bytes() const;
  std::uint64_t inference_bytes(std::array<std::size_t, 3> shape) const;
  std::uint64_t peak_bytes(std::array<std::size_t, 3> shape, Heap heap) const;
  /// The native tile cost (native_tile_*): nullopt for networks not run tiled; throws as above
  /// for a tiled one not measured yet.
  std::optional<TileCost> tile_cost() const;

  /// The views point into static storage (or the caller's), so equality compares contents.
  friend bool operator==(const ModelSpec& a, const ModelSpec& b);
};

/// The model as JSON (the field names of the reference's serde form, plus qsmcore's own).
std::string to_json_string(const ModelSpec& spec, int indent = -1);

}  // namespace qsmcore
