// What only a network wrapper (src/networks/) asks of an OnnxModel about its budget, kept out of
// the public header (issue #52): a wrapper that budgets a whole run — several graphs, their
// tiles and its own buffers — caps each graph's runs, reads what their spilling did over all its
// runs, and frees the kept spill file once its graphs are done. A caller of the public API states
// one budget (ModelOptions::mem_budget) and reads OnnxModel::last_spill instead.
// Thread safety: as the public calls (qsmcore/onnx_model.h), each of these may run beside any.
#pragma once
#include <cstdint>

#include "qsmcore/onnx_model.h"

namespace qsmcore {

struct ModelBudget {
  /// Caps what each later run may take above the model (as plan_memory's run_bytes), on top of
  /// mem_budget: a network wrapper that budgets the whole run gives each graph its share.
  /// 0 = no cap. Applies to runs that start after it.
  static void limit_run_bytes(OnnxModel& m, std::int64_t run_bytes);
  /// A model keeps the spill file of its last spilled run for the next one (allocating and
  /// freeing it each run cost NeXtQSM's six VJPs seconds apiece). This frees it now, in the
  /// background: on a disk mounted with `discard` freeing trims every block of it (2.7 s for
  /// 9.1 GB here), which then overlaps what the caller does next, such as writing its outputs.
  static void release_spill_file(OnnxModel& m);
  /// What the spill tier did over every run since load: bytes and seconds summed, the largest
  /// file and the finest share (an unrolled network's wrapper runs one graph many times).
  static SpillReport spill_since_load(const OnnxModel& m);
};

}  // namespace qsmcore
