// The spill file's page-cache discipline, with direct I/O and without (issue #16: the bytes a spill frees must not come
// back as page cache charged to the process): after write, read, settle and forget, none of the range is in the page
// cache (mincore on a mapping of the file), and the bytes read back are the bytes written, through every path.
// write_behind alone may leave the range cached until settle(); that is the overlap a streamed slab gets.
#include "residency/spill_file.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <vector>

namespace {

using qsmcore::residency::SpillFile;

/// Pages of [offset, offset + bytes) of the file in the page cache now.
std::size_t cached_pages(const SpillFile& f, std::uint64_t offset, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, f.fd(), static_cast<off_t>(offset));
  if (m == MAP_FAILED) return static_cast<std::size_t>(-1);
  std::vector<unsigned char> v((bytes + page - 1) / page);
  const int rc = ::mincore(m, bytes, v.data());
  ::munmap(m, bytes);
  if (rc != 0) return static_cast<std::size_t>(-1);
  return static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [](unsigned char c) { return (c & 1) != 0; }));
}

std::vector<std::uint32_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint32_t> v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

class SpillFileIo : public testing::TestWithParam<bool> {};  // direct I/O where allowed, or not

TEST_P(SpillFileIo, NothingStaysInThePageCacheAndEveryPathReadsBackWhatWasWritten) {
  constexpr std::size_t kBytes = 4 << 20;
  SpillFile f("", 3 * kBytes, GetParam());
  if (!GetParam()) {
    EXPECT_FALSE(f.direct());
  }
  const auto a = pattern(kBytes / 4, 1), b = pattern(kBytes / 4, 7'000'000), c = pattern(kBytes / 4, 99);
  f.write(a.data(), kBytes, 0);
  EXPECT_EQ(cached_pages(f, 0, kBytes), 0u) << "write() leaves its range cached";
  f.write_behind(b.data(), kBytes, kBytes);
  f.write_behind(c.data(), kBytes, 2 * kBytes);
  f.settle(kBytes, kBytes);
  f.settle(kBytes, 2 * kBytes);
  EXPECT_EQ(cached_pages(f, kBytes, 2 * kBytes), 0u) << "settle() leaves its range cached";

  std::vector<std::uint32_t> got(kBytes / 4);
  f.read(got.data(), kBytes, 0);
  EXPECT_EQ(got, a);
  f.read_ahead(kBytes, kBytes);
  f.read(got.data(), kBytes, kBytes);
  EXPECT_EQ(got, b);
  f.read_ahead(kBytes, 2 * kBytes);
  f.forget(kBytes, 2 * kBytes);
  EXPECT_EQ(cached_pages(f, 0, 3 * kBytes), 0u) << "read() or forget() leaves its range cached";
  f.read(got.data(), kBytes, 2 * kBytes);
  EXPECT_EQ(got, c);
}

// Direct I/O moves whole blocks through a bounce buffer: ranges that start and end inside
// blocks, slabs written one after another into the same block, and transfers longer than the
// bounce buffer read back exactly what was written, and leave the bytes around them alone. The
// oracle is the same writes applied to a vector. Run on $TMPDIR (direct on ext4) and /dev/shm
// (tmpfs: direct or not, as its kernel allows).
void check_unaligned_ranges(const std::string& dir, bool direct) {
  constexpr std::size_t kBytes = (3 << 20) + 1000;  // not a whole number of blocks
  SpillFile f(dir, kBytes, direct);
  SCOPED_TRACE(dir + (f.direct() ? " (direct)" : " (page cache)"));
  std::vector<unsigned char> model(kBytes, 0), src(kBytes);
  std::mt19937 rng(5);
  for (auto& c : src) c = static_cast<unsigned char>(rng());
  auto put = [&](std::size_t off, std::size_t n, bool behind) {
    if (behind) {
      f.write_behind(src.data() + off, n, off);
      f.settle(n, off);
    } else {
      f.write(src.data() + off, n, off);
    }
    std::memcpy(model.data() + off, src.data() + off, n);
  };
  // Consecutive slabs of 12345 bytes (each shares a block with the one before) from offset 777.
  for (std::size_t off = 777; off + 12345 <= 400000; off += 12345) put(off, 12345, true);
  put(1 << 20, (1 << 20) + 4096 * 3 + 11, false);  // longer than the bounce buffer, ends in a block
  put(kBytes - 1000 - 17, 1000 + 17, false);       // the file's last, partial block
  put(5000, 3, false);                             // inside one block
  std::uniform_int_distribution<std::size_t> at(0, kBytes - 1);
  for (int i = 0; i < 40; ++i) {
    const std::size_t off = at(rng), n = std::min<std::size_t>(at(rng) % 300000 + 1, kBytes - off);
    put(off, n, i % 2 == 0);
  }
  std::vector<unsigned char> got(kBytes);
  f.read(got.data(), kBytes, 0);
  ASSERT_EQ(got, model);
  for (int i = 0; i < 40; ++i) {
    const std::size_t off = at(rng), n = std::min<std::size_t>(at(rng) % 1500000 + 1, kBytes - off);
    std::vector<unsigned char> part(n);
    f.read_ahead(n, off);
    f.read(part.data(), n, off);
    ASSERT_EQ(0, std::memcmp(part.data(), model.data() + off, n)) << "range " << off << " + " << n;
  }
}

TEST_P(SpillFileIo, UnalignedRangesReadBackExactlyAcrossBlocksAndChunks) {
  check_unaligned_ranges("", GetParam());
  if (std::filesystem::is_directory("/dev/shm")) check_unaligned_ranges("/dev/shm", GetParam());
}

INSTANTIATE_TEST_SUITE_P(SpillFile, SpillFileIo, testing::Values(true, false),
                         [](const testing::TestParamInfo<bool>& i) { return i.param ? "direct" : "page_cache"; });

}  // namespace
