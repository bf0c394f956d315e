// The transfers of one run under a spilled ArenaLayout, on the prefetch worker: a step's
// overlapped writes and reads start as it starts, so they run beside its kernel, and are waited
// for before the next step (whose inputs they may be, or whose outputs may land where they
// were); synchronous ones are waited for right away, before or after the kernel.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "memory/arena_pieces.h"
#include "residency/prefetch_worker.h"
#include "spill/arena_layout.h"
#include "spill/file.h"

namespace qsmcore {

/// What one run's transfers did: bytes of the file, written and read (of those, `direct`:
/// streamed by direct I/O) and seconds of I/O and of waiting for it. The run reports them
/// as its SpillReport (qsmcore/onnx_model.h).
struct SpillStats {
  std::uint64_t file_bytes = 0, written = 0, read = 0, direct = 0;
  double io_seconds = 0, wait_seconds = 0;
  std::string dir;
};

class SpillTransfers {
 public:
  /// Moves `sets` arenas of this layout through `file` (each set has its own region of it), which
  /// must hold layout.file_bytes * sets bytes and outlive this.
  SpillTransfers(const ArenaLayout& layout, std::size_t sets, const residency::SpillFile& file);
  ~SpillTransfers();
  /// Starts step `step`'s transfers of timing `when` for every set; `arenas[i]` is set i's arena.
  void start(std::size_t step, ArenaLayout::When when, const std::vector<const ArenaPieces*>& arenas);
  /// Settles the streamed operands bound now (their bytes are in the file, nothing of theirs
  /// is in flight) and waits for the started transfers; rethrows a transfer's I/O error.
  void finish();
  /// Points ctx's streamed operands at the file for step `step` of set `set` (staging in that
  /// set's arena), or clears them when the step streams nothing (settling the last step's).
  /// The kernel's reads and writes are synchronous, overlapped by read-ahead and write-behind
  /// of one slab (spill/direct_operand.h where the file takes direct I/O, else through
  /// the page cache): what it waits for counts as a wait. The operands of the set bound before
  /// are settled first.
  void bind(std::size_t step, std::size_t set, const ArenaPieces& arena, std::size_t n_in, std::size_t n_out,
            kernels::ExecContext& ctx);
  SpillStats stats() const;

 private:
  class FileOperand;
  class DirectOperand;
  void settle_operands();
  void stream_io(bool write, const void* src, void* dst, std::size_t bytes, std::uint64_t at) const;
  // Runs a synchronous file operation of a kernel's, counted as I/O and as a wait.
  void timed(const std::function<void()>& io) const;

  const ArenaLayout& layout_;
  std::vector<std::unique_ptr<kernels::StreamedOperand>> operands_;  // those bound now
  std::vector<const DirectOperand*> direct_;                         // of those, the direct ones
  const residency::SpillFile& file_;
  std::vector<std::string> pending_;
  mutable std::mutex mu_;  // the figures below: the worker adds I/O, the runner adds waits
  mutable SpillStats stats_;
  mutable std::atomic<std::uint64_t> next_key_{0};  // the stream worker's keys
  // Last: stopped (and joined) before the members above go. Whole transfers and a kernel's
  // streamed slabs have a worker each: a slab read ahead does not queue behind a whole buffer.
  residency::PrefetchWorker worker_;
  mutable residency::PrefetchWorker stream_worker_;
};

}  // namespace qsmcore
