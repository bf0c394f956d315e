// Reports (residency.md §8, §10 item 7): saturating counters, pass deltas that sum
// counters and keep maximum peaks, aborted passes that change nothing, JSON forms, sampling.
#include "residency/report.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

namespace {

using namespace qsmcore;
using namespace qsmcore::residency;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

TEST(OffloadReport, RecordsPerDirectionAndTier) {
  OffloadReport r;
  r.record_transfer(TransferDirection::DiskToHost, 100, 0.5);
  r.record_transfer(TransferDirection::DiskToHost, 50, 0.25);
  r.record_transfer(TransferDirection::HostToDevice, 7, 0.1);
  EXPECT_EQ(r.transfer(TransferDirection::DiskToHost), (TransferStats{2, 150, 0.75}));
  EXPECT_EQ(r.transfer(TransferDirection::HostToDevice).count, 1u);
  EXPECT_EQ(r.transfer(TransferDirection::DeviceToHost).count, 0u);
  r.record_prefetch(MemoryTier::Host, true);
  r.record_prefetch(MemoryTier::Host, false);
  r.record_prefetch(MemoryTier::Device, false);
  r.record_stall(MemoryTier::Device, 0.2);
  EXPECT_EQ(r.prefetch.requests, 3u);
  EXPECT_EQ(r.prefetch.hits, 1u);
  EXPECT_EQ(r.prefetch.misses, 2u);
  EXPECT_EQ(r.prefetch.stalls, 1u);
  EXPECT_EQ(r.prefetch_by_tier[tier_index(MemoryTier::Host)].hits, 1u);
  EXPECT_EQ(r.prefetch_by_tier[tier_index(MemoryTier::Device)].stalls, 1u);
  EXPECT_EQ(r.prefetch_by_tier[tier_index(MemoryTier::Host)].stalls, 0u);
  r.record_eviction(MemoryTier::Host, 30);
  r.record_eviction(MemoryTier::Device, 5);
  EXPECT_EQ(r.evictions, (EvictionStats{2, 35}));
  EXPECT_EQ(r.evictions_by_tier[tier_index(MemoryTier::Host)], (EvictionStats{1, 30}));
  r.observe_resident(MemoryTier::Host, 90, 3);
  r.observe_resident(MemoryTier::Host, 40, 1);
  EXPECT_EQ(r.resident_bytes[tier_index(MemoryTier::Host)], 40u);
  EXPECT_EQ(r.peak_resident_bytes[tier_index(MemoryTier::Host)], 90u);
  EXPECT_EQ(r.peak_resident_units[tier_index(MemoryTier::Host)], 3u);
}

TEST(OffloadReport, CountersSaturate) {
  OffloadReport r;
  r.record_transfer(TransferDirection::DiskToDevice, kMax, 0);
  r.record_transfer(TransferDirection::DiskToDevice, 10, 0);
  EXPECT_EQ(r.transfer(TransferDirection::DiskToDevice).bytes, kMax);
  r.record_eviction(MemoryTier::Host, kMax);
  r.record_eviction(MemoryTier::Host, kMax);
  EXPECT_EQ(r.evictions.bytes, kMax);
  DensePassReport a, b;
  a.disk_to_host_bytes = kMax - 1;
  b.disk_to_host_bytes = 5;
  a.accumulate(b);
  EXPECT_EQ(a.disk_to_host_bytes, kMax);
}

TEST(OffloadReport, ProcessSamplingAndJson) {
  OffloadReport r;
  r.sample_process();
  EXPECT_TRUE(r.process_sampled);
  ASSERT_TRUE(r.process.has_value()) << "Linux provides /proc/self";
  EXPECT_GT(r.process->rss_bytes, 0u);
  EXPECT_GT(r.process->minor_page_faults, 0u);
  r.allocator = AllocatorMemoryMetrics{1, 2, 3};
  r.record_transfer(TransferDirection::HostToDevice, 9, 1.0);
  const auto j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j["transfers"]["host_to_device"]["bytes"], 9);
  EXPECT_EQ(j["allocator"]["peak"], 3);
  EXPECT_TRUE(j["process_sampled"].get<bool>());
  EXPECT_EQ(j["planned_bytes"].size(), 3u);
  EXPECT_TRUE(j["prefetch_by_tier"].contains("disk"));
}

TEST(SampleProcessMetrics, MinorFaultsGrowWhenTouchingNewPages) {
  const auto before = sample_process_metrics();
  ASSERT_TRUE(before);
  std::vector<char> big(32 << 20);
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = 1;
  const auto after = sample_process_metrics();
  ASSERT_TRUE(after);
  EXPECT_GT(after->minor_page_faults, before->minor_page_faults);
  EXPECT_GT(after->rss_bytes, 16u << 20);
  volatile char keep = big[4096];
  (void)keep;
}

