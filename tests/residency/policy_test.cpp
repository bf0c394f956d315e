// The §2 policy family: validation vectors and the per-variant method table of
// residency.md, plus Result and the JSON/text forms.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "qsmcore/residency.h"

namespace {

using namespace qsmcore;
using K = WeightResidencyPolicyError::Kind;

TEST(ResidencyResult, ValueAndErrorAccess) {
  Result<int, std::string> ok = 3;
  EXPECT_TRUE(ok.has_value());
  EXPECT_TRUE(static_cast<bool>(ok));
  EXPECT_EQ(ok.value(), 3);
  EXPECT_THROW((void)ok.error(), Error);
  Result<int, std::string> bad = std::string("nope");
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.error(), "nope");
  EXPECT_THROW((void)bad.value(), Error);
  // Same T and E: only the named factories disambiguate.
  auto same = Result<int, int>::err(7);
  EXPECT_FALSE(same.has_value());
  EXPECT_EQ(same.error(), 7);
}

TEST(ResidencyResult, ValueOrThrowCarriesTheMessage) {
  auto r = OffloadConfig::create(std::nullopt, std::nullopt, 0);
  try {
    std::move(r).value_or_throw(ErrorKind::InvalidInput);
    FAIL() << "depth 0 must not produce a config";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(std::string(e.what()).find("prefetch depth"), std::string::npos) << e.what();
  }
}

TEST(OffloadConfig, DefaultsAndZeroDepth) {
  const OffloadConfig d;
  EXPECT_EQ(d.device_budget_bytes, std::nullopt);
  EXPECT_EQ(d.host_budget_bytes, std::nullopt);
  EXPECT_EQ(d.prefetch_depth, 1u);
  EXPECT_EQ(d.eviction_policy, CacheEvictionPolicy::LeastRecentlyUsed);
  auto zero = OffloadConfig::create(1, 2, 0);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().kind, OffloadError::Kind::ZeroPrefetchDepth);
  auto c = OffloadConfig::create(0, std::nullopt, 3);  // a zero budget is meaningful, not an error
  ASSERT_TRUE(c);
  EXPECT_EQ(c.value().device_budget_bytes, 0u);
  EXPECT_EQ(c.value().prefetch_depth, 3u);
  EXPECT_EQ(c.value().budget(MemoryTier::Device), 0u);
  EXPECT_EQ(c.value().budget(MemoryTier::Disk), std::nullopt);
  const auto lfu = c.value().with_eviction_policy(CacheEvictionPolicy::LeastFrequentlyUsed);
  EXPECT_EQ(lfu.eviction_policy, CacheEvictionPolicy::LeastFrequentlyUsed);
  EXPECT_EQ(c.value().eviction_policy, CacheEvictionPolicy::LeastRecentlyUsed) << "builders copy";
}

TEST(DenseDiskStreamLoadOptions, DefaultsFromTheSpec) {
  const DenseDiskStreamLoadOptions d;
  EXPECT_EQ(d.device_budget_bytes, std::uint64_t{4} << 30);
  EXPECT_EQ(d.host_budget_bytes, std::uint64_t{16} << 30);
  EXPECT_EQ(d.host_lookahead, 2u);
  EXPECT_EQ(d.background_queue_capacity, 2u);
  EXPECT_EQ(d.eviction_policy, CacheEvictionPolicy::LeastRecentlyUsed);
  EXPECT_EQ(d.max_cached_shards, 4u);
  EXPECT_FALSE(d.sample_backend_memory);
  EXPECT_FALSE(d.sample_process_memory);
  EXPECT_TRUE(d.validate());
}

