// The spill file's page-cache discipline (issue #16: the bytes a spill frees must not come back
// as page cache charged to the process): after write, read, settle and forget, none of the
// range is in the page cache (mincore on a mapping of the file), and the bytes read back are
// the bytes written, through every path. write_behind alone may leave the range cached until
// settle(); that is the overlap a streamed slab gets.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "spill/spill.h"

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

TEST(SpillFile, NothingStaysInThePageCacheAndEveryPathReadsBackWhatWasWritten) {
  constexpr std::size_t kBytes = 4 << 20;
  SpillFile f("", 3 * kBytes);
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
  // The read-ahead's reads run asynchronously, and a page still being read when forget() drops
  // the range is not dropped (it comes in after): wait until the range has landed (CI, under
  // load, once saw all 1024 pages cached after forget()), at most a few seconds.
  const std::size_t pages = kBytes / static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  for (int i = 0; i < 5000 && cached_pages(f, 2 * kBytes, kBytes) < pages; ++i) ::usleep(1000);
  f.forget(kBytes, 2 * kBytes);
  EXPECT_EQ(cached_pages(f, 0, 3 * kBytes), 0u) << "read() or forget() leaves its range cached";
  f.read(got.data(), kBytes, 2 * kBytes);
  EXPECT_EQ(got, c);
}

}  // namespace
