// float16 / bfloat16 <-> float conversions (Cast, Max/Min on float16, test comparisons).
#pragma once
#include <cstdint>

#include "core/bit_cast.h"

namespace qsmcore::graph::ops {

/// IEEE half -> float (exact) and float -> half (round to nearest even).
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
/// bfloat16 -> float (exact) and float -> bfloat16 by truncation (NaN kept quiet), as the
/// ONNX 1.12 reference and its Cast test data do.
inline float bf16_to_float(std::uint16_t b) { return qsmcore::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }
std::uint16_t float_to_bf16(float f);

}  // namespace qsmcore::graph::ops
