// PrefetchWorker (residency.md §7, §10 item 5): coalescing, backpressure without dropping
// work, generation-fenced cancellation, errors reaching the demander, clean shutdown. Jobs are
// gated on latches so each test controls exactly what the worker is doing.
#include "residency/prefetch_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <stdexcept>
#include <thread>

namespace {

using namespace qsmcore;
using namespace qsmcore::residency;
using A = PrefetchWorker::Admission;

// A job that reports that it started and blocks until released.
struct Gate {
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::function<void()> job(std::atomic<int>* runs = nullptr) {
    return [this, runs, r = released] {
      started.set_value();
      r.wait();
      if (runs) ++*runs;
    };
  }
};

TEST(PrefetchWorker, ZeroCapacityIsRejected) {
  EXPECT_THROW(PrefetchWorker(0), Error);
}

TEST(PrefetchWorker, RunsInFifoOrderAndWaitConsumes) {
  PrefetchWorker w(4);
  std::mutex m;
  std::vector<std::string> order;
  for (const char* k : {"a", "b", "c"}) {
    ASSERT_EQ(w.submit(k,
                       [&, k] {
                         std::lock_guard lock(m);
                         order.push_back(k);
                       }),
              A::Admitted);
  }
  for (const char* k : {"a", "b", "c"}) EXPECT_TRUE(w.wait(k));
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_FALSE(w.wait("a")) << "a result is consumed once";
  EXPECT_FALSE(w.wait("never"));
  const auto r = w.report();
  EXPECT_EQ(r.submitted, 3u);
  EXPECT_EQ(r.started, 3u);
  EXPECT_EQ(r.completed, 3u);
  EXPECT_EQ(r.queue_capacity, 4u);
  EXPECT_EQ(r.ready_before_demand + r.in_flight_at_demand, 3u);
}

TEST(PrefetchWorker, DuplicatesCoalesceWhileQueuedRunningOrUnconsumed) {
  PrefetchWorker w(2);
  std::atomic<int> runs{0};
  Gate g;
  ASSERT_EQ(w.submit("a", g.job(&runs)), A::Admitted);
  g.started.get_future().wait();  // running
  EXPECT_EQ(w.submit("a", [&] { ++runs; }), A::Coalesced);
  ASSERT_EQ(w.submit("b", [&] { ++runs; }), A::Admitted);  // queued
  EXPECT_EQ(w.submit("b", [&] { ++runs; }), A::Coalesced);
  EXPECT_EQ(w.submit_blocking("b", [&] { ++runs; }), A::Coalesced);
  g.release.set_value();
  // The demand joins the one job: it waits for it instead of running another.
  EXPECT_TRUE(w.wait("b"));
  ASSERT_TRUE(w.contains("a"));  // completed, not consumed
  EXPECT_EQ(w.submit("a", [&] { ++runs; }), A::Coalesced);
  EXPECT_TRUE(w.wait("a"));
  EXPECT_EQ(runs.load(), 2);
  const auto r = w.report();
  EXPECT_EQ(r.submitted, 2u);
  EXPECT_EQ(r.coalesced, 4u);
  w.note_already_resident();
  EXPECT_EQ(w.report().coalesced, 5u);
  // Once consumed, the key can be submitted again.
  EXPECT_EQ(w.submit("a", [&] { ++runs; }), A::Admitted);
  EXPECT_TRUE(w.wait("a"));
  EXPECT_EQ(runs.load(), 3);
}

TEST(PrefetchWorker, FullQueueRefusesOrBackpressuresWithoutDropping) {
  PrefetchWorker w(2);
  std::atomic<int> runs{0};
  Gate g;
  ASSERT_EQ(w.submit("run", g.job(&runs)), A::Admitted);
  g.started.get_future().wait();
  ASSERT_EQ(w.submit("q1", [&] { ++runs; }), A::Admitted);
  ASSERT_EQ(w.submit("q2", [&] { ++runs; }), A::Admitted);
  EXPECT_EQ(w.queued(), 2u);
  EXPECT_EQ(w.submit("q3", [&] { ++runs; }), A::AtCapacity);
  EXPECT_FALSE(w.contains("q3")) << "AtCapacity queues nothing";
  // A blocking submitter waits until the worker takes q1 off the queue.
  auto blocked = std::async(std::launch::async, [&] { return w.submit_blocking("q3", [&] { ++runs; }); });
  EXPECT_EQ(blocked.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout) << "must block";
  g.release.set_value();
  EXPECT_EQ(blocked.get(), A::Admitted);
  for (const char* k : {"run", "q1", "q2", "q3"}) EXPECT_TRUE(w.wait(k)) << k;
  EXPECT_EQ(runs.load(), 4) << "every admitted job ran";
  const auto r = w.report();
  EXPECT_EQ(r.backpressure_count, 1u);
  EXPECT_GT(r.backpressure_seconds, 0.0);
  EXPECT_EQ(r.peak_queue_occupancy, 2u);
  EXPECT_EQ(r.completed, 4u);
}

TEST(PrefetchWorker, ErrorsReachTheDemander) {
  PrefetchWorker w(1);
  ASSERT_EQ(w.submit("bad", [] { throw Error(ErrorKind::Io, "read failed: shard.bin"); }), A::Admitted);
  try {
    w.wait("bad");
    FAIL() << "the job's exception must be rethrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_STREQ(e.what(), "read failed: shard.bin");
  }
  EXPECT_EQ(w.report().failed, 1u);
  EXPECT_EQ(w.report().completed, 0u);
  // A non-qsmcore exception travels the same way, and the worker keeps serving.
  ASSERT_EQ(w.submit("odd", [] { throw std::logic_error("boom"); }), A::Admitted);
  EXPECT_THROW(w.wait("odd"), std::logic_error);
  ASSERT_EQ(w.submit("fine", [] {}), A::Admitted);
  EXPECT_TRUE(w.wait("fine"));
}

TEST(PrefetchWorker, DemandCountersDistinguishReadyAndInFlight) {
  PrefetchWorker w(2);
  ASSERT_EQ(w.submit("done", [] {}), A::Admitted);
  while (w.report().completed < 1) std::this_thread::yield();
  EXPECT_TRUE(w.wait("done"));
  Gate g;
  ASSERT_EQ(w.submit("slow", g.job()), A::Admitted);
  g.started.get_future().wait();
  auto waiter = std::async(std::launch::async, [&] { return w.wait("slow"); });
  EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(30)), std::future_status::timeout);
  g.release.set_value();
  EXPECT_TRUE(waiter.get());
  const auto r = w.report();
  EXPECT_EQ(r.ready_before_demand, 1u);
  EXPECT_EQ(r.in_flight_at_demand, 1u);
  EXPECT_EQ(r.demand_waits, 1u);
  EXPECT_GT(r.demand_wait_seconds, 0.0);
}

