// Activation residency (issue #16): which arena buffers leave memory between their uses, and
// where each stretch of their life sits in the arena, so the arena fits a limit. Measure only:
// nothing is allocated or moved here (the runtime does that from the plan this returns).
//
// A buffer is written and read at known steps (its events). Between two consecutive events a
// and b it may be spilled: written to the spill file while step a + 1 runs, absent for steps
// a + 2 .. b - 2, read back while step b - 1 runs, so the transfers overlap kernels. Where the
// step next to a use is itself the busiest, the transfer is made synchronous instead (the write
// right after step a, the read right before step b): the buffer is then absent from a + 1 or
// until b - 1, at the price of a stall. Each resident stretch (segment) is placed in the arena
// on its own: a buffer may come back at a different offset. The file holds one region per
// spilled buffer.
//
// A step that can stream a buffer (a conv chain reading its input or writing its output a slab
// at a time through the file) may also be spared holding it: the buffer is then absent at that
// event, in the file before the step (when the step reads it) and after it, and the step holds
// only a staging block of its own. This is what goes below the largest "operands of one step".
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory/offset_planner.h"

namespace qsmcore::memory {

struct SpillBuffer {
  static constexpr std::size_t kNoStream = static_cast<std::size_t>(-1);
  std::size_t bytes = 0;
  std::vector<int> events;   // sorted, unique steps that write or read it
  std::vector<bool> writes;  // per event: the step writes it (what the file holds goes stale)
  // Per event, or empty when no event can stream: the staging bytes the step needs to stream the
  // buffer through the file instead of holding it (kNoStream: it cannot), and how many of its
  // input slots read it (each reads the whole buffer once when streamed).
  std::vector<std::size_t> stream_bytes;
  std::vector<unsigned> reads;
  bool can_stream(std::size_t k) const {
    return k < stream_bytes.size() && stream_bytes[k] != kNoStream && stream_bytes[k] < bytes;
  }
};

/// One resident stretch of a buffer: steps [first, last] at `offset` in the arena.
struct Segment {
  int buffer = 0;
  int first = 0, last = 0;
  int first_event = 0, last_event = 0;  // indices into the buffer's events
  bool reload = false;                  // starts by reading the buffer back from the file: during step first,
  bool read_sync = false;               //   or, when synchronous, right before it
  bool write_out = false;               // ends by writing the buffer to the file: during step last,
  bool write_sync = false;              //   or, when synchronous, right after it
  std::size_t offset = 0;
};

/// An event at which the buffer stays in the file: step `step` streams it, through a staging
/// block of the buffer's stream_bytes at `offset` in the arena.
struct Stream {
  int buffer = 0;
  int event = 0;
  int step = 0;
  std::size_t offset = 0;
};

struct SpillLayout {
  std::vector<Segment> segments;           // grouped by buffer, in event order
  std::vector<Stream> streams;             // grouped by buffer, in event order
  std::vector<std::size_t> fixed_offsets;  // one per fixed lifetime (kernel scratch)
  std::vector<std::uint64_t> file_offset;  // per buffer: its region in the spill file (spilled ones)
  std::size_t arena = 0;
  std::uint64_t file_bytes = 0;                   // spill file size
  std::uint64_t write_bytes = 0, read_bytes = 0;  // moved per run (streamed events included)
  std::uint64_t streamed_bytes = 0;               // of those, moved by streamed events
  bool fits = true;                               // arena <= the limit asked for
  std::size_t spilled_gaps() const;
};

/// Places every buffer and fixed lifetime (scratch: never spilled) within `limit` arena bytes,
/// spilling gaps only when the whole-life placement does not fit: at the step with the most
/// live bytes, the spillable gap of the largest buffer (then the longest gap) goes first, with
/// overlapped transfers where they free that step and synchronous ones only where they alone do,
/// and a streamed event (the largest saving first) only where no gap frees it, until the
/// placement fits. limit 0 = no limit (no spills). When even spilling every gap does not
/// fit, returns that placement (the smallest arena there is) with fits = false. piece: as
/// plan_offsets (no buffer straddles a multiple of it; 0: one piece).
SpillLayout plan_spills(const std::vector<SpillBuffer>& buffers, const std::vector<Lifetime>& fixed, std::size_t limit,
                        std::size_t piece = 0);

/// The smallest arena these buffers can run in: every gap spilled, with synchronous transfers,
/// and every event that can stream streamed.
SpillLayout plan_all_spilled(const std::vector<SpillBuffer>& buffers, const std::vector<Lifetime>& fixed,
                             std::size_t piece = 0);

}  // namespace qsmcore::memory
