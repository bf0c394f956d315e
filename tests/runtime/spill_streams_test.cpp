// A kernel's streamed operands (issue #16) through SpillTransfers, on a layout made by hand:
// whatever order and sizes a kernel writes an operand in (slabs ending inside file blocks, in
// order, backwards, one slab larger than the io block), another step reads back exactly the
// bytes written, in slabs with a halo (overlapping reads) or in order; neighbouring operands'
// regions are left alone; the report counts every byte. Where the spill directory takes direct
// I/O (ext4 here), the direct path is the one checked (SpillFile::direct), else the page-cache one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "memory/arena_pieces.h"
#include "spill/spill.h"

namespace qsmcore {
namespace {

constexpr std::size_t kStaging = 3 * 4096 + 100;  // slabs up to this, not whole blocks
constexpr std::size_t kA = 200003, kB = 77777;    // operand sizes, not whole blocks

std::size_t region(std::size_t bytes) {
  return (bytes + 4095) / 4096 * 4096;
}

// Step 0 writes A (slot 0) and B (slot 1); step 1 reads them (slots 0 and 1). Each operand has
// its staging block and its io block in the arena.
ArenaLayout two_operands() {
  ArenaLayout l;
  l.file_bytes = region(kA) + region(kB);
  l.streamed.resize(2);
  l.transfers.resize(2);
  const std::size_t io = residency::SpillFile::stream_io_bytes(kStaging);
  std::size_t at = 0;
  for (int step = 0; step < 2; ++step)
    for (std::size_t slot = 0; slot < 2; ++slot) {
      ArenaLayout::Streamed s;
      s.output = step == 0;
      s.slot = slot;
      s.file_offset = slot == 0 ? 0 : region(kA);
      s.operand_bytes = slot == 0 ? kA : kB;
      s.staging_offset = at + 64;  // not on a block: the operand aligns its io block itself
      s.staging_bytes = kStaging;
      s.io_offset = s.staging_offset + (kStaging + 63) / 64 * 64;
      s.io_bytes = io;
      at = s.io_offset + io;
      l.streamed[static_cast<std::size_t>(step)].push_back(s);
    }
  l.arena_bytes = at;
  return l;
}

std::vector<std::uint8_t> bytes_of(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>((i * 131 + seed) ^ (i >> 9));
  return v;
}

enum class Order { Forward, Backward, EvensThenOdds };

// Writes `data` through `op` a slab at a time from its staging, slab sizes cycling through `sizes`.
void write_slabs(const kernels::StreamedOperand& op, const std::vector<std::uint8_t>& data,
                 const std::vector<std::size_t>& sizes, Order order) {
  std::vector<std::pair<std::size_t, std::size_t>> slabs;
  for (std::size_t at = 0, k = 0; at < data.size(); ++k) {
    const std::size_t n = std::min(sizes[k % sizes.size()], data.size() - at);
    slabs.emplace_back(at, n);
    at += n;
  }
  if (order == Order::Backward) std::reverse(slabs.begin(), slabs.end());
  if (order == Order::EvensThenOdds) {
    std::vector<std::pair<std::size_t, std::size_t>> reordered;
    for (std::size_t parity = 0; parity < 2; ++parity)
      for (std::size_t k = parity; k < slabs.size(); k += 2) reordered.push_back(slabs[k]);
    slabs = reordered;
  }
  for (const auto& [at, n] : slabs) {
    std::memcpy(op.staging, data.data() + at, n);
    op.write(op.staging, at, n);
  }
}

// Reads the operand back in slabs of `slab` with `halo` bytes either side (a conv's overlap):
// the bytes that differ from `want` over all slabs (every byte is read at least once).
std::size_t misread(const kernels::StreamedOperand& op, const std::vector<std::uint8_t>& want, std::size_t slab,
                    std::size_t halo) {
  std::size_t wrong = 0;
  for (std::size_t at = 0; at < want.size(); at += slab) {
    const std::size_t lo = at >= halo ? at - halo : 0, hi = std::min(want.size(), at + slab + halo);
    std::memset(op.staging, 0xA5, hi - lo);
    op.read(op.staging, lo, hi - lo);
    const auto* got = reinterpret_cast<const std::uint8_t*>(op.staging);
    for (std::size_t i = lo; i < hi; ++i) wrong += got[i - lo] != want[i];
  }
  return wrong;
}

struct Case {
  std::vector<std::size_t> write_sizes;
  Order order;
  std::size_t read_slab, halo;
};

void round_trip(const Case& c) {
  const ArenaLayout l = two_operands();
  ArenaPieces arena(l.arena_bytes, 0);
  const residency::SpillFile file("", l.file_bytes);
  SpillTransfers io(l, 1, file);
  const auto a = bytes_of(kA, 7), b = bytes_of(kB, 99);
  kernels::ExecContext ctx;
  io.bind(0, 0, arena, 0, 2, ctx);
  ASSERT_NE(ctx.out_stream(0), nullptr);
  // Interleaved, as a kernel writing two outputs slab by slab would.
  write_slabs(*ctx.out_stream(1), b, {5000, 9999}, Order::Forward);
  write_slabs(*ctx.out_stream(0), a, c.write_sizes, c.order);
  io.finish();
  io.bind(1, 0, arena, 2, 0, ctx);
  ASSERT_NE(ctx.in_stream(0), nullptr);
  EXPECT_EQ(misread(*ctx.in_stream(0), a, c.read_slab, c.halo), 0u);
  EXPECT_EQ(misread(*ctx.in_stream(1), b, 4096, 0), 0u);
  // Read again: the second pass starts from the front, where nothing was read ahead.
  EXPECT_EQ(misread(*ctx.in_stream(0), a, c.read_slab, 0), 0u);
  io.finish();
  const SpillStats r = io.stats();
  EXPECT_EQ(r.written, kA + kB);
  EXPECT_GE(r.read, 2 * kA + kB);
  // Every slab fits its io block: where the directory takes direct I/O, all of them went so.
  if (residency::SpillFile("", 4096).direct()) {
    EXPECT_EQ(r.direct, r.written + r.read);
  }
}

TEST(SpillStreams, SlabsEndingInsideBlocksReadBackAsWritten) {
  round_trip({{7000, 12345, 1}, Order::Forward, 10000, 0});
}

TEST(SpillStreams, OverlappingHaloReadsGetTheBytesWritten) {
  round_trip({{kStaging}, Order::Forward, kStaging - 3000, 1500});
}

TEST(SpillStreams, SlabsWrittenOutOfOrderKeepEachOthersBlocks) {
  round_trip({{4095, 4097, 3000}, Order::Backward, kStaging, 0});
  round_trip({{4095, 4097, 3000}, Order::EvensThenOdds, kStaging, 0});
}

TEST(SpillStreams, ASlabLargerThanTheStagingIsReadWhole) {
  // A read larger than the io block (an addend read into the kernel's own planes) goes past it.
  const ArenaLayout l = two_operands();
  ArenaPieces arena(l.arena_bytes, 0);
  const residency::SpillFile file("", l.file_bytes);
  SpillTransfers io(l, 1, file);
  const auto a = bytes_of(kA, 3);
  kernels::ExecContext ctx;
  io.bind(0, 0, arena, 0, 2, ctx);
  write_slabs(*ctx.out_stream(0), a, {kStaging - 5}, Order::Forward);
  io.finish();
  io.bind(1, 0, arena, 2, 0, ctx);
  std::vector<std::uint8_t> got(kA);
  ctx.in_stream(0)->read(got.data(), 0, 5 * kStaging);
  ctx.in_stream(0)->read(got.data() + 5 * kStaging, 5 * kStaging, kA - 5 * kStaging);
  io.finish();
  EXPECT_EQ(got, a);
}

}  // namespace
}  // namespace qsmcore
