// The measurement as JSON: the NetworkMemory object under the reference's field names (the
// wasm fields are left out, not zeroed: nothing measured them), then how it was measured.
#include <nlohmann/json.hpp>

#include "qsmcore/measure.h"

namespace qsmcore {

std::string to_json_string(const MemoryMeasurement& m, int indent) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json mem;
  mem["resident_bytes"] = m.memory.resident_bytes;
  mem["load_peak_bytes"] = m.memory.load_peak_bytes;
  mem["inference_fixed_bytes"] = m.memory.inference_fixed_bytes;
  mem["inference_bytes_per_voxel"] = m.memory.inference_bytes_per_voxel;
  j["memory"] = mem;
  j["fit_residual_bytes"] = m.fit_residual_bytes;
  j["run_fixed_bytes"] = m.run_fixed_bytes;
  j["run_bytes_per_voxel"] = m.run_bytes_per_voxel;
  j["tile_bytes_per_voxel"] = m.tile_bytes_per_voxel;
  j["backend"] = to_string(m.backend);
  j["threads"] = m.threads;
  j["load_seconds"] = m.load_seconds;
  nlohmann::ordered_json pts = nlohmann::ordered_json::array();
  for (const auto& p : m.points) {
    nlohmann::ordered_json q;
    q["spatial"] = p.spatial;
    q["voxels"] = p.voxels;
    q["input_shapes"] = p.input_shapes;
    q["plan_peak_bytes"] = p.plan_peak_bytes;
    q["plan_bytes"] = p.plan_bytes;
    q["run_peak_bytes"] = p.run_peak_bytes;
    q["predicted_run_bytes"] = p.predicted_run_bytes;
    q["inference_bytes"] = p.inference_bytes;
    q["least_inference_bytes"] = p.least_inference_bytes;
    q["least_budget_bytes"] = static_cast<std::int64_t>(m.memory.resident_bytes) + p.least_inference_bytes;
    q["predicted_inference_bytes"] =
        m.memory.inference_fixed_bytes + m.memory.inference_bytes_per_voxel * p.voxels;
    if (p.process_hwm_bytes >= 0) q["process_hwm_bytes"] = p.process_hwm_bytes;
    q["seconds"] = p.seconds;
    pts.push_back(std::move(q));
  }
  j["points"] = std::move(pts);
  return j.dump(indent);
}

}  // namespace qsmcore
