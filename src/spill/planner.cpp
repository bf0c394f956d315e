#include "spill/planner.h"

#include <algorithm>

namespace qsmcore::memory {
namespace {

constexpr std::size_t kArenaAlign = 64;     // as the offset planner places buffers
constexpr std::uint64_t kFileAlign = 4096;  // spill file regions start on a page

std::size_t aligned(std::size_t n) {
  return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

// Per buffer and event k: how the gap between events k and k + 1 is spilled (0: it is not),
// and whether event k itself is streamed.
enum : unsigned char { kSpilled = 1, kWriteSync = 2, kReadSync = 4, kStreamed = 8 };
using Spilled = std::vector<std::vector<unsigned char>>;

bool streamed(const Spilled& sp, std::size_t b, std::size_t k) {
  return (sp[b][k] & kStreamed) != 0;
}

// The resident stretches of buffer b. A streamed event cuts the gaps on both sides of it; the
// transfer next to it is synchronous when no whole step lies between (an overlapped one would
// run beside the streaming kernel, on the same bytes of the file).
std::vector<Segment> segments_of(const std::vector<SpillBuffer>& buffers, const Spilled& spilled, std::size_t b) {
  std::vector<Segment> out;
  const auto& ev = buffers[b].events;
  const auto& sp = spilled[b];
  std::size_t start = 0;
  bool dirty = false;
  for (std::size_t k = 0; k < ev.size(); ++k) {
    if (streamed(spilled, b, k)) {
      start = k + 1;
      dirty = false;  // the step leaves the file current
      continue;
    }
    dirty = dirty || buffers[b].writes[k];
    const bool last_event = k + 1 == ev.size();
    const bool cut = !last_event && ((sp[k] & kSpilled) != 0 || streamed(spilled, b, k + 1));
    if (!cut && !last_event) continue;
    Segment s;
    s.buffer = static_cast<int>(b);
    s.first_event = static_cast<int>(start);
    s.last_event = static_cast<int>(k);
    s.reload = start > 0;
    s.read_sync = s.reload && ((sp[start - 1] & kReadSync) != 0 ||
                               (streamed(spilled, b, start - 1) && ev[start] - ev[start - 1] < 2));
    s.first = ev[start] - (s.reload && !s.read_sync ? 1 : 0);
    s.write_out = cut && dirty;
    s.write_sync = cut && ((sp[k] & kWriteSync) != 0 || (streamed(spilled, b, k + 1) && ev[k + 1] - ev[k] < 2));
    s.last = ev[k] + (cut && !s.write_sync ? 1 : 0);
    out.push_back(s);
    start = k + 1;
    dirty = false;
  }
  return out;
}

std::vector<Segment> segments_of(const std::vector<SpillBuffer>& buffers, const Spilled& spilled) {
  std::vector<Segment> out;
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    if (buffers[b].events.empty()) continue;
    auto s = segments_of(buffers, spilled, b);
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

bool present(const std::vector<SpillBuffer>& buffers, const Spilled& spilled, std::size_t b, int at) {
  for (const auto& s : segments_of(buffers, spilled, b))
    if (s.first <= at && at <= s.last) return true;
  return false;
}

SpillLayout place(const std::vector<SpillBuffer>& buffers, const Spilled& spilled, const std::vector<Lifetime>& fixed,
                  std::size_t piece) {
  SpillLayout l;
  l.segments = segments_of(buffers, spilled);
  std::vector<Lifetime> lifetimes;
  for (const auto& s : l.segments)
    lifetimes.push_back({buffers[static_cast<std::size_t>(s.buffer)].bytes, s.first, s.last});
  for (std::size_t b = 0; b < buffers.size(); ++b)
    for (std::size_t k = 0; k < buffers[b].events.size(); ++k)
      if (streamed(spilled, b, k)) {
        l.streams.push_back({static_cast<int>(b), static_cast<int>(k), buffers[b].events[k], 0});
        lifetimes.push_back({buffers[b].stream_bytes[k], buffers[b].events[k], buffers[b].events[k]});
      }
  lifetimes.insert(lifetimes.end(), fixed.begin(), fixed.end());
  const OffsetPlan op = plan_offsets(lifetimes, piece);
  for (std::size_t i = 0; i < l.segments.size(); ++i) l.segments[i].offset = op.offsets[i];
  for (std::size_t i = 0; i < l.streams.size(); ++i) l.streams[i].offset = op.offsets[l.segments.size() + i];
  l.fixed_offsets.assign(op.offsets.begin() + static_cast<std::ptrdiff_t>(l.segments.size() + l.streams.size()),
                         op.offsets.end());
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
  for (const auto& st : l.streams) {
    const auto& buf = buffers[static_cast<std::size_t>(st.buffer)];
    const auto k = static_cast<std::size_t>(st.event);
    const std::uint64_t written = buf.writes[k] ? buf.bytes : 0;
    const std::uint64_t read = k < buf.reads.size() ? std::uint64_t{buf.reads[k]} * buf.bytes : 0;
    l.write_bytes += written;
    l.read_bytes += read;
    l.streamed_bytes += written + read;
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
  for (std::size_t b = 0; b < buffers.size(); ++b)
    for (std::size_t k = 0; k < buffers[b].events.size(); ++k)
      if (streamed(spilled, b, k))
        live[static_cast<std::size_t>(buffers[b].events[k])] += aligned(buffers[b].stream_bytes[k]);
  for (const auto& f : fixed)
    for (int t = f.first; t <= f.last; ++t) live[static_cast<std::size_t>(t)] += aligned(f.bytes);
  return live;
}

// A spill that frees step `at` of one buffer: event k's gap in mode `mode`.
struct Choice {
  int buffer = -1;
  std::size_t k = 0;
  unsigned char mode = 0;
};

// The gap that frees step `at`: the largest buffer first (then the furthest next use), by a new
// overlapped spill if one frees it, else by a new or an existing spill made synchronous at the
// end next to `at`.
Choice gap_choice(const std::vector<SpillBuffer>& buffers, Spilled& spilled, int at) {
  for (const bool allow_sync : {false, true}) {
    Choice best;
    for (std::size_t b = 0; b < buffers.size(); ++b) {
      const auto& buf = buffers[b];
      if (buf.bytes == 0 || !present(buffers, spilled, b, at)) continue;
      if (best.buffer >= 0 && buf.bytes < buffers[static_cast<std::size_t>(best.buffer)].bytes) continue;
      for (std::size_t k = 0; k + 1 < buf.events.size(); ++k) {
        unsigned char& cur = spilled[b][k];
        unsigned char mode =
            static_cast<unsigned char>((cur & kStreamed) | kSpilled | (cur & (kWriteSync | kReadSync)));
        if (allow_sync && at == buf.events[k] + 1) mode |= kWriteSync;
        if (allow_sync && at == buf.events[k + 1] - 1) mode |= kReadSync;
        if (mode == cur) continue;
        const unsigned char was = cur;
        cur = mode;
        const bool frees = !present(buffers, spilled, b, at);
        cur = was;
        if (!frees) continue;
        if (best.buffer >= 0) {
          const auto& bb = buffers[static_cast<std::size_t>(best.buffer)];
          if (buf.bytes == bb.bytes && buf.events[k + 1] <= bb.events[best.k + 1]) continue;
        }
        best = {static_cast<int>(b), k, mode};
      }
    }
    if (best.buffer >= 0) return best;
  }
  return {};
}

// The event streamed at step `at` that saves the most bytes there.
Choice stream_choice(const std::vector<SpillBuffer>& buffers, const Spilled& spilled, int at) {
  Choice best;
  std::size_t best_saving = 0;
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    const auto& buf = buffers[b];
    const auto it = std::lower_bound(buf.events.begin(), buf.events.end(), at);
    if (it == buf.events.end() || *it != at) continue;
    const auto k = static_cast<std::size_t>(it - buf.events.begin());
    if (!buf.can_stream(k) || streamed(spilled, b, k)) continue;
    const std::size_t saving = aligned(buf.bytes) - aligned(buf.stream_bytes[k]);
    if (saving <= best_saving) continue;
    best = {static_cast<int>(b), k, static_cast<unsigned char>(spilled[b][k] | kStreamed)};
    best_saving = saving;
  }
  return best;
}

// Frees step `at` by one gap, or else by streaming one event there. False when nothing can.
bool spill_one(const std::vector<SpillBuffer>& buffers, Spilled& spilled, int at) {
  Choice c = gap_choice(buffers, spilled, at);
  if (c.buffer < 0) c = stream_choice(buffers, spilled, at);
  if (c.buffer < 0) return false;
  spilled[static_cast<std::size_t>(c.buffer)][c.k] = c.mode;
  return true;
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
  for (std::size_t b = 0; b < buffers.size(); ++b)
    for (std::size_t k = 0; k < buffers[b].events.size(); ++k)
      // Only where staging holds less than the operand: at small sizes a step's windows
      // outweigh the slab it streams (what stream_choice weighs as well).
      if (buffers[b].can_stream(k) && aligned(buffers[b].stream_bytes[k]) < aligned(buffers[b].bytes))
        sp[b][k] |= kStreamed;
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
      if (!spill_one(buffers, sp, static_cast<int>(peak - live.begin()))) {
        stuck = true;
        break;
      }
      live = live_profile(buffers, sp, fixed);
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
