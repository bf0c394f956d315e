// Sums over volumes whose value does not depend on the thread count: each plane (or fixed-size
// block) is summed by one thread into its own slot, and the slots are added in order.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/parallel.h"

namespace qsmcore::inversion {

/// K sums over `planes` planes: f(k, sums) adds plane k's values into sums.
template <int K, class F>
std::array<double, K> plane_sums(std::int64_t planes, F&& f) {
  std::vector<std::array<double, K>> part(static_cast<std::size_t>(planes));
  parallel_for(planes, true, [&](std::int64_t k) {
    std::array<double, K> s{};
    f(k, s);
    part[static_cast<std::size_t>(k)] = s;
  });
  std::array<double, K> total{};
  for (const auto& s : part)
    for (std::size_t c = 0; c < static_cast<std::size_t>(K); ++c) total[c] += s[c];
  return total;
}

/// Σ f(q) for q in [0, n), summed in blocks of a fixed size.
template <class F>
double block_sum(std::int64_t n, F&& f) {
  constexpr std::int64_t kBlock = 1 << 15;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  return plane_sums<1>(blocks, [&](std::int64_t b, std::array<double, 1>& s) {
    const std::int64_t end = b * kBlock + kBlock < n ? b * kBlock + kBlock : n;
    double acc = 0.0;
    for (std::int64_t q = b * kBlock; q < end; ++q) acc += f(q);
    s[0] = acc;
  })[0];
}

}  // namespace qsmcore::inversion
