// The layout choice of one OnnxModel run: given a plan, the room the budget leaves and the
// number of input sets, which arena layout the run takes (the plan's own, or a spilled one:
// memory.md §8), the least it could run in, and the refusal's words when nothing fits. Pure
// functions of the plan's figures and layouts, so they are tested on hand-made plans
// (tests/runtime/layout_choice_test.cpp); OnnxModel::Impl builds the plans and calls them.
//
// A run's bytes above what is held: (arena + outputs) per input set, plus the streamed weight
// window once (PlanMemory::run_peak_bytes for one set).
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "qsmcore/onnx_model.h"
#include "runtime/plan.h"

namespace qsmcore::layout_choice {

/// The bytes a run may take above `held`: what `budget` (0: none) leaves, and `cap` (a wrapper's
/// ModelBudget::limit_run_bytes; 0: none), whichever is less.
std::int64_t run_room(std::int64_t budget, std::int64_t held, std::int64_t cap);

/// A run of `sets` on a plan's own layout (nothing spilled).
inline std::int64_t unspilled_run(const PlanMemory& pm, std::int64_t sets) {
  return (pm.arena_bytes + pm.io_bytes) * sets + pm.weight_window_bytes;
}

/// The layout a run of `sets` takes within `room` bytes: the plan's own when it fits, else
/// (`spill`: activations may spill) the one whose arena fits what the room leaves per set;
/// nullptr when nothing fits. PlanT: Plan, or a test's fake with memory(), layout_within().
template <class PlanT>
std::shared_ptr<const ArenaLayout> layout_for(const PlanT& p, std::int64_t room, std::int64_t sets,
                                              Plan::Streams streams, bool spill) {
  const PlanMemory& pm = p.memory();
  if (unspilled_run(pm, sets) <= room) return p.layout_within(0);
  if (!spill || room <= 0) return nullptr;
  const std::int64_t arena = (room - pm.weight_window_bytes) / sets - pm.io_bytes;
  if (arena <= 0) return nullptr;
  auto l = p.layout_within(static_cast<std::size_t>(arena), streams);
  return l->fits ? l : nullptr;
}

/// The least bytes a run of `sets` needs above the model (spilling, when `spill`).
template <class PlanT>
std::int64_t least_run(const PlanT& p, std::int64_t sets, bool spill) {
  const PlanMemory& pm = p.memory();
  const std::int64_t arena = spill ? static_cast<std::int64_t>(p.min_arena_bytes()) : pm.arena_bytes;
  return (arena + pm.io_bytes) * sets + pm.weight_window_bytes;
}

/// A plan's figures at one conv-chain window share, kept so that a share known not to fit is
/// weighed without building its plan again (least_run's terms for one set).
struct ShareFigures {
  std::int64_t arena = 0;      // the least arena (spilled, when allowed)
  std::int64_t unspilled = 0;  // the plan's own arena
  std::int64_t io = 0, window = 0;
  bool chains = false;  // the plan has conv chains: a finer share plans differently
  std::int64_t least(std::int64_t sets) const { return (arena + io) * sets + window; }
  std::int64_t run(std::int64_t sets) const { return (unspilled + io) * sets + window; }
};

/// The search over window shares (coarsest first) for a run's layout, as numbers: each share's
/// plan offers a layout streaming directly and one through the page cache (lean); a direct one
/// that spills nothing is taken at once (by the caller, before it builds the lean one: see
/// spills_nothing); else, up to the first share where direct
/// streaming fits, the layout of least transfer cost (ArenaLayout::transfer_cost) is taken.
/// Finer shares than that are not planned (each plan's primitives hold generated code outside
/// the accounting). With no layout, the refusal's figures: what was held with the first
/// share's plan, its unbudgeted run, and the least any share needs above that.
class ShareSearch {
 public:
  enum class Next {
    TakeBest,  // this share holds the cheapest layout and direct streaming fits: take best()
    Finer,     // weigh the next (finer) share
    Stop,      // no finer share differs: take best() if any, else refuse
  };
  struct Best {
    std::int64_t share = 0;
    Plan::Streams streams = Plan::Streams::Lean;
    double cost = 0;
  };

  explicit ShareSearch(std::int64_t sets) : sets_(sets) {}

  /// A layout to take at once: one that fits and spills nothing.
  static bool spills_nothing(const ArenaLayout* l) { return l && !l->spills(); }

  /// A share whose figures are known and whose least exceeds the room, weighed without its
  /// plan (`held`: what is held now). Finer or Stop.
  Next known_too_large(const ShareFigures& f, std::int64_t held);
  /// A share's plan and its layouts within the room (either null: none fits). `least`: the
  /// plan's least_run for this search's sets; `run`: its unspilled_run; `chains`: it has conv
  /// chains (a finer share plans differently).
  Next weigh(std::int64_t share, const ArenaLayout* direct, const ArenaLayout* lean, std::int64_t held,
             std::int64_t least, std::int64_t run, bool chains);

  const std::optional<Best>& best() const { return best_; }
  /// The refusal's figures (meaningful once a share was weighed): held with the first share,
  /// its unbudgeted run, and the least any share weighed needs above that held.
  std::int64_t held() const { return held_; }
  std::int64_t run() const { return run_; }
  std::int64_t least() const { return need_ - held_; }

 private:
  void note(std::int64_t held, std::int64_t least, std::int64_t run);
  std::int64_t sets_;
  std::int64_t need_ = std::numeric_limits<std::int64_t>::max(), held_ = 0, run_ = 0;
  bool first_ = true;
  std::optional<Best> best_;
};

/// What a refusal names.
struct RefusalFigures {
  std::string path;                           // the model's
  Shape shape;                                // the first input's
  std::int64_t outside = 0;                   // held outside the engine, in a budget on the whole process (0: none)
  std::int64_t budget = 0;                    // the engine's budget
  std::string budget_source;                  // where the budget came from ("" : not said)
  std::int64_t held = 0, run = 0, least = 0;  // as ShareSearch's
};

/// The refusal: the predicted peak, the budget and what would fit: the least the run needs with
/// its activations spilled (when less than its run), and, as the run's bytes grow with the
/// input's elements, about how many of them would fit.
std::string refusal(const RefusalFigures& f);

}  // namespace qsmcore::layout_choice
