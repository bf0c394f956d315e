#include "cli/wasm_tiled_measure.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cli/wasm_measure.h"
#include "qsmcore/error.h"
#include "qsmcore/tiling.h"

namespace qsmcore::cli {

WasmTiledRun fit_wasm_tiled_run(const ModelSpec& spec, const std::vector<WasmTiledPoint>& points) {
  const auto net = [](const WasmTiledPoint& p) {
    return static_cast<double>(p.rise_bytes) - static_cast<double>(p.volume_bytes);
  };
  // The pair: a one-tile run and a run with more tiles in flight at its patch.
  const WasmTiledPoint* one = nullptr;
  const WasmTiledPoint* more = nullptr;
  for (const WasmTiledPoint& p : points)
    if (p.in_flight == 1) one = &p;
  if (one)
    for (const WasmTiledPoint& p : points)
      if (p.in_flight > 1 && p.patch == one->patch) more = &p;
  if (!one || !more)
    throw Error(ErrorKind::InvalidInput,
                "fit_wasm_tiled_run: needs a run with one tile in flight and one with more at the same patch");
  const double tile = (net(*more) - net(*one)) / static_cast<double>(more->in_flight - 1);
  const double held = net(*one) - tile;
  // One tile's bytes at each patch, fitted as the native tile cost is (fit_tile_cost: the line
  // from the patch of core 32 up, the patches up to its first kept as points: at core 24 a tile
  // costs more a voxel than the line gives, 0.98 of qsmcore-invnet's rise from the line alone).
  std::vector<TilePoint> tiles;
  std::vector<double> nets;  // the line's runs' heap above their volumes
  const std::size_t edge = tile_patch_size(TileConfig{32, 8}, tile_divisor(spec));
  const std::uint64_t from = voxel_count({edge, edge, edge});
  for (const WasmTiledPoint& p : points) {
    if (p.in_flight <= 1) continue;
    const double bytes = (net(p) - held) / static_cast<double>(p.in_flight);
    const auto tile = static_cast<std::uint64_t>(std::ceil(std::max(bytes, 0.0)));
    // Two cores may pad to one patch (QSMnet's divisor 16: cores 24 and 32 both 48³): one point,
    // the larger tile.
    const auto same =
        std::find_if(tiles.begin(), tiles.end(), [&](const TilePoint& t) { return t.voxels == p.voxels(); });
    if (same == tiles.end())
      tiles.push_back({p.voxels(), tile});
    else
      same->bytes = std::max(same->bytes, tile);
    if (p.voxels() >= from) nets.push_back(net(p));
  }
  const TileCost line = fit_tile_cost(spec, tiles);
  WasmTiledRun run;
  run.tile_bytes_per_voxel = line.bytes_per_voxel;
  run.tile_fixed_bytes = line.fixed_bytes;
  run.tile_small = line.small;
  std::nth_element(nets.begin(), nets.begin() + static_cast<std::ptrdiff_t>(nets.size() / 2), nets.end());
  const double scatter = kTiledRiseScatter * nets[nets.size() / 2];
  run.held_bytes = static_cast<std::uint64_t>(std::ceil(std::max(held + scatter, 0.0)));
  return run;
}

std::uint64_t predicted_tiled_rise(const WasmTiledRun& run, const WasmTiledPoint& p) {
  const std::uint64_t tile = run.tile_cost().bytes({p.patch, p.patch, p.patch});
  return p.volume_bytes + run.held_bytes + static_cast<std::uint64_t>(std::max<std::int64_t>(p.in_flight, 1)) * tile;
}

WasmTiledPoint measure_wasm_tiled_point(const std::string& web_run, const std::string& build, const ModelSpec& spec,
                                        const std::string& model, const std::string& field, const std::string& mask,
                                        std::size_t core, int threads) {
  // web_run.js finds the build through QSM_WASM_DIR; the child inherits it.
  ::setenv("QSM_WASM_DIR", build.c_str(), 1);
  const std::vector<std::string> argv{"node",
                                      web_run,
                                      std::string(spec.id),
                                      "--model",
                                      model,
                                      "--field",
                                      field,
                                      "--mask",
                                      mask,
                                      "--tile",
                                      std::to_string(core) + ",8",
                                      "--threads",
                                      std::to_string(threads)};
  const nlohmann::json j = run_node_driver(argv);
  try {
    WasmTiledPoint p;
    p.core = core;
    p.threads = threads;
    p.patch = j.at("plan").at("patch").at(0).get<std::size_t>();
    p.in_flight = j.at("reply").at("tiles_in_flight").get<std::int64_t>();
    p.rise_bytes = j.at("heap").at("break_rise_bytes").get<std::uint64_t>();
    const auto dims = j.at("plan").at("dims").get<std::array<std::uint64_t, 3>>();
    // The phantom's field is in ppm: the wrapper reads it in place (no copy).
    p.volume_bytes = j.at("plan").at("inputs_bytes").get<std::uint64_t>() +
                     tiled_wrapper_bytes(spec, dims[0] * dims[1] * dims[2], false);
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Internal, command_text(argv) + ": unreadable result: " + e.what());
  }
}

}  // namespace qsmcore::cli
