// ROMEO's edge weights (Dymerska et al. 2021, doi:10.1002/mrm.28563; methods.md §4.1): the
// checked view of a RomeoInput, the weight of one edge in [0, 1] (0 = invalid), the 256-bin
// quantisation the region growing sorts by, and the per-voxel bin sums that choose seeds.
// Every voxel v owns three edges, to +x, +y and +z; bins are stored as bytes at 3·v + axis.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "core/accounted_array.h"
#include "qsmcore/unwrap.h"

namespace qsmcore::unwrap {

inline constexpr double kTwoPi = 2.0 * std::numbers::pi;
inline constexpr double kInvTwoPi = 1.0 / kTwoPi;  // a product: a division costs ~15 cycles
inline constexpr int kBins = 256;

/// The integer nearest to y (halves away from 0), as a double. Inline: std::nearbyint is a libm
/// call on baseline x86-64, and this runs once or more per edge and per visited voxel.
inline double round_half_away(double y) {
  if (!(std::abs(y) < 4.5e15)) return std::nearbyint(y);  // huge or NaN: leave it to libm
  return static_cast<double>(static_cast<std::int64_t>(y >= 0.0 ? y + 0.5 : y - 0.5));
}

/// Wraps any finite x to [−π, π] (ties may land on either end; callers only use |·| or rounding).
inline double wrap_any(double x) {
  if (x >= -std::numbers::pi && x <= std::numbers::pi) return x;
  return x - kTwoPi * round_half_away(x * kInvTwoPi);
}

/// `x` moved by the multiple of 2π that brings it nearest to `ref`.
inline double unwrap_to(double x, double ref) {
  return x - kTwoPi * round_half_away((x - ref) * kInvTwoPi);
}

/// A RomeoInput checked (grids, frames, TE ratio) and reduced to raw frame pointers.
struct WeightSource {
  Dims3 dims{0, 0, 0};
  std::array<std::int64_t, 3> stride{1, 0, 0};
  std::int64_t n = 0;
  const double* phase = nullptr;
  const double* magnitude = nullptr;    // null unless the magnitude term is on and given
  const double* second = nullptr;       // null unless the gradient-coherence term is on and given
  const double* mask = nullptr;         // null = every voxel
  const double* seed_second = nullptr;  // the second echo for the seed correction, when given
  double te_ratio = 0.0;
  bool coherence = true;
  bool linearity = true;

  /// In the mask (or no mask) and with a finite phase: a voxel the growth may visit.
  bool usable(std::int64_t v) const { return (mask == nullptr || mask[v] > 0.5) && std::isfinite(phase[v]); }
  /// In the volume's mask, whatever its values (phase linearity looks one voxel further).
  bool in_mask(std::int64_t v) const { return mask == nullptr || mask[v] > 0.5; }
};

/// Checks `in` (Error{InvalidInput} naming what is wrong) and resolves which terms apply: the
/// gradient term needs a second phase, the magnitude term a magnitude.
WeightSource make_weight_source(const RomeoInput& in, const RomeoWeights& w);

/// The weight in [0, 1] of the edge from voxel v to v + stride[axis]; `pos` is v's coordinate
/// along `axis`. 0 for an invalid edge (leaves the volume or the mask, a non-finite input); a
/// valid edge weighs at least 0.1⁴.
double edge_weight(const WeightSource& s, std::int64_t v, int axis, std::int64_t pos);

/// ROMEO's quantisation: 1 (best) … 255 (worst), 0 = invalid.
inline std::uint8_t weight_bin(double w) {
  if (!(w > 0.0)) return 0;
  const int b = static_cast<int>((1.0 - w) * (kBins - 1) + 0.5);  // w in (0, 1]: no overflow
  return static_cast<std::uint8_t>(b < 1 ? 1 : b);
}

/// Every voxel's three edge bins (3·v + axis), computed over planes in parallel, and how many
/// valid edges fall in each bin (what sizes the growth's queue).
struct EdgeBins {
  AccountedArray<std::uint8_t> bins;
  std::array<std::int64_t, kBins> count{};
};
EdgeBins compute_edge_bins(const WeightSource& s);

/// A seed's score: the sum of its three edge bins, an invalid edge counted as 255 (lower = better).
inline int seed_score(const std::uint8_t* bins, std::int64_t v) {
  int s = 0;
  for (int a = 0; a < 3; ++a) {
    const int b = bins[3 * v + a];
    s += b == 0 ? kBins - 1 : b;
  }
  return s;
}

}  // namespace qsmcore::unwrap
