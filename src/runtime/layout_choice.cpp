// The layout choice's pure functions (runtime/layout_choice.h).
#include "runtime/layout_choice.h"

#include <algorithm>

namespace qsmcore::layout_choice {

std::int64_t run_room(std::int64_t budget, std::int64_t held, std::int64_t cap) {
  std::int64_t room = std::numeric_limits<std::int64_t>::max();
  if (budget > 0) room = budget - held;
  if (cap > 0) room = std::min<std::int64_t>(room, cap);
  return room;
}

void ShareSearch::note(std::int64_t held, std::int64_t least, std::int64_t run) {
  need_ = std::min(need_, held + least);
  if (!first_) return;
  held_ = held;
  run_ = run;
  first_ = false;
}

ShareSearch::Next ShareSearch::known_too_large(const ShareFigures& f, std::int64_t held) {
  note(held, f.least(sets_), f.run(sets_));
  return f.chains ? Next::Finer : Next::Stop;
}

ShareSearch::Next ShareSearch::weigh(std::int64_t share, const ArenaLayout* direct, const ArenaLayout* lean,
                                     std::int64_t held, std::int64_t least, std::int64_t run, bool chains) {
  for (const ArenaLayout* l : {lean, direct})
    if (l && (!best_ || l->transfer_cost() < best_->cost))
      best_ = Best{share, l == direct ? Plan::Streams::Direct : Plan::Streams::Lean, l->transfer_cost()};
  // Direct streaming fits here: finer shares would only move more; this share's best is taken.
  if (direct && best_->share == share) return Next::TakeBest;
  note(held, least, run);
  return direct || !chains ? Next::Stop : Next::Finer;
}

std::string refusal(const RefusalFigures& f) {
  // In the budget's own terms: a budget on the whole process counts what it holds outside the
  // engine as held.
  const std::string outside_part =
      f.outside > 0 ? "the process outside the engine " + std::to_string(f.outside) + " + " : "";
  std::string s = f.path + ": a run at input shape " + shape_to_string(f.shape) + " needs " +
                  std::to_string(f.outside + f.held + f.run) + " bytes (" + outside_part + "model and plans " +
                  std::to_string(f.held) + " + run " + std::to_string(f.run) + "), above the budget of " +
                  std::to_string(f.outside + f.budget) + " bytes" +
                  (f.budget_source.empty() ? "" : " from " + f.budget_source);
  if (f.least < f.run)
    s += "; with its activations spilled to disk it would need " + std::to_string(f.outside + f.held + f.least);
  const std::int64_t room = f.budget - f.held;
  if (room <= 0) return s + "; nothing would fit: the loaded model and plans alone fill the budget";
  const double fraction = static_cast<double>(room) / static_cast<double>(f.least);
  const double voxels = fraction * static_cast<double>(numel(f.shape));
  return s + "; at most about " + std::to_string(static_cast<std::int64_t>(voxels)) + " input elements (" +
         std::to_string(static_cast<int>(fraction * 100.0)) + " % of these) would fit: run it tiled or smaller";
}

}  // namespace qsmcore::layout_choice
