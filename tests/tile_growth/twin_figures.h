// A registry network's figures re-measured on the twin in QSM_TWINS_DIR, the way `qsm measure
// --all` measures the registry's (measure_cmd.cpp, measure_native_tile), so that a tiled run of
// the twin can be held to them: the tests of this folder run reduced twins, whose figures are not
// the registry's (those are measured on the full-size twins).
#pragma once
#include <string>
#include <vector>

#include "qsmcore/measure.h"
#include "qsmcore/model_spec.h"
#include "qsmcore/tiling.h"

namespace qsmtest {

// `spec` with the NetworkMemory and the native tile cost of the twin `paths`: each graph run alone
// (measure_network_memory, its run peak above the plan) at the patches of tile_cost_patches, the
// envelope line through them (fit_tile_cost) as native_tile_fixed_bytes +
// native_tile_bytes_per_voxel, and the memory row's fixed part (resident + plan) from the same
// points. At 1 thread: a tile's graph run gets one thread when the tiles in flight share two.
inline qsmcore::ModelSpec with_twin_tile_cost(const qsmcore::ModelSpec& spec, const std::vector<std::string>& paths) {
  using namespace qsmcore;
  MeasureOptions mo;
  mo.threads = 1;
  mo.shapes = tile_cost_patches(spec);
  const MemoryMeasurement m = measure_network_memory(paths, mo);
  std::vector<TilePoint> runs;
  for (const auto& p : m.points) runs.push_back({p.voxels, static_cast<std::uint64_t>(p.run_peak_bytes)});
  const TileCost cost = fit_tile_cost(spec, runs);
  ModelSpec twin = spec;
  twin.memory = m.memory;
  twin.native_tile_bytes_per_voxel = cost.bytes_per_voxel;
  twin.native_tile_fixed_bytes = cost.fixed_bytes;
  twin.native_tile_small = cost.small;
  return twin;
}

}  // namespace qsmtest
