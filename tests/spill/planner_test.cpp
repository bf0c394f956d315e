// The activation spill planner in isolation (spill/planner.h), on hand-made buffer
// lifetimes whose best answers are known: what it spills, where values come back, what moves.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "spill/spill.h"

using qsmcore::memory::Lifetime;
using qsmcore::memory::plan_all_spilled;
using qsmcore::memory::plan_spills;
using qsmcore::memory::Segment;
using qsmcore::memory::SpillBuffer;
using qsmcore::memory::SpillLayout;

namespace {

constexpr std::size_t kMiB = 1 << 20;

SpillBuffer buffer(std::size_t bytes, std::vector<int> events, std::vector<bool> writes) {
  return {bytes, std::move(events), std::move(writes), {}, {}};
}

// A U-Net in miniature: a chain of 1 MiB activations (each written at step s, read at s + 1)
// and one 4 MiB skip written at step 0 and read at step 10.
std::vector<SpillBuffer> unet() {
  std::vector<SpillBuffer> b = {buffer(4 * kMiB, {0, 10}, {true, false})};
  for (int s = 0; s < 10; ++s) b.push_back(buffer(kMiB, {s, s + 1}, {true, false}));
  return b;
}

// Every segment of every buffer covers each event once, in order, and no two segments live at
// the same step share bytes.
// A streamed event lies in no segment: the segments and the streams cover the events together.
void expect_consistent(const std::vector<SpillBuffer>& bufs, const SpillLayout& l) {
  std::set<std::pair<int, int>> streamed;
  for (const auto& st : l.streams) streamed.insert({st.buffer, st.event});
  auto skip_streamed = [&](int b, std::size_t k) {
    while (streamed.count({b, static_cast<int>(k)})) ++k;
    return k;
  };
  std::vector<std::size_t> next_event(bufs.size(), 0);
  for (const Segment& s : l.segments) {
    const auto& b = bufs[static_cast<std::size_t>(s.buffer)];
    EXPECT_EQ(static_cast<std::size_t>(s.first_event),
              skip_streamed(s.buffer, next_event[static_cast<std::size_t>(s.buffer)]));
    next_event[static_cast<std::size_t>(s.buffer)] = static_cast<std::size_t>(s.last_event) + 1;
    for (int k = s.first_event; k <= s.last_event; ++k) EXPECT_FALSE(streamed.count({s.buffer, k}));
    EXPECT_LE(s.first, b.events[static_cast<std::size_t>(s.first_event)]);
    EXPECT_GE(s.last, b.events[static_cast<std::size_t>(s.last_event)]);
    EXPECT_LE(s.offset + b.bytes, l.arena);
  }
  for (std::size_t i = 0; i < bufs.size(); ++i)
    EXPECT_EQ(skip_streamed(static_cast<int>(i), next_event[i]), bufs[i].events.size()) << "buffer " << i;
  for (std::size_t i = 0; i < l.segments.size(); ++i)
    for (std::size_t j = i + 1; j < l.segments.size(); ++j) {
      const Segment& a = l.segments[i];
      const Segment& b = l.segments[j];
      if (a.last < b.first || b.last < a.first) continue;
      const std::size_t ea = a.offset + bufs[static_cast<std::size_t>(a.buffer)].bytes;
      const std::size_t eb = b.offset + bufs[static_cast<std::size_t>(b.buffer)].bytes;
      EXPECT_TRUE(ea <= b.offset || eb <= a.offset) << "segments " << i << " and " << j << " overlap";
    }
}

}  // namespace

TEST(SpillPlanner, NoLimitOrRoomEnoughSpillsNothing) {
  const auto bufs = unet();
  for (std::size_t limit : {std::size_t{0}, 100 * kMiB}) {
    const SpillLayout l = plan_spills(bufs, {}, limit);
    EXPECT_TRUE(l.fits);
    EXPECT_EQ(l.file_bytes, 0u);
    EXPECT_EQ(l.spilled_gaps(), 0u);
    EXPECT_EQ(l.segments.size(), bufs.size());
    EXPECT_EQ(l.arena, 6 * kMiB);  // the skip + two chain links at once
    expect_consistent(bufs, l);
  }
}

