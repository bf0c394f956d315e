// The budget cascade (networks/reserve_solver.h) on hand-made numbers: each branch (fits as is,
// fewer tiles, parking alone, spilling alone, parking and spilling, the wrapper's blocks away
// between runs, refusal), its boundaries (a peak equal to the budget fits, one byte more does
// not) and the least the refusal names. Expected peaks are summed by hand from the phase terms:
// peak = max(loading, held + max(wrapper_fixed + window + tiles * (run + per_tile) - parked,
// between, prepare)).
#include "networks/reserve_solver.h"

#include <gtest/gtest.h>

#include <vector>

namespace rs = qsmcore::networks::reserve;

namespace {

rs::Terms terms() {
  rs::Terms t;
  t.wrapper_fixed = 100;
  t.wrapper_per_tile = 10;
  t.wrapper_between = 50;
  t.wrapper_prepare = 0;
  return t;
}

// held 200, window 40, one run 1000: a tile's peak is 200 + 100 + 40 + 1010 = 1350.
rs::Figures figures(std::int64_t budget) {
  rs::Figures f;
  f.budget = budget;
  f.load_peak = 300;
  f.held = 200;
  f.window = 40;
  f.run_peak = 1000;
  return f;
}

// The spill step of a model whose graph runs can spill down to `least`: the run takes what the
// room that parking leaves allows (budget - held - window - fixed - per tile + parked), or stays
// as it was where that is below its least. Records the parking it was asked with.
struct FakeSpill {
  std::int64_t least = 400;
  std::vector<rs::Parked> asked;
  rs::SpillFit fn(const rs::Terms& t) {
    return [this, t](const rs::Parked& p, const rs::Figures& in) {
      asked.push_back(p);
      rs::Figures f = in;
      const std::int64_t room = f.budget - f.held - f.window - t.wrapper_fixed - t.wrapper_per_tile + p.around_runs;
      f.least_run = least;
      if (room >= least) f.run_peak = std::min(f.run_peak, room);
      return f;
    };
  }
};

}  // namespace

TEST(ReserveSolver, PeakAddsThePhaseTerms) {
  const rs::Terms t = terms();
  const rs::Figures f = figures(0);
  EXPECT_EQ(rs::peak(t, {}, f, 1), 1350);
  EXPECT_EQ(rs::peak(t, {}, f, 3), 200 + 100 + 40 + 3 * 1010);  // the window once
  EXPECT_EQ(rs::peak(t, {500, 0, false}, f, 1), 850);           // parked while it runs
  rs::Figures small = f;
  small.run_peak = 0;
  small.window = 0;
  EXPECT_EQ(rs::peak(t, {}, small, 1), 350);  // between runs: 100 + 50 above held
  small.load_peak = 400;
  EXPECT_EQ(rs::peak(t, {}, small, 1), 400);  // loading's peak
  rs::Terms prep = t;
  prep.wrapper_prepare = 2000;
  EXPECT_EQ(rs::peak(prep, {}, f, 1), 2200);  // reading the inputs
  // Away between runs: the blocks' own figure, less the inputs parked.
  prep = t;
  prep.wrapper_between_parked = 30;
  EXPECT_EQ(rs::between_term(prep, {0, 5, true}), 25);
  EXPECT_EQ(rs::between_term(prep, {0, 5, false}), 145);
}

TEST(ReserveSolver, TilesInFlightAreTheMostThatFit) {
  const rs::Terms t = terms();
  // n tiles: 340 + 1010 n. 3 tiles = 3370.
  EXPECT_EQ(rs::most_in_flight(t, {}, figures(3370), 8), 3);
  EXPECT_EQ(rs::most_in_flight(t, {}, figures(3369), 8), 2);
  EXPECT_EQ(rs::most_in_flight(t, {}, figures(100000), 8), 8);
  EXPECT_EQ(rs::most_in_flight(t, {}, figures(10), 8), 1);  // never below one
  EXPECT_EQ(rs::most_in_flight(t, {}, figures(10), 0), 1);
}

TEST(ReserveSolver, AFittingRunParksAndSpillsNothing) {
  FakeSpill s;
  const rs::Terms t = terms();
  const rs::Choice c = rs::solve(t, {true, 0, 0, false, true}, figures(1350), 1, s.fn(t));
  EXPECT_TRUE(c.fits);
  EXPECT_FALSE(c.spilled);
  EXPECT_TRUE(s.asked.empty());
  EXPECT_EQ(c.parked, rs::Parked{});
  EXPECT_EQ(c.figures.run_peak, 1000);
}

TEST(ReserveSolver, ParkingAloneWhereTheUnspilledRunThenFits) {
  FakeSpill s;
  const rs::Terms t = terms();
  rs::Options o{true, 300, 120, true, true};  // 300 parkable, 120 of them inputs read only first
  // 1350 - 300 = 1050 fits 1050 exactly.
  rs::Choice c = rs::solve(t, o, figures(1050), 1, s.fn(t));
  EXPECT_TRUE(c.fits);
  EXPECT_FALSE(c.spilled);
  EXPECT_EQ(c.parked, (rs::Parked{300, 120, false}));
  EXPECT_EQ(rs::peak(t, c.parked, c.figures, 1), 1050);
  // One byte less: parking alone does not fit; spilling alone (parking off) does.
  c = rs::solve(t, o, figures(1049), 1, s.fn(t));
  EXPECT_TRUE(c.fits);
  EXPECT_TRUE(c.spilled);
  ASSERT_EQ(s.asked.size(), 1u);
  EXPECT_EQ(s.asked[0], rs::Parked{});
  EXPECT_EQ(c.parked, rs::Parked{});
  // Room for the run: 1049 - 200 - 40 - 100 - 10 = 699.
  EXPECT_EQ(c.figures.run_peak, 699);
  EXPECT_EQ(rs::peak(t, c.parked, c.figures, 1), 1049);
}

