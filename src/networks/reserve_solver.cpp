// The budget cascade's arithmetic (networks/reserve_solver.h).
#include "networks/reserve_solver.h"

#include <algorithm>

namespace qsmcore::networks::reserve {

// The streamed weight window is held while a run is (the executor trims it after each); what is
// parked is not, and is back between the runs unless it stays away.
std::int64_t run_term(const Terms& t, const Parked& p, std::int64_t window, std::int64_t runs) {
  return t.wrapper_fixed + window + runs - p.around_runs;
}

std::int64_t between_term(const Terms& t, const Parked& p) {
  return (p.blocks_away_between ? t.wrapper_between_parked : t.wrapper_fixed + t.wrapper_between) - p.between;
}

std::int64_t peak(const Terms& t, const Parked& p, const Figures& f, std::int64_t n) {
  return std::max(f.load_peak, f.held + std::max(run_term(t, p, f.window, n * (f.run_peak + t.wrapper_per_tile)),
                                                 std::max(between_term(t, p), t.wrapper_prepare)));
}

std::int64_t most_in_flight(const Terms& t, const Parked& p, const Figures& f, std::int64_t wanted) {
  std::int64_t n = std::max<std::int64_t>(wanted, 1);
  while (n > 1 && !fits(t, p, f, n)) --n;
  return n;
}

// Spilling lowers the run's term only: between the runs and before them the wrapper holds what it did.
std::optional<std::int64_t> least_peak(const Terms& t, const Parked& p, const Figures& f) {
  if (f.least_run <= 0 || f.least_run >= f.run_peak) return std::nullopt;
  const std::int64_t others = std::max(between_term(t, p), t.wrapper_prepare);
  const std::int64_t run_now = std::max(run_term(t, p, f.window, f.run_peak + t.wrapper_per_tile), others);
  const std::int64_t run_least = std::max(run_term(t, p, f.window, f.least_run + t.wrapper_per_tile), others);
  return peak(t, p, f, 1) - run_now + run_least;
}

// Parking alone, where the unspilled run then fits; else spilling alone, and parking too only
// where that is what fits. Parking beside spilling where spilling alone fit ran slower: in the
// room it frees the layouts moved fewer bytes, more of them directly, and waited on them longer
// (NeXtQSM at half its peak: 144 s against 132; at a quarter 144 against 140; 274 MB parked a
// VJP). Paging the wrapper's blocks between runs too (a write and a read of each a step) only
// where the step between the runs is what does not fit.
Choice solve(const Terms& t, const Options& o, const Figures& f, std::int64_t n, const SpillFit& spill_fit) {
  auto level = [&](int l) {
    return Parked{l > 0 ? o.parkable : 0, l > 0 && o.inputs_read_in_prepare ? o.parked_inputs : 0, l == 2};
  };
  Choice c{level(1), f, false, false, std::nullopt};
  auto over = [&] { return !fits(t, c.parked, c.figures, n); };
  if (over()) c.parked = level(0);
  if (over() && o.spill) {
    c.figures = spill_fit(c.parked, c.figures);
    c.spilled = true;
  }
  if (over() && o.parkable > 0) {
    c.parked = level(1);
    c.figures = spill_fit(c.parked, c.figures);
    c.spilled = true;
  }
  if (over() && o.parkable > 0 && t.wrapper_between_parked > 0 && o.blocks_away_between) c.parked = level(2);
  c.fits = !over();
  if (!c.fits) c.least = least_peak(t, c.parked, c.figures);
  return c;
}

}  // namespace qsmcore::networks::reserve
