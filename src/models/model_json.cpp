// JSON form of a ModelSpec: the reference's serde field names (enums as their Rust spelling,
// absent measurements as null) plus qsmcore's pad_multiple and tiled.
#include "models/model_json.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "qsmcore/tiling.h"

namespace qsmcore {
namespace {

nlohmann::json string_list(std::span<const std::string_view> items) {
  nlohmann::json list = nlohmann::json::array();
  for (std::string_view item : items) list.push_back(item);
  return list;
}

}  // namespace

void to_json(nlohmann::json& j, const WeightFile& file) {
  j = {{"name", file.name},
       {"url", file.url},
       {"sha256", file.sha256},
       {"bytes", file.bytes},
       {"shipped", file.shipped}};
}

void to_json(nlohmann::json& j, const NetworkMemory& m) {
  j = {{"resident_bytes", m.resident_bytes},
       {"load_peak_bytes", m.load_peak_bytes},
       {"inference_fixed_bytes", m.inference_fixed_bytes},
       {"inference_bytes_per_voxel", m.inference_bytes_per_voxel},
       {"wasm_fixed_bytes", m.wasm_fixed_bytes},
       {"wasm_bytes_per_voxel", m.wasm_bytes_per_voxel}};
}

void to_json(nlohmann::json& j, const ModelSpec& spec) {
  nlohmann::json files = nlohmann::json::array();
  for (const WeightFile& f : spec.files) files.push_back(f);
  j = nlohmann::json::object();
  j["id"] = spec.id;
  j["name"] = spec.name;
  j["stage"] = to_string(spec.stage);
  j["status"] = to_string(spec.status);
  j["origin"] = to_string(spec.origin);
  j["description"] = spec.description;
  j["paper"] = spec.paper;
  j["source"] = spec.source;
  j["license"] = spec.license;
  j["files"] = std::move(files);
  j["inputs"] = string_list(spec.inputs);
  j["outputs"] = string_list(spec.outputs);
  j["size_divisor"] = spec.size_divisor;
  j["pad_multiple"] = spec.pad_multiple;
  j["tiled"] = spec.tiled;
  // The tile figures (memory.md §4.5): the seed's tile_bytes_per_voxel with the seed's meaning
  // (wasm32; also under wasm_tile_bytes_per_voxel), and the native affine cost under its own names.
  j["tile_bytes_per_voxel"] = spec.tile_bytes_per_voxel ? nlohmann::json(*spec.tile_bytes_per_voxel) : nlohmann::json();
  j["wasm_tile_bytes_per_voxel"] = j["tile_bytes_per_voxel"];
  j["native_tile_bytes_per_voxel"] =
      spec.native_tile_bytes_per_voxel ? nlohmann::json(*spec.native_tile_bytes_per_voxel) : nlohmann::json();
  j["native_tile_fixed_bytes"] =
      spec.native_tile_bytes_per_voxel ? nlohmann::json(spec.native_tile_fixed_bytes) : nlohmann::json();
  // TileCost::small: [voxels, bytes] of the measured patches up to the line's first.
  const auto small = [](const std::array<TilePoint, 3>& points) {
    nlohmann::json out = nlohmann::json::array();
    for (const TilePoint& p : points)
      if (p.voxels > 0) out.push_back({p.voxels, p.bytes});
    return out;
  };
  j["native_tile_small"] = spec.native_tile_bytes_per_voxel ? small(spec.native_tile_small) : nlohmann::json();
  // A whole tiled run in wasm32 (memory.md §4.6): held part, tile line and small points, or null.
  j["wasm_tiled_run"] = spec.wasm_tiled_run
                            ? nlohmann::json{{"held_bytes", spec.wasm_tiled_run->held_bytes},
                                             {"tile_fixed_bytes", spec.wasm_tiled_run->tile_fixed_bytes},
                                             {"tile_bytes_per_voxel", spec.wasm_tiled_run->tile_bytes_per_voxel},
                                             {"tile_small", small(spec.wasm_tiled_run->tile_small)}}
                            : nlohmann::json();
  j["memory"] = spec.memory ? nlohmann::json(*spec.memory) : nlohmann::json();
  j["available"] = spec.is_available();
}

std::string to_json_string(const ModelSpec& spec, int indent) {
  return nlohmann::json(spec).dump(indent);
}

}  // namespace qsmcore
