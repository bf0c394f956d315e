// Tile budgeting (memory.md §4, §7 M7): how big one tile of a network is in memory and how many
// may run at once within a budget. Two sets of functions:
//  - the reference's compatibility functions (QSM.rs inversion::tiled), one constant of
//    1100 B/voxel for every network, kept so its pinned values still hold (memory.md §4.3);
//  - qsmcore's per-network ones, from the measured figures of the network's ModelSpec.
#pragma once
#include <cstddef>
#include <cstdint>

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

// ---- qsmcore: per network -------------------------------------------------------------------

/// The spatial multiple a network's tile patch is rounded up to: its size_divisor and pad
/// multiples, whichever is largest.
std::size_t tile_divisor(const ModelSpec& spec);
/// Bytes of one tile of `spec` in flight with this config: tile_cost() for its padded patch.
/// Throws Error{InvalidInput} for a network not run tiled, Error{NotFound} when not measured.
std::uint64_t tile_bytes(const ModelSpec& spec, TileConfig cfg);
/// Tiles that may run at once natively: min(threads, ⌊(budget − held) / tile_bytes⌋), where
/// held = the resident model + the inference's fixed part (the plan, shared by the tiles) +
/// `wrapper_bytes` (the caller's whole-volume buffers). budget 0 = unlimited (threads). Throws
/// Error{OutOfBudget} when not even one tile fits, with the largest core that would.
std::size_t tile_concurrency(const ModelSpec& spec, TileConfig cfg, std::uint64_t budget, std::size_t threads,
                             std::uint64_t wrapper_bytes = 0);
/// Tiles in flight on wasm32: min(pool, max(1, ⌊1.5e9 / tile_bytes⌋)), the reference's wasm
/// activation budget spent with this network's own figure instead of 1100 B/voxel.
std::size_t wasm_tiles_in_flight(const ModelSpec& spec, TileConfig cfg, std::size_t pool);

}  // namespace qsmcore
