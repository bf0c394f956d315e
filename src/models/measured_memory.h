// Measured memory of the registry's networks (memory.md §2): the table the memory measurement
// generates. Until a network has a row here its ModelSpec has no `memory` and no
// `tile_bytes_per_voxel`, and every figure derived from them throws instead of guessing. The
// registry picks rows up by id at compile time, so filling this table is all a measurement
// needs to change.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "qsmcore/model_spec.h"

namespace qsmcore::models_detail {

struct MeasuredMemory {
  std::string_view id;
  std::optional<NetworkMemory> memory;
  std::optional<std::uint64_t> tile_bytes_per_voxel;  // only for networks run tiled
};

// No network has been measured with qsmcore's runtime yet (the reference's coefficients are not
// published, and its runtime is not ours).
inline constexpr std::array<MeasuredMemory, 0> kMeasuredMemory{};

constexpr const MeasuredMemory* find_measured_memory(std::string_view id) {
  for (const MeasuredMemory& row : kMeasuredMemory)
    if (row.id == id) return &row;
  return nullptr;
}

}  // namespace qsmcore::models_detail
