// nlohmann-json serialisation of the registry types (found by ADL). Internal: nlohmann-json is
// a private dependency of the library, so the public header offers to_json_string instead.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include "qsmcore/model_spec.h"

namespace qsmcore {

void to_json(nlohmann::json& j, const WeightFile& file);
void to_json(nlohmann::json& j, const NetworkMemory& memory);
void to_json(nlohmann::json& j, const ModelSpec& spec);

}  // namespace qsmcore
