// An arena layout: where each arena value of a plan sits at each step, and the spill
// transfers around the steps (activation residency, issue #16; docs/memory.md §8). Made by
// the plan from the spill planner's placement (runtime/plan_layout.cpp), run by
// SpillTransfers (spill/transfers.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace qsmcore {

/// Where the arena values sit at each step, and the spill transfers around the steps
/// (activation residency, issue #16). A plan's own layout keeps every value resident for its
/// whole life; Plan::layout_within builds one for a smaller arena, in which values leave the
/// arena between uses and come back, possibly elsewhere. Outputs are the same bits either way:
/// the same kernels run in the same order on the same bytes, only their addresses differ.
struct ArenaLayout {
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  // Overlapped transfers run During a step (started as it starts, finished before the next);
  // synchronous ones right Before or After its kernel.
  enum class When { Before, During, After };
  struct Transfer {
    When when = When::During;
    bool write = false;  // arena -> file (else file -> arena)
    std::size_t arena_offset = 0;
    std::uint64_t file_offset = 0;
    std::size_t bytes = 0;
  };
  std::size_t arena_bytes = 0;
  // The arena is allocated in pieces of this many bytes (the last one smaller), none of which any
  // value or scratchpad straddles; 0: one piece (memory/arena_piece.h, memory/arena_pieces.h).
  std::size_t piece_bytes = 0;
  std::vector<std::vector<std::size_t>> in_offset, out_offset;  // per step and slot (npos: not in the arena)
  std::vector<std::size_t> scratch_offset, scratch_slot;        // per step
  // Per step. An overlapped write runs during the step after a value's last use before a gap,
  // an overlapped read during the step before its next use; a synchronous one right after that
  // use or right before the next.
  std::vector<std::vector<Transfer>> transfers;
  // Per step: the operands it streams through the file instead of holding them (their offsets
  // above are npos), each with its own staging block in the arena.
  struct Streamed {
    bool output = false;
    std::size_t slot = 0;
    std::uint64_t file_offset = 0;
    std::size_t staging_offset = 0, staging_bytes = 0;
    std::size_t operand_bytes = 0;  // the operand's whole size (its region of the file)
    // The block its direct I/O passes through (residency::SpillFile::stream_io_bytes), after
    // the staging; 0 bytes where there is no direct I/O.
    std::size_t io_offset = 0, io_bytes = 0;
  };
  std::vector<std::vector<Streamed>> streamed;
  // Each resident stretch: the value (root of its in-place group) held in the arena over steps
  // [first, last]. Runs do not read it; tools show from it what a step holds (qsm onnx plan).
  struct Resident {
    int value = -1;
    int first = 0, last = 0;
  };
  std::vector<Resident> residents;
  std::uint64_t file_bytes = 0, write_bytes = 0, read_bytes = 0;  // per set
  std::uint64_t streamed_bytes = 0;  // of those moved, the bytes kernels stream slab by slab
  bool direct_streams = false;       // those go by direct I/O through io blocks (Plan::Streams::Direct)
  bool fits = true;                  // within the limit it was built for
  bool spills() const { return file_bytes > 0; }
  /// The bytes moved through the page cache per set, plus 0.6 of those streamed directly: what a
  /// choice between layouts weighs. At 181x217x181 (full-size twins, this 2-core VM) it ranks
  /// every pair measured as their times did: NeXtQSM at half its peak ran faster streaming
  /// through the page cache (14.2 GB moved) than directly (22.7 GB, 10.4 of them direct: the io
  /// blocks' room sent more whole values to the file); at a quarter, directly on finer slabs
  /// (46 GB, 40 direct: 195 s) than through the page cache (48 GB: 222 s); xQSM at a half and a
  /// quarter directly (19 GB, 11 direct; 28 GB, 25 direct) than through the page cache (16 and
  /// 28 GB). Direct I/O costs the CPU almost nothing (writing 2 GB: 0.25 s of system time
  /// against 5.1 s through the page cache), but the disk time stays. Half was too generous:
  /// once NeXtQSM's masks ran inside its chains, at half its peak direct streaming moved 19.4
  /// GB a VJP (10.2 direct) against 14.7 through the page cache, and weighed at half it won and
  /// ran slower (153 s of iterations against 141 and 149). At 0.6 every pair above still ranks
  /// as measured.
  static constexpr double kDirectWeight = 0.6;
  double transfer_cost() const {
    const double moved = static_cast<double>(write_bytes + read_bytes);
    return direct_streams ? moved - (1.0 - kDirectWeight) * static_cast<double>(streamed_bytes) : moved;
  }
};

}  // namespace qsmcore
