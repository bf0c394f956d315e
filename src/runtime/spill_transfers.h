// The transfers of one run under a spilled ArenaLayout, on the prefetch worker: a step's
// overlapped writes and reads start as it starts, so they run beside its kernel, and are waited
// for before the next step (whose inputs they may be, or whose outputs may land where they
// were); synchronous ones are waited for right away, before or after the kernel.
#pragma once
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "residency/prefetch_worker.h"
#include "residency/spill_file.h"
#include "runtime/arena_pieces.h"
#include "runtime/plan.h"

namespace qsmcore {

class SpillTransfers {
 public:
  /// A spill file for `sets` arenas of this layout (each set has its own region of the file).
  SpillTransfers(const ArenaLayout& layout, std::size_t sets, const std::string& dir);
  /// Starts step `step`'s transfers of timing `when` for every set; `arenas[i]` is set i's arena.
  void start(std::size_t step, ArenaLayout::When when, const std::vector<const ArenaPieces*>& arenas);
  /// Waits for them; rethrows a transfer's I/O error.
  void finish();
  SpillReport stats() const;

 private:
  const ArenaLayout& layout_;
  residency::SpillFile file_;
  std::vector<std::string> pending_;
  mutable std::mutex mu_;  // the figures below: the worker adds I/O, the runner adds waits
  SpillReport stats_;
  residency::PrefetchWorker worker_;  // last: stopped (and joined) before the members above go
};

}  // namespace qsmcore
