// PCG32 (O'Neill 2014, pcg32_random_r): a small seeded generator whose stream is the same on
// every platform and standard library, unlike std::normal_distribution.
#pragma once
#include <cmath>
#include <cstdint>
#include <numbers>

namespace qsmcore::physics {

class Pcg32 {
 public:
  explicit Pcg32(std::uint64_t seed, std::uint64_t stream = 54) : inc_((stream << 1u) | 1u) {
    next();
    state_ += seed;
    next();
  }
  std::uint32_t next() {
    const std::uint64_t old = state_;
    state_ = old * 6364136223846793005ULL + inc_;
    const auto xorshifted = static_cast<std::uint32_t>(((old >> 18u) ^ old) >> 27u);
    const auto rot = static_cast<std::uint32_t>(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
  }
  /// Uniform in (0, 1).
  double uniform() { return (static_cast<double>(next()) + 0.5) / 4294967296.0; }
  /// Standard normal (Box–Muller; the second value is discarded for simplicity).
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
  }

 private:
  std::uint64_t state_ = 0;
  std::uint64_t inc_;
};

}  // namespace qsmcore::physics