TEST(DenseDiskStreamLoadOptions, ValidationVectors) {
  auto kind = [](std::uint64_t dev, std::uint64_t host, std::size_t look, std::size_t queue) {
    auto r = DenseDiskStreamLoadOptions::create(dev, host, look, queue);
    return r ? std::optional<K>() : std::optional<K>(r.error().kind);
  };
  EXPECT_EQ(kind(1, 1, 0, 1), K::ZeroHostLookahead);
  EXPECT_EQ(kind(1, 1, 1, 0), K::ZeroQueueCapacity);
  EXPECT_EQ(kind(1, 1, 0, 0), K::ZeroHostLookahead) << "lookahead is checked first";
  EXPECT_EQ(kind(1, 0, 1, 0), K::HostDisabledControls);
  EXPECT_EQ(kind(1, 0, 0, 1), K::HostDisabledControls);
  EXPECT_EQ(kind(1, 0, 0, 0), std::nullopt);
  EXPECT_EQ(kind(0, 1, 1, 1), std::nullopt) << "the device budget is checked at load, not here";
  // validate() re-checks a value edited after construction.
  auto d = DenseDiskStreamLoadOptions::create(1, 1, 1, 1).value();
  d.host_budget_bytes = 0;
  ASSERT_FALSE(d.validate());
  EXPECT_EQ(d.validate().error().kind, K::HostDisabledControls);
  EXPECT_FALSE(d.host_enabled());
}

TEST(LayerWeightResidency, SpecExampleDense32x64) {
  const LayerWeightResidency r = DenseDiskStreamLoadOptions::create(32, 64, 3, 2).value();
  EXPECT_EQ(device_depth(r, 8), 2u);
  EXPECT_EQ(device_depth(r, 1), 1u) << "a one-unit group uses one slot";
  auto o = offload(r);
  ASSERT_TRUE(o);
  EXPECT_EQ(o.value().device_budget_bytes, 32u);
  EXPECT_EQ(o.value().host_budget_bytes, 64u);
  EXPECT_EQ(o.value().prefetch_depth, 3u);
}

TEST(LayerWeightResidency, TableFullyResident) {
  const LayerWeightResidency r;  // default
  ASSERT_TRUE(std::holds_alternative<FullyResident>(r));
  EXPECT_EQ(max_cached_shards(r), 4u);
  EXPECT_FALSE(sample_backend_memory(r));
  EXPECT_FALSE(sample_process_memory(r));
  EXPECT_EQ(device_depth(r, 17), 17u);
  EXPECT_EQ(offload(r).value(), OffloadConfig{});
  EXPECT_EQ(dense(r), std::nullopt);
  EXPECT_TRUE(is_fully_resident(r));
  EXPECT_EQ(execution_residency(r), ExecutionResidency::FullyResident);
}

TEST(LayerWeightResidency, TableLayerwiseHost) {
  auto cfg = OffloadConfig::create(100, 200, 3).value().with_eviction_policy(CacheEvictionPolicy::LeastFrequentlyUsed);
  const LayerWeightResidency r = LayerwiseLoadOptions(cfg).with_max_cached_shards(7).with_memory_sampling(true, false);
  EXPECT_EQ(max_cached_shards(r), 7u);
  EXPECT_TRUE(sample_backend_memory(r));
  EXPECT_FALSE(sample_process_memory(r));
  EXPECT_EQ(device_depth(r, 1), 3u) << "independent of unit_count";
  EXPECT_EQ(device_depth(r, 50), 3u);
  EXPECT_EQ(offload(r).value(), cfg) << "verbatim";
  EXPECT_EQ(dense(r), std::nullopt);
  EXPECT_FALSE(is_fully_resident(r));
  EXPECT_EQ(execution_residency(r), ExecutionResidency::LayerwiseHost);
  const LayerwiseLoadOptions def;
  EXPECT_EQ(def.offload, OffloadConfig{});
  EXPECT_EQ(def.max_cached_shards, 4u);
}

TEST(LayerWeightResidency, TableDenseDiskStream) {
  const auto d = DenseDiskStreamLoadOptions::create(10, 20, 1, 1)
                     .value()
                     .with_eviction_policy(CacheEvictionPolicy::LeastFrequentlyUsed)
                     .with_max_cached_shards(2)
                     .with_memory_sampling(false, true);
  const LayerWeightResidency r = d;
  EXPECT_EQ(max_cached_shards(r), 2u);
  EXPECT_FALSE(sample_backend_memory(r));
  EXPECT_TRUE(sample_process_memory(r));
  EXPECT_EQ(device_depth(r, 0), 0u);
  EXPECT_EQ(device_depth(r, 5), 2u);
  const auto o = offload(r).value();
  EXPECT_EQ(o.prefetch_depth, 2u) << "max(host_lookahead, 2)";
  EXPECT_EQ(o.eviction_policy, CacheEvictionPolicy::LeastFrequentlyUsed);
  EXPECT_EQ(dense(r), d);
  EXPECT_FALSE(is_fully_resident(r));
  EXPECT_EQ(execution_residency(r), ExecutionResidency::DenseDiskStream);
  // Host disabled: the offload depth is still the device window.
  const LayerWeightResidency direct = DenseDiskStreamLoadOptions::create(10, 0, 0, 0).value();
  EXPECT_EQ(offload(direct).value().prefetch_depth, 2u);
  EXPECT_EQ(offload(direct).value().host_budget_bytes, 0u);
}

