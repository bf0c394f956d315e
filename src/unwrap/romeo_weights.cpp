// ROMEO's edge weights and voxel quality (Dymerska et al. 2021, doi:10.1002/mrm.28563;
// methods.md §4.1). Each enabled term t contributes a factor 0.1 + 0.9·t. Conventions read in
// ROMEO.jl (weights.jl, voxelquality.jl), written here from the formulas: what differs is that an
// edge is valid only when both of its voxels are in the mask, and that phase linearity treats a
// neighbour outside the mask as a border (0.9), so nothing outside the mask shapes the result.
#include "unwrap/romeo_weights.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "qsmcore/error.h"

namespace qsmcore::unwrap {
namespace weights_detail {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorKind::InvalidInput, "romeo: " + what);
}

void check_frame(const Volume& v, std::int64_t frame, const char* what) {
  if (frame < 0 || frame >= v.frames())
    invalid(std::string(what) + " echo " + std::to_string(frame) + " is out of range (it has " +
            std::to_string(v.frames()) + " echo(es), counted from 0)");
}

void check_grid(const Volume& v, const Volume& phase, const char* what) {
  if (!same_grid(v, phase))
    invalid(std::string("the ") + what + " (" + describe_grid(v) + ") is not on the phase's grid (" +
            describe_grid(phase) + ")");
}

// max(0, 1 − |γ(φa − 2φb + φc)|/2): how well three voxels in a row lie on a line, modulo 2π.
// A non-finite value gives 0.5, as in ROMEO.
[[gnu::always_inline]] inline double triple_linearity(const double* p, std::int64_t a, std::int64_t b, std::int64_t c) {
  const double x = p[a] - 2.0 * p[b] + p[c];
  if (!std::isfinite(x)) return 0.5;
  return std::max(0.0, 1.0 - std::abs(wrap_any(x)) / 2.0);
}

// Phase linearity of edge (v, u = v + st): the product over the triples (v − st, v, u) and
// (v, u, u + st); 0.9 where either outer voxel lies outside the volume or the mask.
[[gnu::always_inline]] inline double linearity(const WeightSource& s, std::int64_t v, std::int64_t u, int axis,
                                               std::int64_t pos) {
  const std::int64_t st = s.stride[axis];
  const bool before = pos >= 1 && s.in_mask(v - st);
  const bool after = pos + 2 < s.dims[axis] && s.in_mask(u + st);
  if (!before || !after) return 0.9;
  return triple_linearity(s.phase, v - st, v, u) * triple_linearity(s.phase, v, u, u + st);
}

// The weight itself, inlined into the loops over the volume (a call per edge costs as much as
// the arithmetic).
[[gnu::always_inline]] inline double weight_of(const WeightSource& s, std::int64_t v, int axis, std::int64_t pos) {
  if (pos + 1 >= s.dims[axis]) return 0.0;
  const std::int64_t u = v + s.stride[axis];
  if (!s.usable(v) || !s.usable(u)) return 0.0;
  const double d = wrap_any(s.phase[v] - s.phase[u]);
  double w = 1.0;
  if (s.coherence) w *= 0.1 + 0.9 * (1.0 - std::abs(d) / std::numbers::pi);
  if (s.second != nullptr) {
    const double d2 = s.second[v] - s.second[u];
    if (!std::isfinite(d2)) return 0.0;
    const double g = std::max(0.0, 1.0 - std::abs(d - wrap_any(d2) * s.te_ratio));
    w *= 0.1 + 0.9 * g;
  }
  if (s.linearity) w *= 0.1 + 0.9 * linearity(s, v, u, axis, pos);
  if (s.magnitude != nullptr) {
    const double a = std::abs(s.magnitude[v]), b = std::abs(s.magnitude[u]);
    if (!std::isfinite(a) || !std::isfinite(b)) return 0.0;
    const double lo = std::min(a, b), hi = std::max(a, b);
    // Two voxels without signal carry no evidence: the term's lowest factor, not an invalid edge.
    const double m = hi > 0.0 ? (lo / hi) * (lo / hi) : 0.0;
    w *= 0.1 + 0.9 * m;
  }
  return w;
}

}  // namespace weights_detail

using weights_detail::invalid;

