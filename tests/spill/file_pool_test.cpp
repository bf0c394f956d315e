// The spill-file pool (spill/file_pool.h) on real files in a temporary folder: a kept file
// large enough is reused (the same file, no new one counted), one too small or elsewhere is
// replaced, the larger of two is kept, a run that spills nothing frees the kept one, and
// release() frees it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "spill/spill.h"

namespace {

namespace fs = std::filesystem;

// A folder of this test's own on the disk the default spill folder is on (a spill file refuses
// a memory-backed one).
class SpillFilePoolTest : public testing::Test {
 protected:
  void SetUp() override {
    const std::string base = qsmcore::residency::SpillFile::resolve_dir("");
    dir_ = (fs::path(base) / ("qsm-pool-test-" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    other_ = dir_ + "/other";
    fs::create_directories(other_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_, other_;
};

constexpr std::uint64_t kMiB = 1 << 20;

}  // namespace

TEST_F(SpillFilePoolTest, AKeptFileLargeEnoughIsReused) {
  qsmcore::SpillFilePool pool;
  EXPECT_EQ(pool.files_made(), 0u);
  EXPECT_EQ(pool.kept_bytes(), 0u);
  auto f = pool.take(dir_, 2 * kMiB);
  ASSERT_NE(f, nullptr);
  EXPECT_GE(f->bytes(), 2 * kMiB);
  const auto* first = f.get();
  EXPECT_EQ(pool.files_made(), 1u);
  EXPECT_EQ(pool.kept_bytes(), 0u) << "a file in use is not kept";
  pool.keep(std::move(f));
  EXPECT_EQ(pool.kept_bytes(), first->bytes());
  // Smaller and equal requests take the same file.
  for (const std::uint64_t bytes : {kMiB, 2 * kMiB}) {
    auto g = pool.take(dir_, bytes);
    EXPECT_EQ(g.get(), first);
    EXPECT_EQ(pool.kept_bytes(), 0u);
    pool.keep(std::move(g));
  }
  EXPECT_EQ(pool.files_made(), 1u);
}

TEST_F(SpillFilePoolTest, ATooSmallOrMisplacedFileIsReplaced) {
  qsmcore::SpillFilePool pool;
  pool.keep(pool.take(dir_, kMiB));
  auto g = pool.take(dir_, 3 * kMiB);
  EXPECT_GE(g->bytes(), 3 * kMiB);
  EXPECT_EQ(pool.files_made(), 2u);
  pool.keep(std::move(g));
  // Large enough but in another folder: a new file there, the kept one freed first.
  auto h = pool.take(other_, kMiB);
  EXPECT_EQ(h->dir(), other_);
  EXPECT_LT(h->bytes(), 3 * kMiB);
  EXPECT_EQ(pool.files_made(), 3u);
  EXPECT_EQ(pool.kept_bytes(), 0u);
  const std::uint64_t bytes = h->bytes();
  pool.keep(std::move(h));
  EXPECT_EQ(pool.kept_bytes(), bytes);
}

TEST_F(SpillFilePoolTest, TheLargerOfTwoIsKeptAndARunWithoutSpillingFreesIt) {
  qsmcore::SpillFilePool pool;
  // Two runs in parallel take one each; both come back, the larger stays.
  auto a = pool.take(dir_, kMiB);
  auto b = pool.take(dir_, 4 * kMiB);
  EXPECT_EQ(pool.files_made(), 2u);
  const std::uint64_t larger = b->bytes();
  pool.keep(std::move(b));
  pool.keep(std::move(a));
  EXPECT_EQ(pool.kept_bytes(), larger);
  pool.keep(nullptr);  // a run that spilled nothing
  EXPECT_EQ(pool.kept_bytes(), 0u);
  pool.keep(pool.take(dir_, kMiB));
  EXPECT_GT(pool.kept_bytes(), 0u);
  pool.release();
  EXPECT_EQ(pool.kept_bytes(), 0u);
  EXPECT_EQ(pool.files_made(), 3u);
}
