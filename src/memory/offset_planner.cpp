#include "memory/offset_planner.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

namespace qsmcore::memory {
namespace {
constexpr std::size_t kAlign = 64;
std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

OffsetPlan plan_offsets(const std::vector<Lifetime>& lifetimes) {
  OffsetPlan plan;
  plan.offsets.assign(lifetimes.size(), 0);
  std::vector<std::size_t> order(lifetimes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (lifetimes[a].bytes != lifetimes[b].bytes) return lifetimes[a].bytes > lifetimes[b].bytes;
    return lifetimes[a].first < lifetimes[b].first;
  });
  std::vector<std::size_t> placed;
  for (std::size_t idx : order) {
    const Lifetime& lt = lifetimes[idx];
    const std::size_t need = align_up(lt.bytes);
    if (need == 0) continue;
    // Occupied ranges of time-overlapping buffers, sorted by offset.
    std::vector<std::pair<std::size_t, std::size_t>> busy;
    for (std::size_t p : placed) {
      const Lifetime& o = lifetimes[p];
      if (o.first <= lt.last && lt.first <= o.last) busy.emplace_back(plan.offsets[p], plan.offsets[p] + align_up(o.bytes));
    }
    std::sort(busy.begin(), busy.end());
    std::size_t best = std::numeric_limits<std::size_t>::max();
    std::size_t best_waste = std::numeric_limits<std::size_t>::max();
    std::size_t cursor = 0;
    for (const auto& [b, e] : busy) {
      if (b > cursor && b - cursor >= need && b - cursor - need < best_waste) {
        best = cursor;
        best_waste = b - cursor - need;
      }
      cursor = std::max(cursor, e);
    }
    if (best == std::numeric_limits<std::size_t>::max()) best = cursor;  // after the last busy range
    plan.offsets[idx] = best;
    plan.total = std::max(plan.total, best + need);
    placed.push_back(idx);
  }
  return plan;
}

}  // namespace qsmcore::memory