TEST(ReserveSolver, ParkingAndSpillingWhereSpillingAloneDoesNotFit) {
  FakeSpill s;
  s.least = 400;
  const rs::Terms t = terms();
  const rs::Options o{true, 300, 0, false, true};
  // Spilled alone the run needs at least 200 + 100 + 40 + 410 = 750; parking 300 beside it 450.
  rs::Choice c = rs::solve(t, o, figures(749), 1, s.fn(t));
  EXPECT_TRUE(c.fits);
  EXPECT_TRUE(c.spilled);
  ASSERT_EQ(s.asked.size(), 2u);
  EXPECT_EQ(s.asked[0], rs::Parked{});
  EXPECT_EQ(s.asked[1], (rs::Parked{300, 0, false}));
  EXPECT_EQ(c.parked, (rs::Parked{300, 0, false}));
  // Room with 300 parked: 749 - 350 + 300 = 699.
  EXPECT_EQ(c.figures.run_peak, 699);
  EXPECT_LE(rs::peak(t, c.parked, c.figures, 1), 749);
  // At the boundary: spilling alone fits 750 exactly, so nothing parks.
  s.asked.clear();
  c = rs::solve(t, o, figures(750), 1, s.fn(t));
  EXPECT_TRUE(c.fits);
  EXPECT_EQ(s.asked.size(), 1u);
  EXPECT_EQ(c.parked, rs::Parked{});
  EXPECT_EQ(c.figures.run_peak, 400);
}

TEST(ReserveSolver, TheBlocksAwayBetweenRunsWhereTheStepBetweenIsWhatDoesNotFit) {
  FakeSpill s;
  rs::Terms t = terms();
  t.wrapper_between = 900;         // between runs: 100 + 900 = 1000 above held
  t.wrapper_between_parked = 150;  // with the blocks away: 150
  rs::Options o{true, 300, 0, false, true};
  // The graph runs fit once spilled with 300 parked (749); between them 200 + 1000 does not.
  rs::Choice c = rs::solve(t, o, figures(749), 1, s.fn(t));
  EXPECT_TRUE(c.fits);
  EXPECT_EQ(c.parked, (rs::Parked{300, 0, true}));
  EXPECT_EQ(rs::between_term(t, c.parked), 150);
  // Not where the wrapper may not keep its blocks away (NetworkOptions::park_buffers off).
  o.blocks_away_between = false;
  c = rs::solve(t, o, figures(749), 1, s.fn(t));
  EXPECT_FALSE(c.fits);
  EXPECT_EQ(c.parked, (rs::Parked{300, 0, false}));
}

TEST(ReserveSolver, NothingFitsNamesTheLeastBudget) {
  FakeSpill s;
  s.least = 400;
  const rs::Terms t = terms();
  // Without parking, below the spilled least of 750: refused, naming 750 (one run at its least,
  // 410 with its tile's buffers, where it was 1010).
  rs::Choice c = rs::solve(t, {true, 0, 0, false, true}, figures(749), 1, s.fn(t));
  EXPECT_FALSE(c.fits);
  EXPECT_TRUE(c.spilled);
  ASSERT_TRUE(c.least);
  EXPECT_EQ(*c.least, 750);
  EXPECT_EQ(c.figures.run_peak, 1000) << "a spill that cannot fit leaves the run as it was";
  // With the budget one byte above, it fits.
  c = rs::solve(t, {true, 0, 0, false, true}, figures(750), 1, s.fn(t));
  EXPECT_TRUE(c.fits);
  // Where the run between graph runs sets the peak, spilling lowers nothing of it: the least is
  // the between-runs peak.
  rs::Terms big_between = t;
  big_between.wrapper_between = 2000;  // 200 + 2100 = 2300
  c = rs::solve(big_between, {true, 0, 0, false, true}, figures(749), 1, s.fn(big_between));
  EXPECT_FALSE(c.fits);
  ASSERT_TRUE(c.least);
  EXPECT_EQ(*c.least, 2300);
}

TEST(ReserveSolver, WithoutSpillingNothingSpillsAndTheRefusalNamesNoSpilledLeast) {
  FakeSpill s;
  const rs::Terms t = terms();
  const rs::Choice c = rs::solve(t, {false, 0, 0, false, true}, figures(1349), 1, s.fn(t));
  EXPECT_FALSE(c.fits);
  EXPECT_FALSE(c.spilled);
  EXPECT_TRUE(s.asked.empty());
  EXPECT_FALSE(c.least);
  EXPECT_TRUE(rs::solve(t, {false, 0, 0, false, true}, figures(1350), 1, s.fn(t)).fits);
}