TEST(DensePassReport, DeltaBetweenSnapshots) {
  DenseStreamCounters begin{.forwards = 3,
                            .host_cache = {10, 6, 4, 2, 200},
                            .device_cache = {5, 0, 5, 5, 50},
                            .disk_to_host_bytes = 1000,
                            .disk_to_device_bytes = 0,
                            .host_to_device_bytes = 700};
  DenseStreamCounters end = begin;
  end.forwards = 4;
  end.host_cache = {14, 9, 5, 3, 260};
  end.disk_to_host_bytes = 1300;
  end.host_to_device_bytes = 900;
  DenseTierMetrics host, device;
  host.observe(2, 80);
  host.observe(1, 40);
  device.observe(2, 30);
  const auto p = DensePassReport::between(begin, end, host, device);
  EXPECT_EQ(p.forwards, 1u);
  EXPECT_EQ(p.host_cache, (DenseCacheMetrics{4, 3, 1, 1, 60}));
  EXPECT_EQ(p.device_cache, DenseCacheMetrics{});
  EXPECT_EQ(p.peak_host_layers, 2u);
  EXPECT_EQ(p.peak_host_bytes, 80u);
  EXPECT_EQ(p.peak_device_bytes, 30u);
  EXPECT_EQ(p.disk_to_host_bytes, 300u);
  EXPECT_EQ(p.host_to_device_bytes, 200u);
  // A counter that went backwards (a reset) clamps at 0 instead of wrapping.
  EXPECT_EQ(DensePassReport::between(end, begin, host, device).disk_to_host_bytes, 0u);
}

TEST(DensePassReport, AccumulateSumsCountersAndMaxesPeaks) {
  DensePassReport a, b;
  a.forwards = 1;
  a.peak_host_bytes = 100;
  a.peak_device_layers = 2;
  a.host_cache.hits = 3;
  a.disk_to_device_bytes = 10;
  b.forwards = 2;
  b.peak_host_bytes = 60;
  b.peak_device_layers = 1;
  b.peak_device_bytes = 9;
  b.host_cache.hits = 4;
  b.disk_to_device_bytes = 5;
  a.accumulate(b);
  EXPECT_EQ(a.forwards, 3u);
  EXPECT_EQ(a.host_cache.hits, 7u);
  EXPECT_EQ(a.disk_to_device_bytes, 15u);
  EXPECT_EQ(a.peak_host_bytes, 100u) << "peaks are maxima, not sums";
  EXPECT_EQ(a.peak_device_layers, 2u);
  EXPECT_EQ(a.peak_device_bytes, 9u);
}

TEST(DensePassTracker, AbortChangesNothingCommitAccumulates) {
  DensePassTracker t;
  DenseStreamCounters c;
  t.begin(c);
  t.observe(1, 10, 2, 20);
  c.forwards = 1;
  c.disk_to_host_bytes = 10;
  const auto first = t.commit(c);
  EXPECT_EQ(first.forwards, 1u);
  EXPECT_EQ(first.peak_device_bytes, 20u);
  const auto total_after_first = t.total();

  t.begin(c);
  t.observe(5, 500, 2, 999);  // an aborted pass with a huge peak
  c.forwards = 2;
  c.disk_to_host_bytes = 60;
  t.abort();
  EXPECT_FALSE(t.active());
  EXPECT_EQ(t.total(), total_after_first) << "an aborted forward changes nothing";
  t.observe(7, 7, 7, 7);  // ignored outside a pass
  EXPECT_EQ(t.last(), first);

  t.begin(c);
  t.observe(1, 15, 1, 5);
  c.forwards = 3;
  c.disk_to_host_bytes = 70;
  t.commit(c);
  EXPECT_EQ(t.total().forwards, 2u) << "only committed passes count";
  EXPECT_EQ(t.total().disk_to_host_bytes, 20u) << "10 + (70 - 60), the aborted 50 excluded";
  EXPECT_EQ(t.total().peak_device_bytes, 20u);
  EXPECT_EQ(t.total().peak_host_bytes, 15u);
  EXPECT_THROW(t.commit(c), Error) << "commit without begin is a bug";
}

TEST(BackgroundPrefetchReport, JsonHasEveryCounter) {
  BackgroundPrefetchReport r;
  r.submitted = 4;
  r.evicted_before_use = 1;
  const auto j = nlohmann::json::parse(r.to_json());
  for (const char* k : {"submitted", "coalesced", "started", "completed", "cancelled", "failed", "queue_capacity",
                        "peak_queue_occupancy", "backpressure_count", "backpressure_seconds", "demand_waits",
                        "demand_wait_seconds", "ready_before_demand", "in_flight_at_demand", "evicted_before_use"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["submitted"], 4);
}

TEST(DenseDiskStreamReport, JsonNestsPolicyAndPasses) {
  DenseDiskStreamReport r;
  r.planned_layer_count = 12;
  r.groups.push_back(DenseGroupReport{.group = "g0", .planned_layers = 12});
  r.last_pass = DensePassReport{};
  r.last_pass->forwards = 1;
  const auto j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j["planned_layer_count"], 12);
  EXPECT_EQ(j["residency"]["kind"], "dense_disk_stream");
  EXPECT_EQ(j["groups"][0]["group"], "g0");
  EXPECT_EQ(j["last_pass"]["forwards"], 1);
  EXPECT_TRUE(j["background"].contains("queue_capacity"));
}

}  // namespace