TEST(SpillPlanner, TheSkipConnectionLeavesOverlappedWhenTheBusiestStepsAreAwayFromItsUses) {
  // A 3 MiB bulge at steps 4..6 makes step 5 the busiest (9 MiB); the skip's uses are far away.
  auto bufs = unet();
  bufs.push_back(buffer(3 * kMiB, {4, 6}, {true, false}));
  const SpillLayout l = plan_spills(bufs, {}, 6 * kMiB);
  ASSERT_TRUE(l.fits);
  EXPECT_LE(l.arena, 6 * kMiB);
  expect_consistent(bufs, l);
  // The skip: written out during step 1, absent for steps 2..8, read back during step 9.
  ASSERT_EQ(l.spilled_gaps(), 1u);
  const Segment& out = l.segments[0];
  const Segment& back = l.segments[1];
  EXPECT_EQ(out.buffer, 0);
  EXPECT_TRUE(out.write_out);
  EXPECT_FALSE(out.write_sync);
  EXPECT_EQ(out.last, 1);
  EXPECT_TRUE(back.reload);
  EXPECT_FALSE(back.read_sync);
  EXPECT_FALSE(back.write_out);
  EXPECT_EQ(back.first, 9);
  EXPECT_EQ(l.write_bytes, 4 * kMiB);
  EXPECT_EQ(l.read_bytes, 4 * kMiB);
  EXPECT_EQ(l.file_bytes, 4 * kMiB);
}

TEST(SpillPlanner, TransfersNextToTheBusiestStepsBecomeSynchronous) {
  // Every step from 1 to 9 holds the skip and two links (6 MiB): an overlapped transfer would
  // hold the skip at step 1 and 9, so only synchronous ones fit 5 MiB.
  const auto bufs = unet();
  const SpillLayout l = plan_spills(bufs, {}, 5 * kMiB);
  ASSERT_TRUE(l.fits);
  EXPECT_LE(l.arena, 5 * kMiB);
  expect_consistent(bufs, l);
  ASSERT_EQ(l.spilled_gaps(), 1u);
  EXPECT_TRUE(l.segments[0].write_sync);
  EXPECT_EQ(l.segments[0].last, 0);
  EXPECT_TRUE(l.segments[1].read_sync);
  EXPECT_EQ(l.segments[1].first, 10);
}

TEST(SpillPlanner, AValueReadManyTimesIsWrittenOnceAndReadBackForEachUse) {
  // Written at 0, read at 5, 10 and 15; the other buffer fills the rest of the arena throughout.
  const std::vector<SpillBuffer> bufs = {buffer(kMiB, {0, 5, 10, 15}, {true, false, false, false}),
                                         buffer(2 * kMiB, {0, 15}, {true, false})};
  const SpillLayout l = plan_all_spilled(bufs, {});
  expect_consistent(bufs, l);
  EXPECT_EQ(l.write_bytes, 3 * kMiB);  // the small one once, the large one once
  EXPECT_EQ(l.read_bytes, 3 * kMiB + 2 * kMiB);
}

TEST(SpillPlanner, AValueRewrittenInPlaceIsWrittenAgain) {
  // An in-place group: written at 0, updated in place at 5, read at 10.
  const std::vector<SpillBuffer> bufs = {buffer(kMiB, {0, 5, 10}, {true, true, false})};
  const SpillLayout l = plan_all_spilled(bufs, {});
  EXPECT_EQ(l.write_bytes, 2 * kMiB);
  EXPECT_EQ(l.read_bytes, 2 * kMiB);
}

TEST(SpillPlanner, BuffersReadAtTheNextStepStayResident) {
  // Nothing to gain: there is no step between the write and the read.
  const std::vector<SpillBuffer> bufs = {buffer(kMiB, {0, 1}, {true, false}), buffer(kMiB, {0, 1}, {true, false})};
  const SpillLayout l = plan_spills(bufs, {}, kMiB);
  EXPECT_FALSE(l.fits);
  EXPECT_EQ(l.spilled_gaps(), 0u);
  EXPECT_EQ(l.arena, 2 * kMiB);
}

