#include "memory/spill_planner.h"

#include <algorithm>

namespace qsmcore::memory {
namespace {

constexpr std::size_t kArenaAlign = 64;     // as the offset planner places buffers
constexpr std::uint64_t kFileAlign = 4096;  // spill file regions start on a page

std::size_t aligned(std::size_t n) {
  return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

// How the gap between events k and k + 1 of a buffer is spilled (0: it is not).
enum : unsigned char { kSpilled = 1, kWriteSync = 2, kReadSync = 4 };
using Spilled = std::vector<std::vector<unsigned char>>;

// Steps a gap in mode `mode` frees: [a + 2, b - 2] overlapped, one more at each synchronous end.
int freed_first(const SpillBuffer& b, std::size_t k, unsigned char mode) {
  return b.events[k] + ((mode & kWriteSync) ? 1 : 2);
}
int freed_last(const SpillBuffer& b, std::size_t k, unsigned char mode) {
  return b.events[k + 1] - ((mode & kReadSync) ? 1 : 2);
}
bool frees(const SpillBuffer& b, std::size_t k, unsigned char mode, int at) {
  return b.bytes > 0 && k + 1 < b.events.size() && freed_first(b, k, mode) <= at && at <= freed_last(b, k, mode);
}

std::vector<Segment> segments_of(const std::vector<SpillBuffer>& buffers, const Spilled& spilled) {
  std::vector<Segment> out;
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    const auto& ev = buffers[b].events;
    if (ev.empty()) continue;
    std::size_t start = 0;
    bool dirty = false;
    for (std::size_t k = 0; k < ev.size(); ++k) {
      dirty = dirty || buffers[b].writes[k];
      const unsigned char mode = k + 1 < ev.size() ? spilled[b][k] : 0;
      const bool cut = (mode & kSpilled) != 0;
      if (!cut && k + 1 < ev.size()) continue;
      Segment s;
      s.buffer = static_cast<int>(b);
      s.first_event = static_cast<int>(start);
      s.last_event = static_cast<int>(k);
      s.reload = start > 0;
      s.read_sync = s.reload && (spilled[b][start - 1] & kReadSync) != 0;
      s.first = ev[start] - (s.reload && !s.read_sync ? 1 : 0);
      s.write_out = cut && dirty;
      s.write_sync = cut && (mode & kWriteSync) != 0;
      s.last = ev[k] + (cut && !s.write_sync ? 1 : 0);
      out.push_back(s);
      start = k + 1;
      dirty = false;
    }
  }
  return out;
}

SpillLayout place(const std::vector<SpillBuffer>& buffers, const Spilled& spilled, const std::vector<Lifetime>& fixed,
                  std::size_t piece) {
  SpillLayout l;
  l.segments = segments_of(buffers, spilled);
  std::vector<Lifetime> lifetimes;
  for (const auto& s : l.segments)
    lifetimes.push_back({buffers[static_cast<std::size_t>(s.buffer)].bytes, s.first, s.last});
  lifetimes.insert(lifetimes.end(), fixed.begin(), fixed.end());
  const OffsetPlan op = plan_offsets(lifetimes, piece);
  for (std::size_t i = 0; i < l.segments.size(); ++i) l.segments[i].offset = op.offsets[i];
  l.fixed_offsets.assign(op.offsets.begin() + static_cast<std::ptrdiff_t>(l.segments.size()), op.offsets.end());
  l.arena = op.total;
  l.file_offset.assign(buffers.size(), 0);
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    if (std::none_of(spilled[b].begin(), spilled[b].end(), [](unsigned char m) { return m != 0; })) continue;
    l.file_offset[b] = l.file_bytes;
    l.file_bytes += (buffers[b].bytes + kFileAlign - 1) / kFileAlign * kFileAlign;
  }
  for (const auto& s : l.segments) {
    const std::uint64_t n = buffers[static_cast<std::size_t>(s.buffer)].bytes;
    if (s.write_out) l.write_bytes += n;
    if (s.reload) l.read_bytes += n;
  }
  return l;
}

Spilled none_spilled(const std::vector<SpillBuffer>& buffers) {
  Spilled sp(buffers.size());
  for (std::size_t b = 0; b < buffers.size(); ++b) sp[b].assign(buffers[b].events.size(), 0);
  return sp;
}

// Arena bytes live at each step (the lower bound on any placement), given the spills so far.
std::vector<std::size_t> live_profile(const std::vector<SpillBuffer>& buffers, const Spilled& spilled,
                                      const std::vector<Lifetime>& fixed) {
  int steps = 0;
  for (const auto& b : buffers)
    if (!b.events.empty()) steps = std::max(steps, b.events.back() + 2);
  for (const auto& f : fixed) steps = std::max(steps, f.last + 1);
  std::vector<std::size_t> live(static_cast<std::size_t>(steps), 0);
  for (const auto& s : segments_of(buffers, spilled))
    for (int t = s.first; t <= s.last; ++t)
      live[static_cast<std::size_t>(t)] += aligned(buffers[static_cast<std::size_t>(s.buffer)].bytes);
  for (const auto& f : fixed)
    for (int t = f.first; t <= f.last; ++t) live[static_cast<std::size_t>(t)] += aligned(f.bytes);
  return live;
}

// Frees step `at` by one gap: the largest buffer first (then the furthest next use), by a new
// overlapped spill if one frees it, else by a new or an existing spill made synchronous at the
// end next to `at`. Returns false when no gap can free it.
bool spill_one(const std::vector<SpillBuffer>& buffers, Spilled& spilled, std::vector<std::size_t>& live, int at) {
  for (const bool allow_sync : {false, true}) {
    int best_b = -1;
    std::size_t best_k = 0;
    unsigned char best_mode = 0;
    for (std::size_t b = 0; b < buffers.size(); ++b) {
      const auto& buf = buffers[b];
      for (std::size_t k = 0; k + 1 < buf.events.size(); ++k) {
        const unsigned char cur = spilled[b][k];
        if (cur != 0 && frees(buf, k, cur, at)) continue;  // already absent there
        unsigned char mode = kSpilled | (cur & (kWriteSync | kReadSync));
        if (allow_sync && at == buf.events[k] + 1) mode |= kWriteSync;
        if (allow_sync && at == buf.events[k + 1] - 1) mode |= kReadSync;
        if (!frees(buf, k, mode, at)) continue;
        if (best_b >= 0) {
          const auto& bb = buffers[static_cast<std::size_t>(best_b)];
          if (buf.bytes < bb.bytes) continue;
          if (buf.bytes == bb.bytes && buf.events[k + 1] <= bb.events[best_k + 1]) continue;
        }
        best_b = static_cast<int>(b);
        best_k = k;
        best_mode = mode;
      }
    }
    if (best_b < 0) continue;
    const auto& buf = buffers[static_cast<std::size_t>(best_b)];
    unsigned char& cur = spilled[static_cast<std::size_t>(best_b)][best_k];
    // Steps freed now that were not before.
    for (int t = freed_first(buf, best_k, best_mode); t <= freed_last(buf, best_k, best_mode); ++t)
      if (cur == 0 || !frees(buf, best_k, cur, t)) live[static_cast<std::size_t>(t)] -= aligned(buf.bytes);
    cur = best_mode;
    return true;
  }
  return false;
}

}  // namespace

