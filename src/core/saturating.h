// Byte arithmetic that saturates at UINT64_MAX instead of wrapping: memory predictions for
// absurd shapes must come out as "too big", never as a small wrapped number.
#pragma once
#include <cstdint>
#include <limits>

namespace qsmcore {

constexpr std::uint64_t kSaturated = std::numeric_limits<std::uint64_t>::max();

inline std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}

inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}

}  // namespace qsmcore
