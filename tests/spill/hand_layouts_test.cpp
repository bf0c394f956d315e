// The spill planner (spill/planner.h) on hand-made buffers small enough to lay out by hand, as
// llama.cpp's tests/test-alloc.cpp does for its allocator: each test states the buffers'
// sizes and steps, works out in its comments the busiest step, the arena the layout needs and
// what goes to the file, and checks the planner's answer against those figures. Every layout
// is also checked for what any layout must keep: no two blocks in the arena at the same step
// share a byte (resident stretches, staging blocks of streamed events, scratch), and every
// block lies inside the arena.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spill/spill.h"

using qsmcore::memory::Lifetime;
using qsmcore::memory::plan_all_spilled;
using qsmcore::memory::plan_spills;
using qsmcore::memory::Segment;
using qsmcore::memory::SpillBuffer;
using qsmcore::memory::SpillLayout;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

SpillBuffer buffer(std::size_t bytes, std::vector<int> events, std::vector<bool> writes) {
  return {bytes, std::move(events), std::move(writes), {}, {}};
}

// Written at step s, read at step s + 1.
SpillBuffer link(std::size_t bytes, int s) {
  return buffer(bytes, {s, s + 1}, {true, false});
}

// One block of the arena over steps [first, last].
struct Block {
  std::string what;
  std::size_t offset = 0, bytes = 0;
  int first = 0, last = 0;
};

std::size_t aligned64(std::size_t n) {
  return (n + 63) / 64 * 64;
}

std::vector<Block> blocks_of(const std::vector<SpillBuffer>& bufs, const std::vector<Lifetime>& fixed,
                             const SpillLayout& l) {
  std::vector<Block> out;
  for (const Segment& s : l.segments)
    out.push_back(
        {"buffer " + std::to_string(s.buffer) + " steps " + std::to_string(s.first) + ".." + std::to_string(s.last),
         s.offset, aligned64(bufs[static_cast<std::size_t>(s.buffer)].bytes), s.first, s.last});
  for (const auto& st : l.streams) {
    const auto& b = bufs[static_cast<std::size_t>(st.buffer)];
    out.push_back({"staging of buffer " + std::to_string(st.buffer) + " at step " + std::to_string(st.step), st.offset,
                   aligned64(b.stream_bytes[static_cast<std::size_t>(st.event)]), st.step, st.step});
  }
  EXPECT_EQ(l.fixed_offsets.size(), fixed.size());
  for (std::size_t i = 0; i < fixed.size() && i < l.fixed_offsets.size(); ++i)
    out.push_back(
        {"scratch " + std::to_string(i), l.fixed_offsets[i], aligned64(fixed[i].bytes), fixed[i].first, fixed[i].last});
  return out;
}

// No two blocks live at one step share a byte, and each lies inside the arena.
void expect_no_overlap(const std::vector<SpillBuffer>& bufs, const std::vector<Lifetime>& fixed, const SpillLayout& l) {
  const std::vector<Block> blocks = blocks_of(bufs, fixed, l);
  for (const Block& b : blocks) EXPECT_LE(b.offset + b.bytes, l.arena) << b.what << " ends past the arena";
  for (std::size_t i = 0; i < blocks.size(); ++i)
    for (std::size_t j = i + 1; j < blocks.size(); ++j) {
      const Block& a = blocks[i];
      const Block& b = blocks[j];
      if (a.last < b.first || b.last < a.first) continue;  // never live together
      EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset)
          << a.what << " [" << a.offset << ", +" << a.bytes << ") and " << b.what << " [" << b.offset << ", +"
          << b.bytes << ") share bytes";
    }
}

// A chain of 1 MiB links L0..L(n-1) (Ls written at s, read at s + 1) beside a skip S of
// `skip` bytes written at step 0 and read at step n (a U-Net's skip connection).
std::vector<SpillBuffer> skip_and_chain(std::size_t skip, int n) {
  std::vector<SpillBuffer> b = {buffer(skip, {0, n}, {true, false})};
  for (int s = 0; s < n; ++s) b.push_back(link(kMiB, s));
  return b;
}

}  // namespace

TEST(SpillHandLayouts, AChainReusesTheBytesOfEachLinkOnceItIsRead) {
  // L0..L3, 1 MiB each: at every step two links are live (the one read, the one written), so
  // the arena is 2 MiB, not 4, and nothing is spilled.
  std::vector<SpillBuffer> bufs;
  for (int s = 0; s < 4; ++s) bufs.push_back(link(kMiB, s));
  const SpillLayout l = plan_spills(bufs, {}, 0);
  expect_no_overlap(bufs, {}, l);
  EXPECT_EQ(l.arena, 2 * kMiB);
  EXPECT_TRUE(l.fits);
  EXPECT_EQ(l.file_bytes, 0u);
  EXPECT_EQ(l.write_bytes + l.read_bytes, 0u);
  EXPECT_EQ(l.segments.size(), 4u) << "one resident stretch per buffer";
}

