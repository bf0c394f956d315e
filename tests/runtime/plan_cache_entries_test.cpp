// The plan cache (runtime/plan_cache.h) on fake entries: keyed by shapes and window share, least
// recently used dropped first beyond its capacity, what it drops handed back (so it is freed
// outside its lock), and an entry a caller holds outliving its removal — the property that lets
// a run keep its plan and executor while another thread clears the cache. The oracle is a count
// of live fake plans and executors and the order of the calls made.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/plan_cache.h"

namespace {

using qsmcore::PlanKey;
using qsmcore::Shape;

std::atomic<int> live_plans{0}, live_executors{0};

struct FakePlan {
  int id;
  explicit FakePlan(int i) : id(i) { ++live_plans; }
  ~FakePlan() {
    id = -1;
    --live_plans;
  }
};
struct FakeExecutor {
  int plan_id;
  explicit FakeExecutor(int i) : plan_id(i) { ++live_executors; }
  ~FakeExecutor() { --live_executors; }
};

using Cache = qsmcore::PlanCacheOf<FakePlan, FakeExecutor>;

PlanKey key(std::int64_t side, std::int64_t share = 6) {
  return {{Shape{1, 1, side, side, side}}, share};
}

Cache::Entry entry(const PlanKey& k, int id, bool with_executor = false) {
  return {k, std::make_shared<FakePlan>(id), with_executor ? std::make_shared<FakeExecutor>(id) : nullptr};
}

class PlanCacheEntries : public testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(live_plans.load(), 0); }
  void TearDown() override {
    EXPECT_EQ(live_plans.load(), 0) << "a fake plan leaked";
    EXPECT_EQ(live_executors.load(), 0) << "a fake executor leaked";
  }
};

TEST_F(PlanCacheEntries, AKeyIsItsShapesAndShareAndAMissFindsNothing) {
  Cache c(4);
  EXPECT_FALSE(c.find(key(8)));
  c.insert(entry(key(8), 1));
  c.insert(entry(key(8, 12), 2));
  ASSERT_TRUE(c.find(key(8)));
  EXPECT_EQ(c.find(key(8))->plan->id, 1);
  EXPECT_EQ(c.find(key(8, 12))->plan->id, 2);
  EXPECT_FALSE(c.find(key(9)));
  EXPECT_TRUE(c.contains(key(8, 12)));
  EXPECT_FALSE(c.contains(key(8, 24)));
  EXPECT_EQ(c.size(), 2u);
}

TEST_F(PlanCacheEntries, BeyondItsCapacityTheLeastRecentlyUsedGoesAndIsHandedBack) {
  Cache c(2);
  EXPECT_TRUE(c.insert(entry(key(8), 1)).empty());
  EXPECT_TRUE(c.insert(entry(key(9), 2)).empty());
  ASSERT_TRUE(c.find(key(8)));      // 8 is now the most recently used
  EXPECT_TRUE(c.contains(key(9)));  // contains does not change the order
  const auto dropped = c.insert(entry(key(10), 3));
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].plan->id, 2);  // 9, the least recently used
  EXPECT_EQ(live_plans.load(), 3);    // the caller holds it until `dropped` goes
  EXPECT_TRUE(c.contains(key(8)));
  EXPECT_TRUE(c.contains(key(10)));
  EXPECT_FALSE(c.contains(key(9)));
  // Shrinking drops the least recently used too.
  const auto shrunk = c.set_capacity(1);
  ASSERT_EQ(shrunk.size(), 1u);
  EXPECT_EQ(shrunk[0].plan->id, 1);
  EXPECT_EQ(c.size(), 1u);
  // A capacity of 0 keeps one.
  c.set_capacity(0);
  c.insert(entry(key(11), 4));
  EXPECT_EQ(c.size(), 1u);
}

TEST_F(PlanCacheEntries, InsertingAKeyAgainReplacesItsEntry) {
  Cache c(4);
  c.insert(entry(key(8), 1));
  const auto dropped = c.insert(entry(key(8), 2));
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].plan->id, 1);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.find(key(8))->plan->id, 2);
}

TEST_F(PlanCacheEntries, AHeldEntryOutlivesClearAndEraseAndGoesWhenLetGo) {
  Cache c(4);
  c.insert(entry(key(8), 1, true));
  c.insert(entry(key(9), 2, true));
  std::optional<Cache::Entry> held = c.find(key(8));  // a run's copy
  ASSERT_TRUE(held);
  EXPECT_EQ(c.latest_executor()->plan_id, 1);  // 8 was used last
  c.clear();                                   // what it hands back goes at once
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(live_plans.load(), 1);
  EXPECT_EQ(live_executors.load(), 1);
  EXPECT_EQ(held->plan->id, 1);
  EXPECT_EQ(held->executor->plan_id, 1);
  EXPECT_EQ(c.latest_executor(), nullptr);
  held.reset();
  EXPECT_EQ(live_plans.load(), 0);

  c.insert(entry(key(8), 3));
  c.insert(entry(key(9), 4));
  auto p = c.find(key(8))->plan;
  EXPECT_EQ(c.erase(p.get()).size(), 1u);
  EXPECT_EQ(c.erase(p.get()).size(), 0u);  // not cached any more
  EXPECT_EQ(p->id, 3);
  EXPECT_TRUE(c.contains(key(9)));
  EXPECT_FALSE(c.contains(key(8)));
  c.clear();
}

// Threads finding, inserting, clearing and erasing at once: every entry a thread got stays whole
// while it holds it (under ThreadSanitizer: with no data race), and nothing leaks.
TEST_F(PlanCacheEntries, ConcurrentCallersAlwaysGetWholeEntries) {
  Cache c(3);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const PlanKey k = key(8 + (i + t) % 5);
        if (auto e = c.find(k)) {
          if (e->plan->id < 0 || e->executor->plan_id != e->plan->id || e->key != k) ++bad;
          if (i % 7 == 0) c.erase(e->plan.get());
        } else {
          c.insert(entry(k, t * 10000 + i, true));
        }
        if (t == 0 && i % 97 == 0) c.clear();
        if (auto ex = c.latest_executor(); ex && ex->plan_id < 0) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(c.size(), 3u);
  c.clear();
}

}  // namespace
