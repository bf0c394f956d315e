// ROMEO spatial unwrapping (Dymerska et al. 2021, doi:10.1002/mrm.28563; methods.md §4.1):
// edge weights quantised to 256 bins, then region growing from the best seed along the best
// edge first. A voxel reached from an unwrapped neighbour is moved by the multiple of 2π that
// brings it nearest to that neighbour, so the result differs from the input by exact multiples of
// 2π. Memory above the inputs: the f64 output (8 B/voxel), the bins (3), the queue (4 per valid
// edge, ≤ 12) and a visited bit: at most about 23.2 bytes per voxel.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "core/parallel.h"
#include "qsmcore/error.h"
#include "qsmcore/physics.h"
#include "unwrap/bucket_queue.h"
#include "unwrap/romeo_growth.h"
#include "unwrap/romeo_weights.h"
#include "unwrap/seed_finder.h"

namespace qsmcore::unwrap {
namespace growth_detail {

// Penalty (rad) per 2π offset in the seed correction: ROMEO adds 1/100 per wrap to a difference
// of phase/TE in rad/ms, which only breaks near-ties (e.g. TE₁ = 2·TE₂); ours compares phases at
// TE₁, where a few hundredths of a radian play the same part.
constexpr double kSeedWrapPenalty = 0.05;

// The seed's value: its phase wrapped to (−π, π], or, with a second echo, ROMEO's correction: the
// offsets (o₁ ∈ −2..2, o₂ ∈ −1..1) for which φ₁ + 2πo₁ best matches (φ₂ + 2πo₂)·TE₁/TE₂, so
// that the seed (and with it the region) starts in the absolute 2π class of an offset-free phase.
double seed_value(const WeightSource& s, std::int64_t seed) {
  const double p1 = wrap_phase(s.phase[seed]);
  if (s.seed_second == nullptr || !std::isfinite(s.seed_second[seed])) return p1;
  const double p2 = wrap_phase(s.seed_second[seed]);
  double best = std::numeric_limits<double>::infinity();
  int offset = 0;
  for (int o1 = -2; o1 <= 2; ++o1)
    for (int o2 = -1; o2 <= 1; ++o2) {
      const double d = std::abs((p1 + kTwoPi * o1) - (p2 + kTwoPi * o2) * s.te_ratio) +
                       kSeedWrapPenalty * (std::abs(o1) + std::abs(o2));
      if (d < best) {
        best = d;
        offset = o1;
      }
    }
  return p1 + kTwoPi * offset;
}

class Grower {
 public:
  Grower(const WeightSource& s, const EdgeBins& eb, const RomeoOptions& o, double* out)
      : s_(s), bins_(eb.bins.data()), o_(o), out_(out), visited_(s.n), queue_(eb.count) {}

  void run() {
    const std::int64_t usable = mark_unusable();
    SeedFinder seeds(bins_, visited_, s_.n);
    step_ = std::max<std::int64_t>(1, usable / 100);
    report(0.0);
    for (std::int64_t seed = seeds.next(); seed >= 0; seed = seeds.next()) grow_region(seed, seeds, usable);
    report(1.0);
  }

 private:
  // Voxels never to be visited are marked visited up front, 64 to a word (one thread per word);
  // returns how many are left.
  std::int64_t mark_unusable() {
    parallel_for(visited_.words(), true, [&](std::int64_t w) {
      std::uint64_t bits = 0;
      const std::int64_t end = std::min(s_.n, (w + 1) * 64);
      for (std::int64_t v = w * 64; v < end; ++v)
        if (!s_.usable(v)) bits |= std::uint64_t{1} << (v - w * 64);
      visited_.word(w) = bits;
    });
    std::int64_t unusable = 0;
    for (std::int64_t w = 0; w < visited_.words(); ++w) unusable += std::popcount(visited_.word(w));
    return s_.n - unusable;
  }

  void report(double f) const {
    if (o_.progress) o_.progress(f);
  }

  // ROMEO's threshold for adding a seed: halfway from the seed's mean bin to the worst bin.
  int seed_threshold(std::int64_t seed) const {
    const int sum = bins_[3 * seed] + bins_[3 * seed + 1] + bins_[3 * seed + 2];
    return kBins - static_cast<int>(std::floor((kBins - sum / 3.0) / 2.0));
  }

