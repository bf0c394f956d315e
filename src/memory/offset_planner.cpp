#include "memory/offset_planner.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>

namespace qsmcore::memory {
namespace {
constexpr std::size_t kAlign = 64;
std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

using Before = std::function<bool(const Lifetime&, const Lifetime&)>;

// Places buffers in `order`, each at the gap (among time-overlapping buffers already placed)
// that wastes least, or after them all.
OffsetPlan place(const std::vector<Lifetime>& lifetimes, const std::vector<std::size_t>& order) {
  OffsetPlan plan;
  plan.offsets.assign(lifetimes.size(), 0);
  std::vector<std::size_t> placed;
  std::vector<std::pair<std::size_t, std::size_t>> busy;
  for (std::size_t idx : order) {
    const Lifetime& lt = lifetimes[idx];
    const std::size_t need = align_up(lt.bytes);
    if (need == 0) continue;
    busy.clear();
    for (std::size_t p : placed) {
      const Lifetime& o = lifetimes[p];
      if (o.first <= lt.last && lt.first <= o.last)
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + align_up(o.bytes));
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

}  // namespace

OffsetPlan plan_offsets(const std::vector<Lifetime>& lifetimes) {
  // Offset assignment is NP-hard; each greedy order wins on some graphs (largest-first on
  // U-Nets, by first use on long chains with a few big scratch blocks), so try several and
  // keep the smallest arena. Ties keep the earlier rule: deterministic.
  auto duration = [](const Lifetime& l) { return static_cast<std::size_t>(l.last - l.first + 1); };
  const std::vector<Before> rules = {
      [](const Lifetime& a, const Lifetime& b) { return a.bytes > b.bytes; },
      [&](const Lifetime& a, const Lifetime& b) { return a.bytes * duration(a) > b.bytes * duration(b); },
      [&](const Lifetime& a, const Lifetime& b) {
        return duration(a) != duration(b) ? duration(a) > duration(b) : a.bytes > b.bytes;
      },
      [](const Lifetime& a, const Lifetime& b) { return a.first != b.first ? a.first < b.first : a.bytes > b.bytes; },
  };
  OffsetPlan best;
  bool have = false;
  std::vector<std::size_t> order(lifetimes.size());
  for (const auto& before : rules) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return before(lifetimes[a], lifetimes[b]); });
    OffsetPlan p = place(lifetimes, order);
    if (!have || p.total < best.total) best = std::move(p), have = true;
  }
  if (!have) best.offsets.assign(lifetimes.size(), 0);
  return best;
}

}  // namespace qsmcore::memory