TEST(SpillHandLayouts, AnArenaInPiecesPlacesNoBufferAcrossTwoPieces) {
  // Three 3 MiB buffers live together: 9 MiB in one piece. In pieces of 4 MiB each needs a piece
  // of its own (two never fit in one), so the last starts at 8 MiB: 11 MiB.
  const std::vector<SpillBuffer> bufs = {buffer(3 * kMiB, {0, 2}, {true, false}),
                                         buffer(3 * kMiB, {0, 2}, {true, false}),
                                         buffer(3 * kMiB, {1, 2}, {true, false})};
  const SpillLayout one = plan_spills(bufs, {}, 0);
  expect_no_overlap(bufs, {}, one);
  EXPECT_EQ(one.arena, 9 * kMiB);
  const std::size_t piece = 4 * kMiB;
  const SpillLayout l = plan_spills(bufs, {}, 0, piece);
  expect_no_overlap(bufs, {}, l);
  EXPECT_EQ(l.arena, 11 * kMiB);
  for (const Segment& s : l.segments)
    EXPECT_EQ(s.offset / piece, (s.offset + 3 * kMiB - 1) / piece) << "buffer " << s.buffer << " straddles a piece";
}

TEST(SpillHandLayouts, ABulgeAwayFromTheSkipsUsesSendsTheSkipOutBesideTheKernels) {
  // S (4 MiB, steps 0 and 8), links L0..L7 and a bulge X (4 MiB, steps 3 and 5). Live bytes:
  //   step   0  1  2  3   4   5   6  7  8
  //   MiB    5  6  6  10  10  10  6  6  5     (S + the links + X at 3..5)
  // so the whole-life layout needs 10 MiB. Within 8 MiB the busiest step (3) is freed by the
  // largest buffer present there with a gap around it: S, written out during step 1 (beside
  // L1's kernel) and read back during step 7. Then
  //   step   0  1  2  3  4  5  6  7  8
  //   MiB    5  6  2  6  6  6  2  6  5
  // and the arena is 6 MiB; S goes to the file once (4 MiB written, 4 MiB read back).
  auto bufs = skip_and_chain(4 * kMiB, 8);
  bufs.push_back(buffer(4 * kMiB, {3, 5}, {true, false}));
  const SpillLayout whole = plan_spills(bufs, {}, 0);
  expect_no_overlap(bufs, {}, whole);
  EXPECT_EQ(whole.arena, 10 * kMiB);

  const SpillLayout l = plan_spills(bufs, {}, 8 * kMiB);
  expect_no_overlap(bufs, {}, l);
  EXPECT_TRUE(l.fits);
  EXPECT_EQ(l.arena, 6 * kMiB);
  EXPECT_EQ(l.spilled_gaps(), 1u);
  EXPECT_EQ(l.write_bytes, 4 * kMiB);
  EXPECT_EQ(l.read_bytes, 4 * kMiB);
  EXPECT_EQ(l.file_bytes, 4 * kMiB);
  EXPECT_EQ(l.streamed_bytes, 0u);
  ASSERT_GE(l.segments.size(), 2u);
  const Segment& out = l.segments[0];
  const Segment& back = l.segments[1];
  ASSERT_EQ(out.buffer, 0);
  ASSERT_EQ(back.buffer, 0);
  EXPECT_EQ(out.first, 0);
  EXPECT_EQ(out.last, 1);
  EXPECT_TRUE(out.write_out && !out.write_sync);
  EXPECT_EQ(back.first, 7);
  EXPECT_EQ(back.last, 8);
  EXPECT_TRUE(back.reload && !back.read_sync);
}

TEST(SpillHandLayouts, WhenTheStepsNextToTheUsesAreTheBusiestTheTransfersWaitForThem) {
  // S (4 MiB, steps 0 and 4) and links L0..L3: 5, 6, 6, 6, 5 MiB live. Within 5 MiB an
  // overlapped transfer would still hold S during steps 1 and 3, so S is written right after
  // step 0 and read right before step 4: live 5, 2, 2, 2, 5 MiB, a 5 MiB arena.
  const auto bufs = skip_and_chain(4 * kMiB, 4);
  EXPECT_EQ(plan_spills(bufs, {}, 0).arena, 6 * kMiB);
  const SpillLayout l = plan_spills(bufs, {}, 5 * kMiB);
  expect_no_overlap(bufs, {}, l);
  EXPECT_TRUE(l.fits);
  EXPECT_EQ(l.arena, 5 * kMiB);
  EXPECT_EQ(l.write_bytes, 4 * kMiB);
  EXPECT_EQ(l.read_bytes, 4 * kMiB);
  ASSERT_GE(l.segments.size(), 2u);
  EXPECT_EQ(l.segments[0].last, 0);
  EXPECT_TRUE(l.segments[0].write_sync);
  EXPECT_EQ(l.segments[1].first, 4);
  EXPECT_TRUE(l.segments[1].read_sync);
}