  void plant(std::int64_t seed) {
    out_[seed] = seed_value(s_, seed);
    visited_.set(seed);
    push_edges(seed);
  }

  // The value that visiting u reads: a queued edge is often popped soon (LIFO within a bin), and
  // the y and z neighbours lie far apart in memory.
  void prefetch_voxel(std::int64_t u) const { __builtin_prefetch(out_ + u); }

  // Queues the valid edges from v to its unvisited neighbours. An edge that leaves the volume
  // has bin 0, including the +x edge of the last voxel of a row that would reach the next row.
  void push_edges(std::int64_t v) {
    for (int a = 0; a < 3; ++a) {
      const std::int64_t st = s_.stride[a];
      const std::uint8_t fwd = bins_[3 * v + a];
      if (fwd != 0 && !visited_.test(v + st)) {
        prefetch_voxel(v + st);
        queue_.push(static_cast<std::uint32_t>(3 * v + a), fwd);
      }
      if (v >= st) {
        const std::uint8_t back = bins_[3 * (v - st) + a];
        if (back != 0 && !visited_.test(v - st)) {
          prefetch_voxel(v - st);
          queue_.push(static_cast<std::uint32_t>(3 * (v - st) + a), back);
        }
      }
    }
  }

  void grow_region(std::int64_t seed, SeedFinder& seeds, std::int64_t usable) {
    plant(seed);
    int planted = 1;
    int threshold = seed_threshold(seed);
    while (!queue_.empty()) {
      if (planted < o_.max_seeds && queue_.min_bin() > threshold) {
        const std::int64_t extra = seeds.next();
        if (extra >= 0) {
          plant(extra);
          ++planted;
          threshold = seed_threshold(extra);
          continue;
        }
      }
      const std::uint32_t e = queue_.pop();
      const std::int64_t v = e / 3, u = v + s_.stride[e % 3];
      const bool v_done = visited_.test(v), u_done = visited_.test(u);
      if (v_done && u_done) continue;
      const std::int64_t fresh = v_done ? u : v, old = v_done ? v : u;
      out_[fresh] = unwrap_to(out_[fresh], out_[old]);
      visited_.set(fresh);
      push_edges(fresh);
      if (++done_ % step_ == 0) report(static_cast<double>(done_) / static_cast<double>(usable));
    }
  }

  const WeightSource& s_;
  const std::uint8_t* bins_;
  const RomeoOptions& o_;
  double* out_;
  VisitedBits visited_;
  BucketQueue<kBins> queue_;
  std::int64_t step_ = 1;
  std::int64_t done_ = 0;
};

}  // namespace growth_detail

void romeo_unwrap_into(const RomeoInput& in, const RomeoOptions& o, std::span<double> out) {
  const WeightSource s = make_weight_source(in, o.weights);
  QSM_ASSERT(static_cast<std::int64_t>(out.size()) == s.n, "romeo: output frame of the wrong size");
  if (3 * s.n > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()))
    throw Error(ErrorKind::Unsupported,
                "romeo: " + describe_grid(*in.phase) + " has more than 1431655765 voxels, beyond the 32-bit edge ids");
  if (o.max_seeds < 1)
    throw Error(ErrorKind::InvalidInput,
                "romeo: max_seeds must be at least 1 (got " + std::to_string(o.max_seeds) + ")");
  const EdgeBins eb = compute_edge_bins(s);
  double* dst = out.data();
  parallel_for(s.n, true, [&](std::int64_t v) { dst[v] = s.usable(v) ? s.phase[v] : 0.0; });
  growth_detail::Grower(s, eb, o, dst).run();
}

}  // namespace qsmcore::unwrap

namespace qsmcore {

Volume romeo_unwrap(const RomeoInput& in, const RomeoOptions& o) {
  (void)unwrap::make_weight_source(in, o.weights);  // checks before the output is allocated
  Volume out = Volume::zeros(in.phase->dims(), in.phase->geometry());
  unwrap::romeo_unwrap_into(in, o, out.frame(0));
  return out;
}

}  // namespace qsmcore
