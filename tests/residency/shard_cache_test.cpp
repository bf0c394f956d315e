// ShardCache (residency.md §7): a count bound on open payload sources, LRU among unleased
// shards, CapacityExhausted when all are leased, diagnostics and physical reads.
#include "residency/shard_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>

namespace {

using namespace qsmcore;
using namespace qsmcore::residency;

// In-memory shards named by path; counts opens and tracks which sources are still alive.
struct FakeStore {
  std::map<std::string, std::vector<std::uint8_t>> files;
  std::map<std::string, int> opens;
  std::vector<std::weak_ptr<io::ByteSource>> issued;
  ShardCache::Opener opener() {
    return [this](const std::string& path) {
      auto it = files.find(path);
      if (it == files.end()) throw Error(ErrorKind::Io, "cannot open " + path);
      ++opens[path];
      auto src = io::memory_source(it->second, path);
      issued.push_back(src);
      return src;
    };
  }
  int alive() const {
    int n = 0;
    for (const auto& w : issued) n += !w.expired();
    return n;
  }
};

FakeStore store_abc() {
  FakeStore s;
  s.files["a"] = {1, 2, 3, 4};
  s.files["b"] = {5, 6, 7, 8};
  s.files["c"] = {9, 10, 11, 12};
  return s;
}

TEST(ShardCache, ZeroLimitIsRejected) {
  EXPECT_THROW(ShardCache(0), Error);
  auto v = ShardCache::validate_limit(0);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().kind, ShardCacheError::Kind::InvalidShardCacheLimit);
  EXPECT_TRUE(ShardCache::validate_limit(1));
}

TEST(ShardCache, HitsMissesAndLruEviction) {
  FakeStore s = store_abc();
  ShardCache cache(2, s.opener());
  {
    auto l = cache.lease("a");
    ASSERT_TRUE(l);
  }
  {
    auto l = cache.lease("b");
    ASSERT_TRUE(l);
  }
  {
    auto l = cache.lease("a");
    ASSERT_TRUE(l);
  }  // hit: a is now more recent than b
  EXPECT_EQ(cache.cached_paths(), (std::vector<std::string>{"b", "a"}));
  {
    auto l = cache.lease("c");
    ASSERT_TRUE(l);
  }  // evicts b, the least recently used
  EXPECT_EQ(cache.cached_paths(), (std::vector<std::string>{"a", "c"}));
  {
    auto l = cache.lease("b");
    ASSERT_TRUE(l);
  }  // reopened: evicts a
  EXPECT_EQ(s.opens["b"], 2);
  EXPECT_EQ(s.opens["a"], 1);
  const auto d = cache.diagnostics();
  EXPECT_EQ(d.cache_hits, 1u);
  EXPECT_EQ(d.cache_misses, 4u);
  EXPECT_EQ(d.evictions, 2u);
  EXPECT_EQ(d.currently_cached_shards, 2u);
  EXPECT_EQ(d.touched_shard_paths, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(s.alive(), 2) << "evicted sources are closed (freed), not just forgotten";
}

TEST(ShardCache, LeasedShardsAreNotEvictedAndExhaustionIsReported) {
  FakeStore s = store_abc();
  ShardCache cache(2, s.opener());
  auto la = cache.lease("a");
  auto lb = cache.lease("b");
  ASSERT_TRUE(la && lb);
  auto lc = cache.lease("c");
  ASSERT_FALSE(lc);
  EXPECT_EQ(lc.error().kind, ShardCacheError::Kind::CapacityExhausted);
  EXPECT_EQ(lc.error().maximum, 2u);
  EXPECT_EQ(lc.error().leased, 2u);
  EXPECT_EQ(lc.error().path, "c");
  EXPECT_EQ(s.opens.count("c"), 0u) << "nothing opened beyond the bound";
  EXPECT_THROW(cache.read("c", 0, 1, nullptr), Error);
  // A second lease of a cached shard is a hit, even at the bound.
  auto la2 = cache.lease("a");
  ASSERT_TRUE(la2);
  { ShardLease drop = std::move(lb.value()); }  // b released: now evictable
  auto lc2 = cache.lease("c");
  ASSERT_TRUE(lc2);
  EXPECT_EQ(cache.cached_paths(), (std::vector<std::string>{"a", "c"}));
  // The lease keeps its source readable.
  std::uint8_t byte = 0;
  lc2.value().source().read(2, 1, &byte);
  EXPECT_EQ(byte, 11);
}

TEST(ShardCache, OpenerFailureLeavesTheCacheUnchanged) {
  FakeStore s = store_abc();
  ShardCache cache(1, s.opener());
  {
    auto l = cache.lease("a");
    ASSERT_TRUE(l);
  }
  EXPECT_THROW((void)cache.lease("missing"), Error);
  EXPECT_EQ(cache.cached_paths(), std::vector<std::string>{"a"}) << "the victim is closed only after a good open";
  EXPECT_EQ(cache.diagnostics().evictions, 0u);
}

TEST(ShardCache, ReadCountsPhysicalReads) {
  FakeStore s = store_abc();
  ShardCache cache(1, s.opener());
  std::uint8_t buf[4] = {};
  cache.read("b", 1, 3, buf);
  EXPECT_EQ(buf[0], 6);
  EXPECT_EQ(buf[2], 8);
  cache.read("a", 0, 2, buf);
  EXPECT_EQ(buf[1], 2);
  const auto d = cache.diagnostics();
  EXPECT_EQ(d.physical_reads, 2u);
  EXPECT_EQ(d.physical_read_bytes, 5u);
  EXPECT_EQ(d.currently_cached_shards, 1u);
  EXPECT_THROW(cache.read("a", 3, 2, buf), Error) << "out-of-range reads fail as the source says";
}

TEST(ShardCache, LeaseOutlivesTheCache) {
  FakeStore s = store_abc();
  ShardLease kept;
  {
    ShardCache cache(1, s.opener());
    kept = std::move(cache.lease("a").value());
  }
  std::uint8_t b = 0;
  kept.source().read(0, 1, &b);
  EXPECT_EQ(b, 1);
}

TEST(ShardCache, RealFilesThroughTheDefaultOpener) {
  char path[] = "/tmp/qsm_shard_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out << "weights!";
  }
  ShardCache cache(1);
  char buf[3] = {};
  cache.read(path, 1, 3, buf);
  EXPECT_EQ(std::string(buf, 3), "eig");
  EXPECT_THROW(cache.read("/nonexistent/qsm/shard.bin", 0, 1, buf), Error);
  std::remove(path);
}

}  // namespace
