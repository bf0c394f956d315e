// `qsm measure --all --wasm BUILD --wasm-tiles FILE`, second half: a tiled network's whole tiled
// run in wasm32 (ModelSpec::wasm_tiled_run, memory.md §4.6). Each point is one Node process
// running tools/wasm/web_run.js, the web page's own tiled run (qsm_web_tile_plan, then
// qsm_web_run with a tile) on a head phantom, and reads the program break's rise over it: the
// heap the run took (emscripten's dlmalloc never trims). The linear memory's growth would hide
// the 7.2 MB of free room the module starts with (docs/wasm.md, "Whole tiled runs").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "qsmcore/model_spec.h"

namespace qsmcore::cli {

/// One tiled run: its padded patch, the tiles it had in flight, the break's rise and the
/// volumes the run's heap holds beside the network (the input volumes the page makes plus
/// tiled_wrapper_bytes), which the fit takes off.
struct WasmTiledPoint {
  std::size_t core = 0;
  std::size_t patch = 0;  // edge of the cubic padded patch
  int threads = 0;
  std::int64_t in_flight = 0;
  std::uint64_t rise_bytes = 0;
  std::uint64_t volume_bytes = 0;
  std::uint64_t voxels() const { return static_cast<std::uint64_t>(patch) * patch * patch; }
};

/// The break's rise moves between runs of the same request by up to 1.6 % (xQSM at 32,8 on a 64³
/// head, 131.99 and 134.08 MB, the machine busy; repeated on a quiet one it is the same to the
/// byte): the held part is raised by this share of the median run's heap above its volumes.
inline constexpr double kTiledRiseScatter = 0.02;

/// The held part and the tile line from tiled runs on one volume: one run with one tile in flight
/// and one with several at the same patch give one tile's cost there (their difference) and the
/// held part (the one-tile run less it); each run with several in flight then gives a tile's cost
/// at its patch, (rise − volumes − held) / in flight, and those are fitted as `spec`'s native tile
/// cost is (fit_tile_cost: a line from the patch of core 32 (halo 8) up, slope rounded up, fixed
/// part raised until no point lies above it, memory.md M2). Smaller patches are measured but
/// below the line's range: their patches cost more a voxel, and wasm32 keeps no points for them
/// yet. Last, the held part is raised by kTiledRiseScatter of the median line run's heap above
/// its volumes. Throws Error{InvalidInput} without such a pair or with fewer than two patches on
/// the line.
WasmTiledRun fit_wasm_tiled_run(const ModelSpec& spec, const std::vector<WasmTiledPoint>& points);

/// The run's heap the fit predicts for a point: volumes + held + in flight × the tile line.
std::uint64_t predicted_tiled_rise(const WasmTiledRun& run, const WasmTiledPoint& p);

/// One point: `node WEB_RUN ID --model MODEL --field FIELD --mask MASK --tile CORE,8 --threads N`
/// with QSM_WASM_DIR=BUILD. `wrapper_bytes` is tiled_wrapper_bytes for the volume. Throws
/// Error{Io} naming the command when it fails.
WasmTiledPoint measure_wasm_tiled_point(const std::string& web_run, const std::string& build, const ModelSpec& spec,
                                        const std::string& model, const std::string& field, const std::string& mask,
                                        std::size_t core, int threads);

}  // namespace qsmcore::cli
