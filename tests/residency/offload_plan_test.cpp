// OffloadUnitId / OffloadUnitSpec / OffloadPlan validation (residency.md §3).
#include "residency/offload_plan.h"

#include <gtest/gtest.h>

#include <limits>

namespace {

using namespace qsmcore;
using namespace qsmcore::residency;
using K = OffloadError::Kind;

OffloadUnitSpec unit(const std::string& id, std::uint64_t bytes, MemoryTier tier = MemoryTier::Host,
                     ResidencyPolicy policy = ResidencyPolicy::Cacheable) {
  return OffloadUnitSpec::create(id, bytes, policy, tier).value();
}

TEST(OffloadUnitId, EmptyAfterTrimIsRejected) {
  for (const char* blank : {"", " ", "\t\n "}) {
    auto r = OffloadUnitId::create(blank);
    ASSERT_FALSE(r) << "'" << blank << "'";
    EXPECT_EQ(r.error().kind, K::EmptyUnitId);
  }
  auto ok = OffloadUnitId::create(" conv1 ");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok.value().str(), " conv1 ") << "kept verbatim, only validated trimmed";
  EXPECT_LT(OffloadUnitId::create("a").value(), OffloadUnitId::create("b").value());
}

TEST(OffloadUnitSpec, ZeroBytesAndPinnedOnDisk) {
  auto zero = OffloadUnitSpec::create("u", 0, ResidencyPolicy::Cacheable, MemoryTier::Host);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().kind, K::ZeroSizedUnit);
  EXPECT_EQ(zero.error().id, "u");
  auto pinned = OffloadUnitSpec::create("p", 1, ResidencyPolicy::Pinned, MemoryTier::Disk);
  ASSERT_FALSE(pinned);
  EXPECT_EQ(pinned.error().kind, K::ContradictoryAssignment);
  EXPECT_EQ(pinned.error().id, "p");
  EXPECT_EQ(pinned.error().policy, ResidencyPolicy::Pinned);
  EXPECT_EQ(pinned.error().tier, MemoryTier::Disk);
  EXPECT_FALSE(pinned.error().reason.empty());
  // Every other policy/tier combination is fine.
  for (auto p : {ResidencyPolicy::Pinned, ResidencyPolicy::Windowed, ResidencyPolicy::Cacheable})
    for (auto t : {MemoryTier::Device, MemoryTier::Host, MemoryTier::Disk}) {
      if (!(p == ResidencyPolicy::Pinned && t == MemoryTier::Disk)) {
        EXPECT_TRUE(OffloadUnitSpec::create("x", 1, p, t)) << to_string(p) << "/" << to_string(t);
      }
    }
  EXPECT_EQ(OffloadUnitSpec::create(" ", 1, ResidencyPolicy::Cacheable, MemoryTier::Host).error().kind, K::EmptyUnitId);
}

TEST(OffloadPlan, SortsAndTotalsPerTier) {
  auto plan = OffloadPlan::create(OffloadConfig{}, {unit("c", 3, MemoryTier::Disk), unit("a", 5, MemoryTier::Device),
                                                    unit("b", 7, MemoryTier::Host), unit("d", 11, MemoryTier::Host)});
  ASSERT_TRUE(plan);
  const auto& p = plan.value();
  ASSERT_EQ(p.units().size(), 4u);
  EXPECT_EQ(p.units()[0].id().str(), "a");
  EXPECT_EQ(p.units()[3].id().str(), "d");
  EXPECT_EQ(p.planned_bytes(MemoryTier::Device), 5u);
  EXPECT_EQ(p.planned_bytes(MemoryTier::Host), 18u);
  EXPECT_EQ(p.planned_bytes(MemoryTier::Disk), 3u);
  EXPECT_EQ(p.planned_units(MemoryTier::Host), 2u);
  EXPECT_EQ(p.schema_version(), 1u);
  ASSERT_NE(p.find("b"), nullptr);
  EXPECT_EQ(p.find("b")->bytes(), 7u);
  EXPECT_EQ(p.find("zz"), nullptr);
}

TEST(OffloadPlan, Errors) {
  auto dup = OffloadPlan::create(OffloadConfig{}, {unit("x", 1), unit("y", 1), unit("x", 2)});
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().kind, K::DuplicateUnitId);
  EXPECT_EQ(dup.error().id, "x");

  const auto max = std::numeric_limits<std::uint64_t>::max();
  auto overflow =
      OffloadPlan::create(OffloadConfig{}, {unit("a", max, MemoryTier::Disk), unit("b", 1, MemoryTier::Disk)});
  ASSERT_FALSE(overflow);
  EXPECT_EQ(overflow.error().kind, K::ByteTotalOverflow);
  EXPECT_EQ(overflow.error().tier, MemoryTier::Disk);

  auto cfg = OffloadConfig::create(10, 0, 1).value();
  auto device = OffloadPlan::create(cfg, {unit("a", 6, MemoryTier::Device), unit("b", 5, MemoryTier::Device)});
  ASSERT_FALSE(device);
  EXPECT_EQ(device.error().kind, K::BudgetExceeded);
  EXPECT_EQ(device.error().tier, MemoryTier::Device);
  EXPECT_EQ(device.error().planned_bytes, 11u);
  EXPECT_EQ(device.error().budget_bytes, 10u);
  EXPECT_TRUE(OffloadPlan::create(cfg, {unit("a", 10, MemoryTier::Device)})) << "planned == budget fits";

  // A zero host budget forbids any host unit; disk units are never charged.
  auto host = OffloadPlan::create(cfg, {unit("h", 1, MemoryTier::Host)});
  ASSERT_FALSE(host);
  EXPECT_EQ(host.error().tier, MemoryTier::Host);
  EXPECT_TRUE(OffloadPlan::create(cfg, {unit("d", 1000, MemoryTier::Disk)}));

  auto schema = OffloadPlan::create(OffloadConfig{}, {}, 2);
  ASSERT_FALSE(schema);
  EXPECT_EQ(schema.error().kind, K::UnsupportedSchemaVersion);
  EXPECT_EQ(schema.error().schema_version, 2u);

  OffloadConfig zero_depth;
  zero_depth.prefetch_depth = 0;  // public field bypassing create()
  EXPECT_EQ(OffloadPlan::create(zero_depth, {}).error().kind, K::ZeroPrefetchDepth);
}

}  // namespace
