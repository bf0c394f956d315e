// The budget cascade of a network run (Context::reserve) as numbers: given what the run's phases
// cost and the budget, how many tiles run at once, what parks in the spill directory, whether the
// graphs' activations spill, or that nothing fits and the least budget the refusal names. The
// order (memory.md §9): fewer tiles in flight; then parking alone where the unspilled run fits
// with it; else spilling alone; else parking and spilling; else the wrapper's blocks away between
// graph runs too; else refusal. Finer slabs are the engine's part of spilling
// (runtime/layout_choice.h). Pure but for the spill step, which the caller supplies (it plans
// the graphs' layouts); tests/networks/reserve_solver_test.cpp checks it on hand-made numbers.
//
// All figures are bytes above what was allocated before the run (Context's baseline).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>

namespace qsmcore::networks::reserve {

/// The wrapper's buffers in each phase (Context::Reservation's terms).
struct Terms {
  std::int64_t wrapper_fixed = 0;           // held during the whole run
  std::int64_t wrapper_per_tile = 0;        // per tile in flight
  std::int64_t wrapper_between = 0;         // held only between graph runs (beside wrapper_fixed)
  std::int64_t wrapper_between_parked = 0;  // all it holds between graph runs, its blocks away (0: cannot)
  std::int64_t wrapper_prepare = 0;         // while it reads its inputs, before the first graph run
};

/// What parks: nothing (level 0), the parkable bytes around each graph run (1), and the
/// wrapper's blocks away between graph runs too (2).
struct Parked {
  std::int64_t around_runs = 0;  // away while a graph runs
  std::int64_t between = 0;      // away between graph runs too (the inputs, once done with)
  bool blocks_away_between = false;
  bool operator==(const Parked&) const = default;
};

/// What was measured: the budget above the baseline, and what the run holds.
struct Figures {
  std::int64_t budget = 0;     // the engine's budget above the baseline
  std::int64_t load_peak = 0;  // loading's own peak
  std::int64_t held = 0;       // the models and their plans
  std::int64_t window = 0;     // the streamed weight window (held once, whatever runs at once)
  std::int64_t run_peak = 0;   // one graph run, its window aside
  std::int64_t least_run = 0;  // one graph run spilled to its least (0: not weighed)
};

/// The wrapper's and the runs' bytes while graphs run (`runs`: their bytes, all in flight).
std::int64_t run_term(const Terms& t, const Parked& p, std::int64_t window, std::int64_t runs);
/// The wrapper's bytes between graph runs.
std::int64_t between_term(const Terms& t, const Parked& p);
/// The run's predicted peak with `n` tiles in flight.
std::int64_t peak(const Terms& t, const Parked& p, const Figures& f, std::int64_t n);
inline bool fits(const Terms& t, const Parked& p, const Figures& f, std::int64_t n) {
  return peak(t, p, f, n) <= f.budget;
}
/// The most tiles in flight, from `wanted` down to 1, that fit (1 when none does).
std::int64_t most_in_flight(const Terms& t, const Parked& p, const Figures& f, std::int64_t wanted);
/// The whole run's peak (one tile) with its graph runs spilled to f.least_run: what a refusal
/// names as the least; nullopt where spilling was not weighed or lowers nothing.
std::optional<std::int64_t> least_peak(const Terms& t, const Parked& p, const Figures& f);

/// What the cascade may use.
struct Options {
  bool spill = false;                   // activations may spill
  std::int64_t parkable = 0;            // bytes that may park around graph runs (0: none)
  std::int64_t parked_inputs = 0;       // of those, the input volumes'
  bool inputs_read_in_prepare = false;  // the inputs stay parked between graph runs too
  bool blocks_away_between = false;     // the wrapper's blocks may stay away between runs (level 2)
};

/// The spill step: the figures once the graphs' activations spill to fit the room that
/// parking `p` leaves (run_peak lowered, least_run set; the budget may shrink where the finer
/// plans hold more outside the engine); unchanged run_peak where they cannot fit.
using SpillFit = std::function<Figures(const Parked& p, const Figures& f)>;

struct Choice {
  Parked parked;
  Figures figures;       // after spilling, where it spilled
  bool spilled = false;  // the spill step ran
  bool fits = false;
  std::optional<std::int64_t> least;  // when it does not fit: least_peak
};

/// The parking and spilling cascade for one tile in flight or more (`n`, after most_in_flight).
Choice solve(const Terms& t, const Options& o, const Figures& f, std::int64_t n, const SpillFit& spill_fit);

}  // namespace qsmcore::networks::reserve