TEST(PrefetchWorker, CancelAllFencesByGeneration) {
  PrefetchWorker w(3);
  std::atomic<int> runs{0};
  Gate g;
  ASSERT_EQ(w.submit("running", g.job(&runs)), A::Admitted);
  g.started.get_future().wait();
  ASSERT_EQ(w.submit("q1", [&] { ++runs; }), A::Admitted);
  ASSERT_EQ(w.submit("q2", [&] { ++runs; }), A::Admitted);
  const auto gen = w.generation();
  w.cancel_all();
  EXPECT_EQ(w.generation(), gen + 1);
  EXPECT_EQ(w.queued(), 0u) << "queued work is discarded synchronously";
  EXPECT_FALSE(w.contains("q1"));
  EXPECT_FALSE(w.wait("running")) << "a fenced job's result is not delivered";
  // The same key in the new generation is new work, not a coalesce with the stale job.
  std::atomic<int> fresh{0};
  ASSERT_EQ(w.submit("running", [&] { ++fresh; }), A::Admitted);
  g.release.set_value();
  EXPECT_TRUE(w.wait("running"));
  EXPECT_EQ(fresh.load(), 1);
  EXPECT_EQ(runs.load(), 1) << "only the job already running ran; q1 and q2 never did";
  const auto r = w.report();
  EXPECT_EQ(r.cancelled, 3u) << "two queued + one stale completion";
  EXPECT_EQ(r.completed, 1u);
}