TEST(SpillHandLayouts, FileRegionsStartOnPagesAndEachSpilledBufferHasOne) {
  // A (6400 B, steps 0 and 3) and B (64 B, steps 1 and 4), every gap spilled: A's region is
  // 6400 B rounded up to 8192, B's follows at 8192 and takes 4096: 12288 bytes of file. Each is
  // written once and read once. Live: step 0 A, 1 B, 2 nothing, 3 A, 4 B: a 6400 B arena.
  const std::vector<SpillBuffer> bufs = {buffer(6400, {0, 3}, {true, false}), buffer(64, {1, 4}, {true, false})};
  const SpillLayout l = plan_all_spilled(bufs, {});
  expect_no_overlap(bufs, {}, l);
  EXPECT_EQ(l.arena, 6400u);
  EXPECT_EQ(l.file_bytes, 12288u);
  ASSERT_EQ(l.file_offset.size(), 2u);
  EXPECT_EQ(l.file_offset[0], 0u);
  EXPECT_EQ(l.file_offset[1], 8192u);
  EXPECT_EQ(l.write_bytes, 6400u + 64u);
  EXPECT_EQ(l.read_bytes, 6400u + 64u);
}

TEST(SpillHandLayouts, OnlyAValueChangedSinceItWasReadBackIsWrittenAgain) {
  // V (1 MiB) written at 0, read at 4, updated in place at 8, read at 12: its gaps 0-4, 4-8 and
  // 8-12 all spilled. The file holds it from step 0; the read at 4 leaves it unchanged (no
  // second write); the update at 8 makes the file stale, so it is written again: 2 MiB out,
  // 3 MiB back. W (2 MiB, steps 0 and 12) is written once and read once.
  const std::vector<SpillBuffer> bufs = {buffer(kMiB, {0, 4, 8, 12}, {true, false, true, false}),
                                         buffer(2 * kMiB, {0, 12}, {true, false})};
  const SpillLayout l = plan_all_spilled(bufs, {});
  expect_no_overlap(bufs, {}, l);
  EXPECT_EQ(l.write_bytes, 2 * kMiB + 2 * kMiB);
  EXPECT_EQ(l.read_bytes, 3 * kMiB + 2 * kMiB);
  EXPECT_EQ(l.spilled_gaps(), 3u + 1u);
  EXPECT_EQ(l.arena, 3 * kMiB) << "steps 0 and 12 hold both";
}

TEST(SpillHandLayouts, ScratchAndStagingBlocksShareNoBytesWithResidentValues) {
  // Step 1 streams A (8 MiB, written at 0) through 1 MiB of staging and writes B (8 MiB, read at
  // 2) through 512 KiB; a 2 MiB scratchpad is live at step 1 too. Least arena: steps 0 and 2
  // hold one 8 MiB buffer; step 1 holds 1 + 0.5 + 2 MiB. So 8 MiB, and the blocks of step 1 may
  // sit anywhere in it but on each other.
  SpillBuffer a = buffer(8 * kMiB, {0, 1}, {true, false});
  a.stream_bytes = {SpillBuffer::kNoStream, kMiB};
  a.reads = {0, 1};
  SpillBuffer b = buffer(8 * kMiB, {1, 2}, {true, false});
  b.stream_bytes = {kMiB / 2, SpillBuffer::kNoStream};
  b.reads = {0, 0};
  const std::vector<SpillBuffer> bufs = {a, b};
  const std::vector<Lifetime> scratch = {{2 * kMiB, 1, 1}};
  const SpillLayout l = plan_all_spilled(bufs, scratch);
  expect_no_overlap(bufs, scratch, l);
  EXPECT_EQ(l.arena, 8 * kMiB);
  ASSERT_EQ(l.streams.size(), 2u);
  // A: written out after step 0, streamed in by step 1; B: streamed out by step 1, read back
  // before step 2. 16 MiB each way, all of it by the streaming step's kernel except the two
  // whole-buffer transfers: streamed = A's read + B's write.
  EXPECT_EQ(l.write_bytes, 16 * kMiB);
  EXPECT_EQ(l.read_bytes, 16 * kMiB);
  EXPECT_EQ(l.streamed_bytes, 16 * kMiB);
  // Unspilled, step 1 holds A, B and the scratch: 18 MiB. Within 11.5 MiB streaming one event
  // is enough, and the planner takes the larger saving: B's (8 - 0.5 MiB) over A's (8 - 1).
  // Step 1 then holds A, B's staging and the scratch: 10.5 MiB; B is written by step 1's
  // kernel and read back before step 2 (8 MiB each way).
  const SpillLayout some = plan_spills(bufs, scratch, 11 * kMiB + kMiB / 2);
  expect_no_overlap(bufs, scratch, some);
  EXPECT_TRUE(some.fits);
  ASSERT_EQ(some.streams.size(), 1u);
  EXPECT_EQ(some.streams[0].buffer, 1);
  EXPECT_EQ(some.arena, 10 * kMiB + kMiB / 2);
  EXPECT_EQ(some.write_bytes, 8 * kMiB);
  EXPECT_EQ(some.read_bytes, 8 * kMiB);
}