TEST(LayerWeightResidency, OffloadRevalidatesDense) {
  auto d = DenseDiskStreamLoadOptions{};
  d.host_lookahead = 0;
  auto o = offload(LayerWeightResidency(d));
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().kind, K::ZeroHostLookahead);
}

TEST(LayerWeightResidency, EqualityAndOrdinaryConversion) {
  const LayerWeightResidency a = DenseDiskStreamLoadOptions{};
  LayerWeightResidency b = DenseDiskStreamLoadOptions{};
  EXPECT_EQ(a, b);
  b = DenseDiskStreamLoadOptions{}.with_max_cached_shards(5);
  EXPECT_NE(a, b);
  EXPECT_NE(LayerWeightResidency(FullyResident{}), LayerWeightResidency(LayerwiseLoadOptions{}));
  const OrdinaryWeightResidency ord{LayerwiseLoadOptions{}};
  EXPECT_EQ(to_layer_weight_residency(ord), LayerWeightResidency(LayerwiseLoadOptions{}));
  EXPECT_EQ(OrdinaryWeightResidency{}, OrdinaryWeightResidency{FullyResident{}});
}

TEST(ParameterBankLoadOptions, Validation) {
  const ParameterBankLoadOptions def;
  EXPECT_EQ(def.compact_bank_scratch_bytes, UINT64_MAX);
  EXPECT_EQ(def.prefill_compact_bank_target_bytes, std::uint64_t{1} << 30);
  EXPECT_TRUE(def.validate());
  EXPECT_EQ(ParameterBankLoadOptions::create(0, 1).error().kind, K::ZeroParameterBankScratchLimit);
  EXPECT_EQ(ParameterBankLoadOptions::create(1, 0).error().kind, K::ZeroParameterBankPrefillTarget);
  const auto e = ParameterBankLoadOptions::create(5, 6).error();
  EXPECT_EQ(e.kind, K::ParameterBankPrefillTargetExceedsScratch);
  EXPECT_EQ(e.target_bytes, 6u);
  EXPECT_EQ(e.scratch_bytes, 5u);
  EXPECT_TRUE(ParameterBankLoadOptions::create(6, 6));
}

TEST(LayerWeightResidency, TextAndJson) {
  EXPECT_EQ(to_string(LayerWeightResidency{}), "full");
  EXPECT_EQ(to_string(LayerWeightResidency(DenseDiskStreamLoadOptions{})),
            "stream:device=4GiB,host=16GiB,lookahead=2,queue=2,evict=lru,shards=4");
  const auto j = nlohmann::json::parse(to_json(LayerWeightResidency(DenseDiskStreamLoadOptions{})));
  EXPECT_EQ(j["kind"], "dense_disk_stream");
  EXPECT_EQ(j["device_budget_bytes"], std::uint64_t{4} << 30);
  EXPECT_EQ(j["host_lookahead"], 2);
  EXPECT_EQ(j["eviction_policy"], "lru");
  const auto l = nlohmann::json::parse(to_json(LayerWeightResidency(LayerwiseLoadOptions{})));
  EXPECT_EQ(l["kind"], "layerwise_host");
  EXPECT_TRUE(l["device_budget_bytes"].is_null()) << "unbounded is null, not 0";
  EXPECT_EQ(l["prefetch_depth"], 1);
}

TEST(OffloadError, MessagesNameTheProblem) {
  const OffloadError e{
      .kind = OffloadError::Kind::BudgetExceeded, .tier = MemoryTier::Host, .planned_bytes = 10, .budget_bytes = 5};
  EXPECT_NE(e.message().find("host"), std::string::npos);
  EXPECT_NE(e.message().find("10"), std::string::npos);
  const WeightResidencyPolicyError w{.kind = K::Offload, .offload = e};
  EXPECT_NE(w.message().find("exceed"), std::string::npos) << w.message();
}

}  // namespace
