// What the engine's own tools and tests see of an OnnxModel beyond its public API: the plan for
// a set of input shapes, an internal type the public header does not return.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "qsmcore/onnx_model.h"
#include "runtime/plan.h"

namespace qsmcore {

struct ModelInternals {
  static const Plan& plan(OnnxModel& m, const std::vector<Shape>& input_shapes,
                          std::int64_t window_share = graph::kChainWindowShare);
  /// Runs take conv chains' slabs of this share only, whatever their budget (0: as a budget
  /// needs), so a test can run the finest slabs where a budget would not need them.
  static void run_on_window_share(OnnxModel& m, std::int64_t window_share);
  /// Plans in the model's cache now.
  static std::size_t cached_plans(const OnnxModel& m);
  /// Plans the model has built since load (each cache miss).
  static std::size_t plans_built(const OnnxModel& m);
  /// Spill files the model's runs have allocated since load, and the bytes of the one it keeps
  /// for its next spilled run (0: none kept).
  static std::size_t spill_files_made(const OnnxModel& m);
  static std::uint64_t kept_spill_file_bytes(const OnnxModel& m);
};

/// The plan for these input shapes (built if needed, then cached). The reference stays valid
/// while the plan is cached: until max_cached_plans other shape sets were planned since its last
/// use, or clear_plans().
/// `window_share`: the conv chains' slabs (finer ones are what a budget may choose).
inline const Plan& plan_for(OnnxModel& m, const std::vector<Shape>& input_shapes,
                            std::int64_t window_share = graph::kChainWindowShare) {
  return ModelInternals::plan(m, input_shapes, window_share);
}

}  // namespace qsmcore
