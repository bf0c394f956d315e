// Depth slabs of strided convs and deconvolution sub-lattices (kernels/slab_reader.h): the
// planes a call's taps reach, cut at the volume's faces, and the staging of overlapping slab
// inputs from a streamed operand, each plane read from the file once.
#include "kernels/slab_reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace {

using qsmcore::kernels::depth_slab_call;
using qsmcore::kernels::DepthSlabCall;
using qsmcore::kernels::SlabReader;

// A streamed operand over bytes in memory that counts what is read of it.
struct CountingOperand final : qsmcore::kernels::StreamedOperand {
  std::vector<std::byte> file;
  mutable std::vector<int> reads_per_byte;
  void read(void* dst, std::size_t offset, std::size_t bytes) const override {
    ASSERT_LE(offset + bytes, file.size());
    std::memcpy(dst, file.data() + offset, bytes);
    for (std::size_t i = offset; i < offset + bytes; ++i) ++reads_per_byte[i];
  }
  void write(const void*, std::size_t, std::size_t) const override { FAIL() << "a reader wrote"; }
};

TEST(DepthSlabCall, TapsReachingPastAFaceBecomePadsAndTheRestAreRead) {
  // NeXtQSM's 3³/2 down-sampling (pads 0 before, 1 after) on 96 planes: output planes 40 … 47 of
  // 48 read input planes 80 … 95 and one zero plane after.
  const DepthSlabCall last = depth_slab_call(8, 2 * 40, 2 * 47 + 2, 96);
  EXPECT_EQ(last.src_first, 80);
  EXPECT_EQ(last.src_planes, 16);
  EXPECT_EQ(last.pad_l, 0);
  EXPECT_EQ(last.pad_r, 1);
  // A 3-tap reach with one pad before: the first slab reads from plane 0 with a zero plane before.
  const DepthSlabCall first = depth_slab_call(4, -1, 4, 96);
  EXPECT_EQ(first.src_first, 0);
  EXPECT_EQ(first.src_planes, 5);
  EXPECT_EQ(first.pad_l, 1);
  EXPECT_EQ(first.pad_r, 0);
  // Inside the volume: no pads; the key tells calls that need another primitive apart.
  const DepthSlabCall inner = depth_slab_call(4, 7, 12, 96);
  EXPECT_EQ(inner.pad_l + inner.pad_r, 0);
  EXPECT_EQ(inner.src_planes, 6);
  EXPECT_NE(inner.key(), first.key());
  EXPECT_EQ(inner.key(), depth_slab_call(4, 19, 24, 96).key());
}

TEST(SlabReader, OverlappingSlabsAreStagedWholeAndEachPlaneIsReadOnce) {
  constexpr std::size_t kPlane = 24, kPlanes = 50;
  CountingOperand op;
  op.file.resize(kPlane * kPlanes);
  for (std::size_t i = 0; i < op.file.size(); ++i) op.file[i] = static_cast<std::byte>((i * 7 + 3) % 251);
  op.reads_per_byte.assign(op.file.size(), 0);
  std::vector<std::byte> staging(kPlane * 12);
  op.staging = staging.data();
  op.staging_bytes = staging.size();
  SlabReader reader(op, kPlane);
  // A 3³/2 conv's slabs of 5 output planes: input planes 10·i … 10·i + 10, one shared with the
  // next slab; the last slab is cut at the volume's end.
  for (std::int64_t first = 0; first < static_cast<std::int64_t>(kPlanes); first += 10) {
    const std::int64_t count = std::min<std::int64_t>(11, static_cast<std::int64_t>(kPlanes) - first);
    const std::byte* got = reader.stage(first, count);
    ASSERT_EQ(got, staging.data());
    EXPECT_EQ(std::memcmp(got, op.file.data() + static_cast<std::size_t>(first) * kPlane,
                          static_cast<std::size_t>(count) * kPlane),
              0)
        << "slab at plane " << first;
  }
  for (std::size_t i = 0; i < op.file.size(); ++i) ASSERT_EQ(op.reads_per_byte[i], 1) << "byte " << i;
  // A deconvolution's slabs reach a halo plane on either side: ranges overlapping by two.
  op.reads_per_byte.assign(op.file.size(), 0);
  SlabReader halo(op, kPlane);
  for (std::int64_t q0 = 0; q0 < static_cast<std::int64_t>(kPlanes); q0 += 8) {
    const std::int64_t lo = std::max<std::int64_t>(0, q0 - 1);
    const std::int64_t hi = std::min<std::int64_t>(static_cast<std::int64_t>(kPlanes), q0 + 8 + 1);
    const std::byte* got = halo.stage(lo, hi - lo);
    EXPECT_EQ(std::memcmp(got, op.file.data() + static_cast<std::size_t>(lo) * kPlane,
                          static_cast<std::size_t>(hi - lo) * kPlane),
              0)
        << "slab at plane " << q0;
  }
  EXPECT_EQ(std::accumulate(op.reads_per_byte.begin(), op.reads_per_byte.end(), 0), static_cast<int>(op.file.size()));
}

}  // namespace
