// --residency text: every accepted form, every rejection naming its key, and round trips
// through to_string.
#include <gtest/gtest.h>

#include "qsmcore/residency.h"

namespace {

using namespace qsmcore;

// The message of the InvalidInput error `text` raises ("" if it parses).
std::string rejection(const std::string& text) {
  try {
    (void)parse_residency(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput) << text;
    return e.what();
  }
  return "";
}

TEST(ParseResidency, Full) {
  EXPECT_EQ(parse_residency("full"), LayerWeightResidency(FullyResident{}));
}

TEST(ParseResidency, LayerwiseDefaultsAndKeys) {
  EXPECT_EQ(parse_residency("layerwise"), LayerWeightResidency(LayerwiseLoadOptions{}));
  const auto r = parse_residency("layerwise:depth=3,host=2GiB,device=512MiB,evict=lfu,shards=2,sample=all");
  const auto& o = std::get<LayerwiseLoadOptions>(r);
  EXPECT_EQ(o.offload.prefetch_depth, 3u);
  EXPECT_EQ(o.offload.host_budget_bytes, std::uint64_t{2} << 30);
  EXPECT_EQ(o.offload.device_budget_bytes, std::uint64_t{512} << 20);
  EXPECT_EQ(o.offload.eviction_policy, CacheEvictionPolicy::LeastFrequentlyUsed);
  EXPECT_EQ(o.max_cached_shards, 2u);
  EXPECT_TRUE(o.sample_backend_memory);
  EXPECT_TRUE(o.sample_process_memory);
}

TEST(ParseResidency, StreamDefaultsAndKeys) {
  EXPECT_EQ(parse_residency("stream"), LayerWeightResidency(DenseDiskStreamLoadOptions{}));
  const auto d = std::get<DenseDiskStreamLoadOptions>(
      parse_residency("stream:device=1G,host=3000MB,lookahead=4,queue=1,evict=lfu,shards=1,sample=process"));
  EXPECT_EQ(d.device_budget_bytes, std::uint64_t{1} << 30);
  EXPECT_EQ(d.host_budget_bytes, 3000000000u);
  EXPECT_EQ(d.host_lookahead, 4u);
  EXPECT_EQ(d.background_queue_capacity, 1u);
  EXPECT_EQ(d.eviction_policy, CacheEvictionPolicy::LeastFrequentlyUsed);
  EXPECT_EQ(d.max_cached_shards, 1u);
  EXPECT_FALSE(d.sample_backend_memory);
  EXPECT_TRUE(d.sample_process_memory);
}

TEST(ParseResidency, ByteSuffixes) {
  auto device = [](const std::string& v) {
    return std::get<DenseDiskStreamLoadOptions>(parse_residency("stream:device=" + v)).device_budget_bytes;
  };
  EXPECT_EQ(device("1048576"), 1048576u);
  EXPECT_EQ(device("1KiB"), 1024u);
  EXPECT_EQ(device("1k"), 1024u);
  EXPECT_EQ(device("1K"), 1024u);
  EXPECT_EQ(device("1KB"), 1000u);
  EXPECT_EQ(device("2M"), 2u << 20);
  EXPECT_EQ(device("2MB"), 2000000u);
  EXPECT_EQ(device("1.5GiB"), 3u << 29);
  EXPECT_EQ(device("0"), 0u);
}

TEST(ParseResidency, StreamHostZeroDefaultsControlsToZero) {
  const auto d = std::get<DenseDiskStreamLoadOptions>(parse_residency("stream:host=0"));
  EXPECT_EQ(d.host_budget_bytes, 0u);
  EXPECT_EQ(d.host_lookahead, 0u);
  EXPECT_EQ(d.background_queue_capacity, 0u);
  EXPECT_TRUE(d.validate());
  // Explicit controls with host 0 break the rule instead of being ignored.
  const auto msg = rejection("stream:host=0,lookahead=2");
  EXPECT_NE(msg.find("HostDisabledControls"), std::string::npos) << msg;
}

TEST(ParseResidency, RejectionsNameKeyAndRule) {
  struct Case {
    std::string text, expect;
  };
  const Case cases[] = {
      {"", "unknown mode"},
      {"resident", "unknown mode 'resident'"},
      {"full:depth=1", "unknown key 'depth'"},
      {"layerwise:", "nothing after ':'"},
      {"layerwise:depth=0", "key 'depth'"},
      {"layerwise:depth=-1", "key 'depth'"},
      {"layerwise:depth=2x", "key 'depth'"},
      {"layerwise:depth", "not key=value"},
      {"layerwise:depth=", "key 'depth' has no value"},
      {"layerwise:=3", "not key=value"},
      {"layerwise:depth=1,depth=2", "given twice"},
      {"layerwise:lookahead=2", "unknown key 'lookahead'"},
      {"layerwise:host=lots", "key 'host'"},
      {"layerwise:device=5XB", "unknown unit"},
      {"stream:lookahead=0", "ZeroHostLookahead"},
      {"stream:queue=0", "ZeroQueueCapacity"},
      {"stream:queue=0", "key 'queue'"},
      {"stream:host=0,queue=1", "HostDisabledControls"},
      {"stream:evict=fifo", "key 'evict' must be lru or lfu"},
      {"stream:shards=0", "key 'shards' must be at least 1"},
      {"stream:sample=yes", "key 'sample'"},
      {"stream:depth=2", "unknown key 'depth'"},
      {"stream:device=1GiB,,host=1GiB", "not key=value"},
  };
  for (const auto& c : cases) {
    const std::string msg = rejection(c.text);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "'" << c.text << "' gave: " << msg;
    if (!msg.empty()) {
      EXPECT_NE(msg.find("'" + c.text + "'"), std::string::npos) << "message names the text";
    }
  }
}

TEST(ParseResidency, ToStringRoundTrips) {
  const LayerWeightResidency policies[] = {
      FullyResident{},
      LayerwiseLoadOptions{},
      LayerwiseLoadOptions(OffloadConfig::create(12345, std::uint64_t{3} << 30, 4).value())
          .with_max_cached_shards(9)
          .with_memory_sampling(true, false),
      DenseDiskStreamLoadOptions{},
      DenseDiskStreamLoadOptions::create(1000, 0, 0, 0).value(),
      DenseDiskStreamLoadOptions::create(std::uint64_t{5} << 20, 77, 3, 1)
          .value()
          .with_eviction_policy(CacheEvictionPolicy::LeastFrequentlyUsed)
          .with_memory_sampling(true, true),
  };
  for (const auto& p : policies) EXPECT_EQ(parse_residency(to_string(p)), p) << to_string(p);
}

}  // namespace