std::size_t SpillLayout::spilled_gaps() const {
  std::size_t n = 0;
  for (const auto& s : segments) n += s.reload ? 1 : 0;
  return n;
}

SpillLayout plan_all_spilled(const std::vector<SpillBuffer>& buffers, const std::vector<Lifetime>& fixed,
                             std::size_t piece) {
  Spilled sp = none_spilled(buffers);
  for (std::size_t b = 0; b < buffers.size(); ++b)
    for (std::size_t k = 0; k + 1 < buffers[b].events.size(); ++k)
      if (buffers[b].bytes > 0 && buffers[b].events[k + 1] - buffers[b].events[k] >= 2)
        sp[b][k] = kSpilled | kWriteSync | kReadSync;
  return place(buffers, sp, fixed, piece);
}

SpillLayout plan_spills(const std::vector<SpillBuffer>& buffers, const std::vector<Lifetime>& fixed, std::size_t limit,
                        std::size_t piece) {
  Spilled sp = none_spilled(buffers);
  SpillLayout l = place(buffers, sp, fixed, piece);
  if (limit == 0 || l.arena <= limit) return l;
  // Spill until the busiest step's live bytes are under a target, place, and lower the target
  // by what fragmentation added on top of it, a few times: the offset planner closes most of
  // the distance to the live bound, so one or two rounds usually fit.
  std::vector<std::size_t> live = live_profile(buffers, sp, fixed);
  std::size_t target = limit;
  for (int round = 0; round < 8; ++round) {
    bool stuck = false;
    for (;;) {
      const auto peak = std::max_element(live.begin(), live.end());
      if (peak == live.end() || *peak <= target) break;
      if (!spill_one(buffers, sp, live, static_cast<int>(peak - live.begin()))) {
        stuck = true;
        break;
      }
    }
    if (stuck) break;
    l = place(buffers, sp, fixed, piece);
    if (l.arena <= limit) return l;
    const std::size_t over = l.arena - limit;
    if (over >= target) break;
    target -= std::max<std::size_t>(over, kArenaAlign);
  }
  // The greedy rounds did not fit: the most that can be spilled is the last word.
  SpillLayout all = plan_all_spilled(buffers, fixed, piece);
  all.fits = all.arena <= limit;
  return all;
}

}  // namespace qsmcore::memory
