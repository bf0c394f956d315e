// SeedFinder: lazily refreshed minima of the seed score (see seed_finder.h). Stored minima only
// ever under-estimate (visiting a voxel can only raise a block's minimum), so a block whose exact
// minimum equals the smallest stored value at the top holds the global minimum; otherwise the
// stale entries on the way down are raised and the search starts again.
#include "unwrap/seed_finder.h"

#include <algorithm>

#include "core/parallel.h"
#include "unwrap/romeo_weights.h"

namespace qsmcore::unwrap {

SeedFinder::SeedFinder(const std::uint8_t* bins, const VisitedBits& visited, std::int64_t n)
    : bins_(bins), visited_(visited), n_(n) {
  std::int64_t count = (n + 63) >> kShift;
  levels_.emplace_back(static_cast<std::size_t>(count));
  parallel_for(count, true, [&](std::int64_t b) {
    std::int64_t where = 0;
    levels_[0][static_cast<std::size_t>(b)] = scan_block(b, &where);
  });
  while (count > 64) {
    count = (count + 63) >> kShift;
    levels_.emplace_back(static_cast<std::size_t>(count));
    const std::size_t l = levels_.size() - 1;
    for (std::int64_t i = 0; i < count; ++i) levels_[l][static_cast<std::size_t>(i)] = children_min(l, i);
  }
}

std::uint16_t SeedFinder::scan_block(std::int64_t b, std::int64_t* where) const {
  std::uint16_t best = kNone;
  const std::int64_t end = std::min(n_, (b + 1) << kShift);
  for (std::int64_t v = b << kShift; v < end; ++v) {
    if (visited_.test(v)) continue;
    const auto score = static_cast<std::uint16_t>(seed_score(bins_, v));
    if (score < best) {
      best = score;
      *where = v;
    }
  }
  return best;
}

std::uint16_t SeedFinder::children_min(std::size_t l, std::int64_t i) const {
  const auto& below = levels_[l - 1];
  const std::int64_t end = std::min(static_cast<std::int64_t>(below.size()), (i + 1) << kShift);
  std::uint16_t m = kNone;
  for (std::int64_t c = i << kShift; c < end; ++c) m = std::min(m, below[static_cast<std::size_t>(c)]);
  return m;
}

std::int64_t SeedFinder::next() {
  if (n_ == 0) return -1;
  for (;;) {
    // The first top entry holding the smallest bound, then down the first child holding it.
    const auto& top = levels_.back();
    std::int64_t node = 0;
    for (std::int64_t t = 1; t < static_cast<std::int64_t>(top.size()); ++t)
      if (top[static_cast<std::size_t>(t)] < top[static_cast<std::size_t>(node)]) node = t;
    const std::uint16_t bound = top[static_cast<std::size_t>(node)];
    if (bound == kNone) return -1;
    std::vector<std::int64_t> path{node};  // path[i]: the node at level size − 1 − i
    bool stale = false;
    for (std::size_t l = levels_.size() - 1; l > 0 && !stale; --l) {
      const auto& below = levels_[l - 1];
      const std::int64_t end = std::min(static_cast<std::int64_t>(below.size()), (node + 1) << kShift);
      std::int64_t c = node << kShift;
      while (c < end && below[static_cast<std::size_t>(c)] != bound) ++c;
      stale = c == end;
      if (!stale) path.push_back(node = c);
    }
    std::int64_t where = -1;
    if (!stale) {
      const std::uint16_t exact = scan_block(node, &where);
      levels_[0][static_cast<std::size_t>(node)] = exact;
      if (exact == bound) return where;
    }
    // Raise the bounds on the way back up to the top.
    for (std::size_t i = path.size(); i-- > 0;) {
      const std::size_t l = levels_.size() - 1 - i;
      if (l > 0) levels_[l][static_cast<std::size_t>(path[i])] = children_min(l, path[i]);
    }
  }
}

}  // namespace qsmcore::unwrap
