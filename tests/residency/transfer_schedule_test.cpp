// DenseTransferSchedule (residency.md §6), including the spec's own example.
#include "residency/transfer_schedule.h"

#include <gtest/gtest.h>

#include <memory>

namespace {

using namespace qsmcore::residency;
using Sched = DenseTransferSchedule<std::string>;
using EK = TransferScheduleError::Kind;

TEST(DenseTransferSchedule, SpecExampleThreeToSevenCapacityTwo) {
  auto s = Sched::create({3, 4, 5, 6, 7}, 2).value();
  EXPECT_TRUE(s.can_admit());
  ASSERT_TRUE(s.admit(3, "t3"));
  ASSERT_TRUE(s.admit(4, "t4"));
  EXPECT_FALSE(s.can_admit());
  auto full = s.admit(5, "t5");
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().kind, EK::CapacityExceeded);
  EXPECT_EQ(full.error().capacity, 2u);
  EXPECT_EQ(s.desired_indices(3), (std::vector<std::size_t>{3, 4, 5}));
  auto first = s.pop_ready();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->first, 3u);
  EXPECT_EQ(first->second, "t3");
  EXPECT_TRUE(s.can_admit());
  ASSERT_TRUE(s.admit(5, "t5"));
  EXPECT_EQ(s.desired_indices(10), (std::vector<std::size_t>{4, 5, 6, 7}));
}

TEST(DenseTransferSchedule, ConstructionErrors) {
  auto zero = Sched::create({0, 1}, 0);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().kind, EK::ZeroCapacity);
  auto unordered = Sched::create({1, 4, 4}, 2);
  ASSERT_FALSE(unordered);
  EXPECT_EQ(unordered.error().kind, EK::UnorderedPending);
  EXPECT_EQ(unordered.error().previous, 4u);
  EXPECT_EQ(unordered.error().actual, 4u);
  EXPECT_EQ(Sched::create({5, 2}, 2).error().kind, EK::UnorderedPending);
  EXPECT_TRUE(Sched::create({}, 1));
}

TEST(DenseTransferSchedule, OutOfOrderAndDrained) {
  auto s = Sched::create({0, 2}, 2).value();
  auto skip = s.admit(2, "x");
  ASSERT_FALSE(skip);
  EXPECT_EQ(skip.error().kind, EK::OutOfOrder);
  EXPECT_EQ(skip.error().expected, 0u);
  EXPECT_EQ(skip.error().actual, 2u);
  EXPECT_EQ(s.ready_len(), 0u) << "a refused admit changes nothing";
  ASSERT_TRUE(s.admit(0, "a"));
  ASSERT_TRUE(s.admit(2, "b"));
  EXPECT_FALSE(s.can_admit()) << "drained";
  EXPECT_EQ(s.pop_ready()->first, 0u);
  EXPECT_FALSE(s.can_admit()) << "a free slot but nothing pending";
  EXPECT_EQ(s.admit(3, "c").error().kind, EK::NoPendingUnit);
  EXPECT_EQ(s.pop_ready()->second, "b");
  EXPECT_FALSE(s.pop_ready());
  EXPECT_TRUE(s.is_finished());
}

TEST(DenseTransferSchedule, MoveOnlyPayloadAndWindowOfTwo) {
  auto s = DenseTransferSchedule<std::unique_ptr<int>>::create({0, 1, 2, 3, 4, 5}, 2).value();
  // The dense loop: refill to capacity, pop, execute. Never more than 2 ready.
  std::vector<std::size_t> executed;
  std::size_t max_ready = 0;
  while (!s.is_finished()) {
    while (s.can_admit()) {
      const std::size_t i = *s.next_pending();
      ASSERT_TRUE(s.admit(i, std::make_unique<int>(static_cast<int>(i))));
      max_ready = std::max(max_ready, s.ready_len());
    }
    auto r = s.pop_ready();
    ASSERT_TRUE(r);
    EXPECT_EQ(*r->second, static_cast<int>(r->first));
    executed.push_back(r->first);
  }
  EXPECT_EQ(executed, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(max_ready, 2u);
  EXPECT_TRUE(s.desired_indices(2).empty());
}

}  // namespace