TEST(PrefetchWorker, CancelWakesAWaiter) {
  PrefetchWorker w(2);
  Gate g;
  ASSERT_EQ(w.submit("a", g.job()), A::Admitted);
  ASSERT_EQ(w.submit("b", [] {}), A::Admitted);
  g.started.get_future().wait();
  auto waiter = std::async(std::launch::async, [&] { return w.wait("b"); });
  EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);
  w.cancel_all();
  EXPECT_FALSE(waiter.get()) << "the demander learns it must materialise itself";
  g.release.set_value();
}

TEST(PrefetchWorker, DestructorCancelsQueuedWorkAndJoins) {
  std::atomic<int> runs{0};
  std::atomic<bool> finished{false};
  Gate g;
  {
    PrefetchWorker w(4);
    ASSERT_EQ(w.submit("running",
                       [&, r = g.released] {
                         g.started.set_value();
                         r.wait();
                         std::this_thread::sleep_for(std::chrono::milliseconds(20));
                         finished = true;
                       }),
              A::Admitted);
    g.started.get_future().wait();  // the running job is off the queue: 4 free slots
    for (int i = 0; i < 4; ++i) EXPECT_EQ(w.submit("q" + std::to_string(i), [&] { ++runs; }), A::Admitted);
    g.release.set_value();
  }  // joins: the running job completes, the queued ones never start
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(runs.load(), 0);
}

TEST(PrefetchWorker, DiscardCompletedAndEvictedBeforeUse) {
  PrefetchWorker w(1);
  ASSERT_EQ(w.submit("a", [] {}), A::Admitted);
  while (w.report().completed < 1) std::this_thread::yield();
  EXPECT_TRUE(w.discard_completed("a"));
  w.note_evicted_before_use();
  EXPECT_FALSE(w.wait("a"));
  EXPECT_EQ(w.report().evicted_before_use, 1u);
  EXPECT_FALSE(w.discard_completed("a"));
}

// Many producers, one consumer per key: every admitted job runs exactly once and every
// demand sees its job (TSan checks the locking).
TEST(PrefetchWorker, ConcurrentProducersAndDemanders) {
  constexpr int kKeys = 200;
  // Declared before the worker so it outlives it: a key resubmitted by the slower producer may
  // still be running when the test body ends, and the worker's destructor waits for it.
  std::vector<std::atomic<int>> runs(kKeys);
  PrefetchWorker w(3);
  auto producer = [&] {
    for (int i = 0; i < kKeys; ++i) {
      const auto a = w.submit_blocking("k" + std::to_string(i), [&runs, i] { ++runs[i]; });
      EXPECT_NE(a, A::AtCapacity);
    }
  };
  std::thread p0(producer), p1(producer);
  int delivered = 0;
  for (int i = 0; i < kKeys; ++i) {
    while (!w.contains("k" + std::to_string(i)) && runs[i] == 0) std::this_thread::yield();
    if (w.wait("k" + std::to_string(i))) ++delivered;
  }
  p0.join();
  p1.join();
  // A key may be resubmitted by the slower producer after its result was consumed: then it runs
  // twice, but never more, and never zero times.
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_GE(runs[i].load(), 1) << i;
    EXPECT_LE(runs[i].load(), 2) << i;
  }
  EXPECT_EQ(delivered, kKeys) << "every demanded key was delivered";
  const auto r = w.report();
  EXPECT_LE(r.peak_queue_occupancy, 3u);
  EXPECT_EQ(r.submitted + r.coalesced, 2u * kKeys);
}

}  // namespace