TEST(SpillPlanner, ScratchIsNeverSpilledAndBoundsTheSmallestArena) {
  // A 3 MiB scratchpad at step 5 with a 1 MiB value read there: 4 MiB is the floor.
  const auto bufs = unet();
  const std::vector<Lifetime> scratch = {{3 * kMiB, 5, 5}};
  const SpillLayout least = plan_all_spilled(bufs, scratch);
  expect_consistent(bufs, least);
  EXPECT_EQ(least.arena, 5 * kMiB);  // two chain links and the scratch at step 5
  ASSERT_EQ(least.fixed_offsets.size(), 1u);
  const SpillLayout below = plan_spills(bufs, scratch, 4 * kMiB);
  EXPECT_FALSE(below.fits);
  EXPECT_EQ(below.arena, least.arena) << "when nothing fits, the smallest arena is returned";
}

// A step that can stream its operands (a conv chain): its input A and output B, 8 MiB each, are
// live together at step 1 with no step between their uses to spill in. Streamed, step 1 holds
// only their staging blocks, and the least arena is one of them, not both.
std::vector<SpillBuffer> streamable_step() {
  SpillBuffer a = buffer(8 * kMiB, {0, 1}, {true, false});
  a.stream_bytes = {SpillBuffer::kNoStream, kMiB};
  a.reads = {0, 1};
  SpillBuffer b = buffer(8 * kMiB, {1, 2}, {true, false});
  b.stream_bytes = {kMiB / 2, SpillBuffer::kNoStream};
  b.reads = {0, 0};
  return {a, b};
}

TEST(SpillPlanner, AStreamingStepHoldsOnlyItsStagingBlocks) {
  const auto bufs = streamable_step();
  EXPECT_EQ(plan_spills(bufs, {}, 0).arena, 16 * kMiB) << "unlimited: nothing streams";
  const SpillLayout least = plan_all_spilled(bufs, {});
  expect_consistent(bufs, least);
  EXPECT_EQ(least.arena, 8 * kMiB) << "steps 0 and 2 hold one buffer each; step 1 only 1.5 MiB of staging";
  ASSERT_EQ(least.streams.size(), 2u);
  for (const auto& st : least.streams) EXPECT_EQ(st.step, 1);
  // A is written out right after step 0 (no step between to overlap it with) and read by the
  // streaming step; B is written by the step and read back right before step 2.
  EXPECT_EQ(least.write_bytes, 16 * kMiB);
  EXPECT_EQ(least.read_bytes, 16 * kMiB);
  EXPECT_EQ(least.streamed_bytes, 16 * kMiB) << "the step reads A and writes B, 8 MiB each";
  ASSERT_EQ(least.segments.size(), 2u);
  EXPECT_TRUE(least.segments[0].write_out && least.segments[0].write_sync);
  EXPECT_EQ(least.segments[0].last, 0);
  EXPECT_TRUE(least.segments[1].reload && least.segments[1].read_sync);
  EXPECT_EQ(least.segments[1].first, 2);
  EXPECT_GT(least.file_bytes, 0u);
}

TEST(SpillPlanner, StreamsOnlyWhatTheLimitNeeds) {
  const auto bufs = streamable_step();
  // 10 MiB: streaming one of the two is enough, and the planner takes the larger saving (A: its
  // staging is the larger, so B saves more).
  const SpillLayout l = plan_spills(bufs, {}, 10 * kMiB);
  expect_consistent(bufs, l);
  EXPECT_TRUE(l.fits);
  EXPECT_LE(l.arena, 10 * kMiB);
  ASSERT_EQ(l.streams.size(), 1u);
  EXPECT_EQ(l.streams[0].buffer, 1);
  EXPECT_EQ(l.write_bytes, 8 * kMiB) << "the step writes B to the file";
  EXPECT_EQ(l.read_bytes, 8 * kMiB) << "and it is read back before step 2";
  EXPECT_EQ(l.streamed_bytes, 8 * kMiB) << "the write is the streamed event's";
}

TEST(SpillPlanner, AnEventThatCannotStreamOrSavesNothingStays) {
  auto bufs = streamable_step();
  bufs[0].stream_bytes[1] = SpillBuffer::kNoStream;
  bufs[1].stream_bytes[0] = 8 * kMiB;  // staging as large as the buffer: nothing to gain
  const SpillLayout l = plan_all_spilled(bufs, {});
  EXPECT_TRUE(l.streams.empty());
  EXPECT_EQ(l.arena, 16 * kMiB);
}
