// Tile budgeting (memory.md §4, §7 M7): how big one tile of a network is in memory and how many
// may run at once within a budget. Two sets of functions:
//  - the reference's compatibility functions (QSM.rs inversion::tiled), one constant of
//    1100 B/voxel for every network, kept so its pinned values still hold (memory.md §4.3);
//  - qsmcore's per-network ones, from the measured figures of the network's ModelSpec.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "qsmcore/model_spec.h"

namespace qsmcore {

/// A tile's core (the voxels it writes back) and halo (context on each side), isotropic.
struct TileConfig {
  std::size_t core = 128;
  std::size_t halo = 8;
  friend bool operator==(const TileConfig&, const TileConfig&) = default;
};

// ---- The reference's constants and functions ------------------------------------------------

inline constexpr std::uint64_t kActivationBytesPerPatchVoxel = 1100;
inline constexpr std::uint64_t kWasmTileActivationBudget = 1'500'000'000;
inline constexpr std::uint64_t kWasmMaxPatchActivationBytes = 2'500'000'000;

/// Edge of the padded patch: ceil((max(core, 1) + 2·halo) / d)·d (d = 0 counts as 1).
std::size_t tile_patch_size(TileConfig cfg, std::size_t divisor);
/// p³ · 1100, saturating.
std::uint64_t patch_activation_bytes(std::size_t p);
/// Largest p with p³ · 1100 ≤ 2.5e9 (131).
std::size_t max_wasm_patch_edge();
/// Throws Error{OutOfBudget} when the patch (rounded up to d) exceeds max_wasm_patch_edge(),
/// naming the patch ("144³") and the largest core that fits, or "reduce the halo".
void check_wasm_patch_fits(TileConfig cfg, std::size_t divisor);
/// max(1, floor(1.5e9 / ((core + 2·halo)³ · 1100))), with the unrounded patch.
std::size_t tiles_within_wasm_budget(TileConfig cfg);

// ---- The shape a network sees -------------------------------------------------------------

/// The spatial shape of the tensor a registry network's graph sees when its wrapper runs it on
/// the whole of `volume` (no tile or window request), in the order of that tensor's own spatial
/// axes: what `ModelSpec::inference_bytes` and `peak_bytes` take. The wrappers themselves pad
/// with it (src/networks/), so it cannot drift from what they do. `volume` is (x, y, z) voxels of
/// what the wrapper pads, which for some networks is not the input volume:
///  - BFRnet, xQSM, QSMnet/QSMnet+, IR2QSM, qsmcore-invnet, LPCNN, NeXtQSM: the input volume;
///    each axis rounded up to pad_multiple (x, y, z). MoDL-QSM: each axis rounded down to even
///    (its authors drop the first slice of an odd axis; 0 for an axis of one voxel).
///  - iQSM, iQFM: the input volume; iQSM+: its crop, the bounding box of the mask eroded by a
///    3-voxel sphere grown by 16 voxels per side within the volume; rounded up to 16.
///  - SUSEP-Net: the volume rounded up to 8; χ-sepnet, R2PRIMEnet: their 192×192×128 window
///    rounded up to 16, each axis capped at the volume rounded up to 16.
///  - HD-BET: the magnitude's non-zero bounding box resampled to 1 mm (x, y, z); its window
///    (192, 192, 96), each axis capped at that shape rounded up to (32, 32, 16); returned in the
///    graph's (z, y, x) order.
///  - SynthSeg 1.0/2.0: the volume at 1 mm in RAS order (axes permuted to R, A, S); each axis
///    rounded up to 32 and at least 128.
///  - QSMGAN, AutoQSM, RS2-Net run a fixed patch read from their graph: pass it as `fixed_patch`
///    (in the graph's order); it is returned as is. Without it they throw Error{InvalidInput}.
/// Throws Error{InvalidInput} for a zero extent.
std::array<std::size_t, 3> network_input_shape(const ModelSpec& spec, std::array<std::size_t, 3> volume,
                                               std::optional<std::array<std::size_t, 3>> fixed_patch = std::nullopt);
/// True for the networks whose graph takes a fixed patch (QSMGAN, AutoQSM, RS2-Net).
bool has_fixed_patch(const ModelSpec& spec);

// ---- qsmcore: per network -------------------------------------------------------------------

/// The spatial multiple a network's tile patch is rounded up to: its size_divisor and pad
/// multiples, whichever is largest.
std::size_t tile_divisor(const ModelSpec& spec);
/// Native bytes of one more tile of `spec` in flight with this config: tile_cost() (the native
/// figures, native_tile_fixed_bytes + native_tile_bytes_per_voxel × voxels) for its padded patch.
/// Throws Error{InvalidInput} for a network not run tiled, Error{NotFound} when not measured.
std::uint64_t tile_bytes(const ModelSpec& spec, TileConfig cfg);
/// The padded patches a tiled network's native tile cost is measured at (`qsm measure --all`):
/// those of cores 16, 24, 32, 48 and 64 with halo 8, each once, as cubes.
std::vector<std::array<std::size_t, 3>> tile_cost_patches(const ModelSpec& spec);
/// The native tile cost from measured runs (voxels of a patch, the run's peak above the plan):
/// the line through the points from the patch of core 32 (halo 8) up, slope rounded up and fixed
/// part raised until no point lies above it; the points up to and including that patch as
/// TileCost::small (at most 3). Throws Error{InvalidInput} with fewer than two distinct points
/// on the line or more than three below it.
TileCost fit_tile_cost(const ModelSpec& spec, std::vector<TilePoint> runs);
/// Tiles that may run at once natively: min(threads, ⌊(budget − held) / tile_bytes⌋), where
/// held = the resident model + the inference's fixed part (the plan, shared by the tiles) +
/// `wrapper_bytes` (the caller's whole-volume buffers). budget 0 = unlimited (threads). Throws
/// Error{OutOfBudget} when not even one tile fits, with the largest core that would.
std::size_t tile_concurrency(const ModelSpec& spec, TileConfig cfg, std::uint64_t budget, std::size_t threads,
                             std::uint64_t wrapper_bytes = 0);
/// The tile cost as the seed defines it, measured in wasm32: the slope of the linear memory's
/// high-water against a tile's padded patch voxels with one run in flight, per voxel, from the
/// generated table src/models/measured_wasm_tiles.h (`qsm measure --all --wasm BUILD
/// --wasm-tiles FILE`): ModelSpec::tile_bytes_per_voxel, the seed's field. nullopt for a network
/// not run tiled or not measured so yet. JSON: `tile_bytes_per_voxel` (also
/// `wasm_tile_bytes_per_voxel`), beside the native `native_tile_bytes_per_voxel` and
/// `native_tile_fixed_bytes` (memory.md §4.5).
std::optional<std::uint64_t> wasm_tile_bytes_per_voxel(const ModelSpec& spec);
/// Bytes of one more tile in flight on wasm32 with this config, for its padded patch: the tile
/// line of the measured wasm32 tiled runs (ModelSpec::wasm_tiled_run, tile_fixed_bytes +
/// tile_bytes_per_voxel × voxels) where measured, else wasm_tile_bytes_per_voxel × voxels.
/// Throws Error{InvalidInput} for a network not run tiled, Error{NotFound} when it has no wasm32
/// figures.
std::uint64_t wasm_tile_bytes(const ModelSpec& spec, TileConfig cfg);
/// Tiles in flight on wasm32: min(pool, max(1, ⌊1.5e9 / per⌋)), the reference's wasm activation
/// budget spent with this network's own figure instead of 1100 B/voxel: per = wasm_tile_bytes,
/// or tile_bytes (the native figure) for a network not measured in wasm32. With a `budget`
/// (bytes above what the caller holds; 0 = none) also at most what fits in it beside the
/// wasm32 run's held part and `wrapper_bytes`, ⌊(budget − held − wrapper) / per⌋ (the terms
/// wasm_tiled_peak_bytes counts), or where the wasm32 run is not measured what
/// tile_concurrency(spec, cfg, budget, that count, wrapper_bytes) allows — and at least 1 where
/// not even one tile fits (the caller refuses, or the run's plans decide). The web page's tile
/// plan lowers its tiles in flight by this rule.
std::size_t wasm_tiles_in_flight(const ModelSpec& spec, TileConfig cfg, std::size_t pool, std::uint64_t budget = 0,
                                 std::uint64_t wrapper_bytes = 0);
/// What a tiled network's wrapper holds beside its tiles for an input volume of `voxels`
/// (memory.md §4.4): the output volume, the field's copy in ppm where it is given in another
/// unit (`field_copy`; a field in ppm is read in place) and, for qsmcore-invnet, its TKD prior,
/// 8 bytes a voxel each, + 4 KiB. The `wrapper_bytes` a host passes to tile_concurrency.
/// Throws Error{InvalidInput} for a network not run tiled.
std::uint64_t tiled_wrapper_bytes(const ModelSpec& spec, std::uint64_t voxels, bool field_copy = true);
/// What a tiled network's wrapper holds at most before its first tile runs, for an input volume
/// of `volume` (x, y, z) voxels (memory.md §4.4). qsmcore-invnet makes its TKD prior there: the
/// field's ppm copy where `field_copy`, the copy of the field TKD is given, the masked copy that
/// becomes the prior, the FFT's real buffer (f64 volumes) and its half spectrum (complex f64)
/// with the dipole kernel (f64), (x/2 + 1)·y·z values each, on the unpadded volume, + 4 KiB.
/// The other tiled networks do nothing there beyond tiled_wrapper_bytes: 0. Throws
/// Error{InvalidInput} for a network not run tiled.
std::uint64_t tiled_prepare_bytes(const ModelSpec& spec, std::array<std::size_t, 3> volume, bool field_copy = true);
/// A tiled run's whole peak natively, from the registry's figures alone (memory.md §4.4): the
/// resident model + the inference's fixed part (the plan the tiles share) + the larger of the
/// wrapper's step before the tiles (tiled_prepare_bytes) and the tiles' phase
/// (tiled_wrapper_bytes + in_flight × tile_bytes). `in_flight`: the tiles run at once
/// (tile_concurrency's answer, at most the tiles whose core holds a mask voxel). The tiled
/// wrappers reserve the same terms; bench/tile_budget.sh and tests/tile_growth check it against
/// a run's accounted peak (+5 %/−0 %). Throws as tile_bytes does.
std::uint64_t tiled_peak_bytes(const ModelSpec& spec, TileConfig cfg, std::array<std::size_t, 3> volume,
                               std::size_t in_flight, bool field_copy = true);
/// A tiled run's heap in wasm32 from the registry's figures alone (memory.md §4.6): the wasm32
/// run's held part (ModelSpec::wasm_tiled_run) + the larger of the wrapper's step before the
/// tiles (tiled_prepare_bytes) and the tiles' phase (tiled_wrapper_bytes + in_flight ×
/// wasm_tile_bytes). Add the input volumes the caller makes in the heap (the web page: a float32
/// and an f64 copy of each). Measured against the program break's rise over the page's own
/// tiled runs (tests/wasm/web_tiled_run_test.js, +5 %/−0 %). Throws Error{InvalidInput} for a
/// network not run tiled, Error{NotFound} where its wasm32 tiled run is not measured.
std::uint64_t wasm_tiled_peak_bytes(const ModelSpec& spec, TileConfig cfg, std::array<std::size_t, 3> volume,
                                    std::size_t in_flight, bool field_copy = true);

// One budget (memory.md §4.4): the tiled wrappers (src/networks/field_nets.cpp) ask for the
// tiles in flight these functions give, natively tile_concurrency(spec, cfg, room, threads,
// tiled_wrapper_bytes(spec, voxels)) with room = the run's budget above what the caller holds,
// on wasm32 wasm_tiles_in_flight(spec, cfg, threads); the run's own plans may lower that, never
// raise it. So a host that budgets with the registry's figures runs what qsmcore runs, and
// tiled_peak_bytes (wasm32: wasm_tiled_peak_bytes) with that count is its estimate of the run's
// peak (the wrappers reserve the native terms).

}  // namespace qsmcore