WeightSource make_weight_source(const RomeoInput& in, const RomeoWeights& w) {
  if (in.phase == nullptr || in.phase->empty()) invalid("no phase was given");
  const Volume& phase = *in.phase;
  weights_detail::check_frame(phase, in.echo, "phase");
  WeightSource s;
  s.dims = phase.dims();
  s.stride = {1, s.dims[0], s.dims[0] * s.dims[1]};
  s.n = phase.voxels();
  s.phase = phase.frame(in.echo).data();
  s.coherence = w.phase_coherence;
  s.linearity = w.phase_linearity;
  if (in.magnitude != nullptr) {
    weights_detail::check_grid(*in.magnitude, phase, "magnitude");
    weights_detail::check_frame(*in.magnitude, in.magnitude_echo, "magnitude");
    if (w.magnitude_coherence) s.magnitude = in.magnitude->frame(in.magnitude_echo).data();
  }
  if (in.second_phase != nullptr) {
    weights_detail::check_grid(*in.second_phase, phase, "second echo's phase");
    weights_detail::check_frame(*in.second_phase, in.second_echo, "second phase");
    if (!(std::isfinite(in.te_ratio) && in.te_ratio > 0.0))
      invalid("a second echo's phase was given without a TE ratio (te_ratio = " + std::to_string(in.te_ratio) +
              "; it must be TE(echo)/TE(second echo) > 0)");
    s.seed_second = in.second_phase->frame(in.second_echo).data();
    if (w.phase_gradient_coherence) s.second = s.seed_second;
    s.te_ratio = in.te_ratio;
  }
  if (in.mask != nullptr) {
    weights_detail::check_grid(*in.mask, phase, "mask");
    if (in.mask->frames() != 1)
      invalid("the mask has " + std::to_string(in.mask->frames()) + " frames; it must have one");
    s.mask = in.mask->data();
  }
  return s;
}

double edge_weight(const WeightSource& s, std::int64_t v, int axis, std::int64_t pos) {
  return weights_detail::weight_of(s, v, axis, pos);
}

EdgeBins compute_edge_bins(const WeightSource& s) {
  EdgeBins out;
  out.bins = AccountedArray<std::uint8_t>(static_cast<std::size_t>(3 * s.n));
  const std::int64_t nx = s.dims[0], ny = s.dims[1], nz = s.dims[2];
  // Counts per plane, added in plane order afterwards: the same totals on any thread count.
  std::vector<std::array<std::int64_t, kBins>> per_plane(static_cast<std::size_t>(nz));
  std::uint8_t* bins = out.bins.data();
  parallel_for(nz, true, [&](std::int64_t k) {
    auto& hist = per_plane[static_cast<std::size_t>(k)];
    hist.fill(0);
    for (std::int64_t j = 0; j < ny; ++j)
      for (std::int64_t i = 0; i < nx; ++i) {
        const std::int64_t v = i + nx * (j + ny * k);
        const std::int64_t pos[3] = {i, j, k};
        for (int a = 0; a < 3; ++a) {
          const std::uint8_t b = weight_bin(weights_detail::weight_of(s, v, a, pos[a]));
          bins[3 * v + a] = b;
          if (b != 0) ++hist[b];
        }
      }
  });
  for (const auto& hist : per_plane)
    for (int b = 0; b < kBins; ++b) out.count[static_cast<std::size_t>(b)] += hist[static_cast<std::size_t>(b)];
  return out;
}

}  // namespace qsmcore::unwrap

namespace qsmcore {

// Each voxel computes its six edges itself (every edge twice over the volume): the output is the
// only volume-sized allocation, 8 bytes per voxel.
Volume romeo_voxel_quality(const RomeoInput& in, const RomeoWeights& w) {
  const unwrap::WeightSource s = unwrap::make_weight_source(in, w);
  Volume q = Volume::zeros(s.dims, in.phase->geometry());
  const std::int64_t nx = s.dims[0], ny = s.dims[1], nz = s.dims[2];
  double* out = q.data();
  parallel_for(nz, true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < ny; ++j)
      for (std::int64_t i = 0; i < nx; ++i) {
        const std::int64_t v = i + nx * (j + ny * k);
        const std::int64_t pos[3] = {i, j, k};
        double sum = 0.0;
        for (int a = 0; a < 3; ++a) {
          sum += unwrap::weights_detail::weight_of(s, v, a, pos[a]);
          if (pos[a] > 0) sum += unwrap::weights_detail::weight_of(s, v - s.stride[a], a, pos[a] - 1);
        }
        out[v] = sum / 6.0;
      }
  });
  return q;
}

}  // namespace qsmcore
