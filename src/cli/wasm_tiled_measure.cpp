#include "cli/wasm_tiled_measure.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cli/wasm_measure.h"
#include "qsmcore/error.h"
#include "qsmcore/tiling.h"

namespace qsmcore::cli {

WasmTiledRun fit_wasm_tiled_run(const std::vector<WasmTiledPoint>& points) {
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
  std::vector<std::pair<double, double>> line;  // (voxels, one tile's bytes)
  std::vector<double> nets;
  for (const WasmTiledPoint& p : points)
    if (p.in_flight > 1 && p.core >= 32) {
      line.emplace_back(static_cast<double>(p.voxels()), (net(p) - held) / static_cast<double>(p.in_flight));
      nets.push_back(net(p));
    }
  double sx = 0, sy = 0;
  for (const auto& [x, y] : line) sx += x, sy += y;
  const double k = static_cast<double>(line.size()), mx = sx / k, my = sy / k;
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : line) sxx += (x - mx) * (x - mx), sxy += (x - mx) * (y - my);
  if (line.size() < 2 || sxx <= 0)
    throw Error(ErrorKind::InvalidInput, "fit_wasm_tiled_run: the tile line needs runs at two patches or more");
  WasmTiledRun run;
  run.tile_bytes_per_voxel = sxy > 0 ? static_cast<std::uint64_t>(std::ceil(sxy / sxx)) : 0;
  double fixed = 0;
  for (const auto& [x, y] : line) fixed = std::max(fixed, y - x * static_cast<double>(run.tile_bytes_per_voxel));
  run.tile_fixed_bytes = static_cast<std::uint64_t>(std::ceil(fixed));
  std::nth_element(nets.begin(), nets.begin() + static_cast<std::ptrdiff_t>(nets.size() / 2), nets.end());
  const double scatter = kTiledRiseScatter * nets[nets.size() / 2];
  run.held_bytes = static_cast<std::uint64_t>(std::ceil(std::max(held + scatter, 0.0)));
  return run;
}

std::uint64_t predicted_tiled_rise(const WasmTiledRun& run, const WasmTiledPoint& p) {
  const std::uint64_t tile = run.tile_fixed_bytes + run.tile_bytes_per_voxel * p.voxels();
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
