// ResidencyLedger (residency.md §5, §10 items 2 and 4): deterministic eviction order,
// untouchable copies, atomic failure naming the blockers, and the budget invariant under a
// randomized stress of every operation.
#include "residency/ledger.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

namespace {

using namespace qsmcore;
using namespace qsmcore::residency;
using K = LedgerError::Kind;
constexpr MemoryTier kHost = MemoryTier::Host;
constexpr MemoryTier kDevice = MemoryTier::Device;

OffloadUnitSpec unit(const std::string& id, std::uint64_t bytes, ResidencyPolicy policy = ResidencyPolicy::Cacheable,
                     MemoryTier tier = MemoryTier::Disk) {
  return OffloadUnitSpec::create(id, bytes, policy, tier).value();
}

OffloadConfig host_budget(std::uint64_t bytes, CacheEvictionPolicy p = CacheEvictionPolicy::LeastRecentlyUsed) {
  return OffloadConfig::create(std::nullopt, bytes, 1).value().with_eviction_policy(p);
}

// Reserve + publish one copy at its full size.
void materialise(ResidencyLedger& l, const std::string& id, std::uint64_t bytes, MemoryTier tier = kHost) {
  const CopyRequest req{id, bytes};
  auto r = l.reserve_copies({&req, 1}, tier);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_TRUE(l.publish_reserved(id, tier, bytes));
}

std::vector<std::string> ids(const std::vector<Eviction>& ev) {
  std::vector<std::string> out;
  for (const auto& e : ev) out.push_back(e.id);
  return out;
}

// Reserves `id` and returns which copies it evicted.
std::vector<std::string> reserve_evicting(ResidencyLedger& l, const std::string& id, std::uint64_t bytes,
                                          const std::set<std::string>& protect = {}) {
  const CopyRequest req{id, bytes};
  auto r = l.reserve_copies({&req, 1}, kHost, protect);
  EXPECT_TRUE(r) << (r ? "" : r.error().message());
  return r ? ids(r.value()) : std::vector<std::string>{"<failed>"};
}

TEST(ResidencyLedger, ConstructionValidatesThePlan) {
  EXPECT_THROW(ResidencyLedger(OffloadConfig{}, {unit("a", 1), unit("a", 2)}), Error);
  ResidencyLedger l(OffloadConfig{}, {unit("b", 1), unit("a", 2)});
  EXPECT_EQ(l.plan().units().front().id().str(), "a");
  EXPECT_EQ(l.resident_bytes(kHost), 0u);
}

TEST(ResidencyLedger, ReserveWithinBudgetDoesNotEvict) {
  ResidencyLedger l(host_budget(10), {unit("a", 4), unit("b", 6)});
  materialise(l, "a", 4);
  materialise(l, "b", 6);
  EXPECT_EQ(l.resident_bytes(kHost), 10u);
  EXPECT_EQ(l.resident_units(kHost), 2u);
  EXPECT_EQ(l.evictions(kHost).count, 0u);
  EXPECT_EQ(l.resident_bytes(kDevice), 0u) << "tiers are independent";
  l.check_invariants();
}

TEST(ResidencyLedger, LruOrderWithIdTieBreak) {
  ResidencyLedger l(host_budget(3), {unit("a", 1), unit("b", 1), unit("c", 1), unit("d", 1), unit("e", 1)});
  materialise(l, "c", 1);
  materialise(l, "a", 1);
  materialise(l, "b", 1);
  // Oldest use first: c was reserved first.
  EXPECT_EQ(reserve_evicting(l, "d", 1), std::vector<std::string>{"c"});
  ASSERT_TRUE(l.publish_reserved("d", kHost, 1));
  // Pinning a touches it, so b is now the least recent.
  ASSERT_TRUE(l.pin("a", kHost));
  l.unpin("a", kHost);
  EXPECT_EQ(reserve_evicting(l, "e", 1), std::vector<std::string>{"b"});
  EXPECT_EQ(l.evictions(kHost).count, 2u);
  EXPECT_EQ(l.evictions(kHost).bytes, 2u);
  l.check_invariants();
}

TEST(ResidencyLedger, WindowedBeforeCacheable) {
  ResidencyLedger l(host_budget(3), {unit("a", 1, ResidencyPolicy::Cacheable), unit("b", 1, ResidencyPolicy::Windowed),
                                     unit("c", 1, ResidencyPolicy::Cacheable), unit("z", 1)});
  materialise(l, "a", 1);  // least recent, but Cacheable
  materialise(l, "b", 1);
  materialise(l, "c", 1);
  EXPECT_EQ(reserve_evicting(l, "z", 1), std::vector<std::string>{"b"});
}

TEST(ResidencyLedger, LfuOrdersByFrequencyThenRecencyThenId) {
  ResidencyLedger l(host_budget(3, CacheEvictionPolicy::LeastFrequentlyUsed),
                    {unit("a", 1), unit("b", 1), unit("c", 1), unit("x", 1), unit("y", 1)});
  materialise(l, "a", 1);
  materialise(l, "b", 1);
  materialise(l, "c", 1);
  ASSERT_TRUE(l.pin("a", kHost, 5));  // a: frequency 5, most recent
  ASSERT_TRUE(l.pin("b", kHost, 1));  // b: frequency 1
  l.unpin("a", kHost);
  l.unpin("b", kHost);
  // c has frequency 0 although it is more recent than... nothing; it goes first, then b.
  EXPECT_EQ(reserve_evicting(l, "x", 2), (std::vector<std::string>{"c", "b"}));
  // Under LRU the same history would evict by recency: c was reserved after a and b but
  // a and b were pinned later, so c is the least recent and a the most.
  ResidencyLedger lru(host_budget(3), {unit("a", 1), unit("b", 1), unit("c", 1), unit("x", 1)});
  materialise(lru, "a", 1);
  materialise(lru, "b", 1);
  materialise(lru, "c", 1);
  ASSERT_TRUE(lru.pin("a", kHost, 5));
  ASSERT_TRUE(lru.pin("b", kHost, 1));
  lru.unpin("a", kHost);
  lru.unpin("b", kHost);
  EXPECT_EQ(reserve_evicting(lru, "x", 2), (std::vector<std::string>{"c", "a"}));
}

TEST(ResidencyLedger, PinnedLeasedWindowedProtectedAreNeverEvicted) {
  ResidencyLedger l(host_budget(5), {unit("pinned", 1, ResidencyPolicy::Pinned, kHost), unit("leased", 1),
                                     unit("window", 1), unit("protect", 1), unit("free", 1), unit("big", 2)});
  for (const char* id : {"pinned", "leased", "window", "protect", "free"}) materialise(l, id, 1);
  ASSERT_TRUE(l.pin("leased", kHost));
  ASSERT_TRUE(l.set_group_window("g0", {"window"}, kHost));
  // Needs 2 bytes: only "free" (1 byte) is evictable, so this must fail...
  const CopyRequest big{"big", 2};
  const auto before = l.snapshot();
  auto r = l.reserve_copies({&big, 1}, kHost, {"protect"});
  ASSERT_FALSE(r);
  const auto& e = r.error();
  EXPECT_EQ(e.kind, K::BudgetExhausted);
  EXPECT_EQ(e.requested, "big");
  EXPECT_EQ(e.tier, kHost);
  EXPECT_EQ(e.required_bytes, 2u);
  EXPECT_EQ(e.budget_bytes, 5u);
  EXPECT_EQ(e.resident_bytes, 5u);
  // ...without touching anything, naming each blocker and why.
  EXPECT_EQ(l.snapshot(), before);
  ASSERT_EQ(e.blocking_units.size(), 4u) << e.message();
  std::map<std::string, BlockingUnit> by_id;
  for (const auto& b : e.blocking_units) by_id[b.id] = b;
  EXPECT_TRUE(by_id["pinned"].pinned);
  EXPECT_EQ(by_id["leased"].pins, 1u);
  EXPECT_TRUE(by_id["window"].active_window);
  EXPECT_TRUE(by_id["protect"].request_protected);
  EXPECT_EQ(by_id.count("free"), 0u) << "an evictable copy does not block";
  EXPECT_NE(e.message().find("leased [in use (1 pin)]"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("window [windowed]"), std::string::npos) << e.message();
  // Releasing the lease makes room: exactly free + leased go, free first (the pin touched leased).
  l.unpin("leased", kHost);
  auto ok = l.reserve_copies({&big, 1}, kHost, {"protect"});
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(ids(ok.value()), (std::vector<std::string>{"free", "leased"}));
  EXPECT_TRUE(l.is_resident("pinned", kHost));
  EXPECT_TRUE(l.is_resident("window", kHost));
  EXPECT_TRUE(l.is_resident("protect", kHost));
  l.check_invariants();
}

TEST(ResidencyLedger, WindowsAreUnionOfGroupsAndReplaceable) {
  ResidencyLedger l(host_budget(2), {unit("a", 1), unit("b", 1), unit("c", 1)});
  materialise(l, "a", 1);
  materialise(l, "b", 1);
  ASSERT_TRUE(l.set_group_window("g0", {"a"}, kHost));
  ASSERT_TRUE(l.set_group_window("g1", {"b"}, kHost));
  EXPECT_EQ(l.active_window(kHost), (std::set<std::string>{"a", "b"}));
  EXPECT_TRUE(l.active_window(kDevice).empty()) << "windows are per tier";
  const CopyRequest c{"c", 1};
  EXPECT_FALSE(l.reserve_copies({&c, 1}, kHost));
  ASSERT_TRUE(l.set_group_window("g1", {"a"}, kHost));  // replaces g1's window: b unprotected
  EXPECT_EQ(reserve_evicting(l, "c", 1), std::vector<std::string>{"b"});
  l.clear_group_window("g0");
  l.clear_group_window("g1", kHost);
  EXPECT_TRUE(l.active_window(kHost).empty());
  EXPECT_EQ(l.set_group_window("g", {"nope"}, kHost).error().kind, K::UnknownUnit);
  EXPECT_EQ(l.set_group_window("g", {"a"}, MemoryTier::Disk).error().kind, K::InvalidTargetTier);
}

TEST(ResidencyLedger, ReservedCopiesAreChargedButNotEvictable) {
  ResidencyLedger l(host_budget(2), {unit("a", 1), unit("b", 1), unit("c", 1)});
  const CopyRequest a{"a", 1}, b{"b", 1}, c{"c", 1};
  ASSERT_TRUE(l.reserve_copies({&a, 1}, kHost));
  ASSERT_TRUE(l.reserve_copies({&b, 1}, kHost));
  EXPECT_EQ(l.resident_bytes(kHost), 2u);
  auto r = l.reserve_copies({&c, 1}, kHost);
  ASSERT_FALSE(r);
  ASSERT_EQ(r.error().blocking_units.size(), 2u);
  EXPECT_TRUE(r.error().blocking_units[0].reserved);
  // Rollback frees without counting an eviction.
  ASSERT_TRUE(l.rollback_reserved("a", kHost));
  EXPECT_EQ(l.evictions(kHost).count, 0u);
  EXPECT_TRUE(l.reserve_copies({&c, 1}, kHost));
  l.check_invariants();
}

TEST(ResidencyLedger, BatchIsAtomicAndValidated) {
  ResidencyLedger l(host_budget(10), {unit("a", 1), unit("b", 1), unit("c", 1)});
  materialise(l, "a", 4);
  const auto before = l.snapshot();
  const std::vector<CopyRequest> dup = {{"b", 1}, {"b", 1}};
  EXPECT_EQ(l.reserve_copies(dup, kHost).error().kind, K::DuplicateBatchUnit);
  const std::vector<CopyRequest> zero = {{"b", 1}, {"c", 0}};
  EXPECT_EQ(l.reserve_copies(zero, kHost).error().kind, K::ZeroReservation);
  const std::vector<CopyRequest> unknown = {{"b", 1}, {"q", 1}};
  EXPECT_EQ(l.reserve_copies(unknown, kHost).error().kind, K::UnknownUnit);
  const std::vector<CopyRequest> exists = {{"b", 1}, {"a", 1}};
  EXPECT_EQ(l.reserve_copies(exists, kHost).error().kind, K::CopyAlreadyExists);
  const std::vector<CopyRequest> huge = {{"b", UINT64_MAX}, {"c", 1}};
  EXPECT_EQ(l.reserve_copies(huge, kHost).error().kind, K::ArithmeticOverflow);
  const std::vector<CopyRequest> too_big = {{"b", 5}, {"c", 2}};  // 4 + 7 > 10 and a is protected
  auto r = l.reserve_copies(too_big, kHost, {"a"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().required_bytes, 7u) << "the whole batch";
  EXPECT_EQ(l.reserve_copies(too_big, MemoryTier::Disk).error().kind, K::InvalidTargetTier);
  EXPECT_EQ(l.snapshot(), before) << "no failed batch leaves a trace";
  auto ok = l.reserve_copies(too_big, kHost);  // evicts a
  ASSERT_TRUE(ok);
  EXPECT_EQ(ids(ok.value()), std::vector<std::string>{"a"});
  EXPECT_TRUE(l.has_copy("b", kHost));
  EXPECT_TRUE(l.has_copy("c", kHost));
  EXPECT_TRUE(l.reserve_copies({}, kHost)) << "an empty batch is a no-op";
}

TEST(ResidencyLedger, PublishShrinksAndRefusesGrowth) {
  ResidencyLedger l(host_budget(100), {unit("a", 1)});
  const CopyRequest a{"a", 10};
  ASSERT_TRUE(l.reserve_copies({&a, 1}, kHost));
  EXPECT_FALSE(l.is_resident("a", kHost));
  EXPECT_EQ(l.pin("a", kHost).error().kind, K::NotResident) << "a reserved copy cannot be leased";
  auto grow = l.publish_reserved("a", kHost, 11);
  ASSERT_FALSE(grow);
  EXPECT_EQ(grow.error().kind, K::PublicationExceedsReservation);
  EXPECT_EQ(grow.error().reserved_bytes, 10u);
  EXPECT_EQ(grow.error().actual_bytes, 11u);
  EXPECT_EQ(l.publish_reserved("a", kHost, 0).error().kind, K::ZeroPublication);
  ASSERT_TRUE(l.publish_reserved("a", kHost, 7));
  EXPECT_EQ(l.resident_bytes(kHost), 7u);
  EXPECT_EQ(l.peak_resident_bytes(kHost), 10u) << "the reservation was the peak";
  EXPECT_EQ(l.publish_reserved("a", kHost, 7).error().kind, K::NotReserved);
  EXPECT_EQ(l.rollback_reserved("a", kHost).error().kind, K::NotReserved);
  l.check_invariants();
}

TEST(ResidencyLedger, ExplicitEvictionRules) {
  ResidencyLedger l(OffloadConfig{}, {unit("p", 1, ResidencyPolicy::Pinned, kHost), unit("c", 1), unit("r", 1)});
  materialise(l, "p", 3);
  materialise(l, "c", 5);
  EXPECT_EQ(l.evict("p", kHost).error().kind, K::PinnedEviction);
  ASSERT_TRUE(l.pin("c", kHost));
  ASSERT_TRUE(l.pin("c", kHost));
  auto in_use = l.evict("c", kHost);
  ASSERT_FALSE(in_use);
  EXPECT_EQ(in_use.error().kind, K::InUseEviction);
  EXPECT_EQ(in_use.error().pin_count, 2u);
  l.unpin("c", kHost);
  l.unpin("c", kHost);
  l.unpin("c", kHost);  // saturates, no error
  l.unpin("nope", kHost);
  EXPECT_EQ(l.copy("c", kHost)->pins, 0u);
  EXPECT_EQ(l.evict("c", kHost).value(), std::optional<std::uint64_t>(5));
  EXPECT_EQ(l.evict("c", kHost).value(), std::nullopt) << "nothing left to evict";
  EXPECT_EQ(l.evict("zz", kHost).error().kind, K::UnknownUnit);
  EXPECT_EQ(l.evict("c", MemoryTier::Disk).error().kind, K::InvalidTargetTier);
  EXPECT_EQ(l.pin("c", MemoryTier::Disk).error().kind, K::InvalidTargetTier);
  EXPECT_EQ(l.evictions(kHost), (EvictionCounter{1, 5}));
  l.check_invariants();
}

TEST(ResidencyLedger, TransfersResolveOrRollBack) {
  ResidencyLedger l(OffloadConfig{}, {unit("a", 1), unit("b", 1)});
  const std::vector<CopyRequest> reqs = {{"a", 2}, {"b", 3}};
  ASSERT_TRUE(l.reserve_copies(reqs, kDevice));
  ASSERT_TRUE(l.publish_reserved("a", kDevice, 2, 7));
  ASSERT_TRUE(l.publish_reserved("b", kDevice, 3, 7));
  EXPECT_EQ(l.evict("a", kDevice).error().kind, K::PendingTransfer);
  const std::vector<std::string> both = {"a", "b"};
  EXPECT_EQ(l.resolve_transfer(both, kDevice, 8, true).error().kind, K::TransferMismatch);
  EXPECT_TRUE(l.copy("a", kDevice)->in_flight) << "a mismatch resolves nothing";
  const std::vector<std::string> only_a = {"a"};
  ASSERT_TRUE(l.resolve_transfer(only_a, kDevice, 7, true));
  EXPECT_FALSE(l.copy("a", kDevice)->in_flight);
  const std::vector<std::string> only_b = {"b"};
  ASSERT_TRUE(l.resolve_transfer(only_b, kDevice, 7, false));
  EXPECT_FALSE(l.has_copy("b", kDevice)) << "a failed transfer removes its copy";
  EXPECT_EQ(l.resident_bytes(kDevice), 2u);
  EXPECT_EQ(l.evictions(kDevice).count, 0u);
  l.check_invariants();
}

TEST(ResidencyLedger, TrimToKeepsWindowAndUntouchables) {
  ResidencyLedger l(OffloadConfig{}, {unit("s", 1, ResidencyPolicy::Pinned, kDevice), unit("u0", 1), unit("u1", 1),
                                      unit("u2", 1), unit("u3", 1)});
  for (const char* id : {"s", "u0", "u1", "u2", "u3"}) materialise(l, id, 1, kDevice);
  ASSERT_TRUE(l.pin("u0", kDevice));  // compute still reading u0
  auto r = l.trim_to(kDevice, {"u2", "u3"});
  ASSERT_TRUE(r);
  EXPECT_EQ(ids(r.value()), std::vector<std::string>{"u1"});
  EXPECT_EQ(l.resident_ids(kDevice), (std::vector<std::string>{"s", "u0", "u2", "u3"}));
}

TEST(ResidencyLedger, ZeroBudgetAdmitsNothing) {
  ResidencyLedger l(OffloadConfig::create(0, 0, 1).value(), {unit("a", 1)});
  const CopyRequest a{"a", 1};
  auto r = l.reserve_copies({&a, 1}, kDevice);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().budget_bytes, 0u);
  EXPECT_TRUE(r.error().blocking_units.empty());
}

TEST(ResidencyLedger, ResetPeaksStartsAPass) {
  ResidencyLedger l(OffloadConfig{}, {unit("a", 1), unit("b", 1)});
  materialise(l, "a", 4);
  materialise(l, "b", 6);
  ASSERT_TRUE(l.evict("b", kHost));
  EXPECT_EQ(l.peak_resident_bytes(kHost), 10u);
  EXPECT_EQ(l.peak_resident_units(kHost), 2u);
  l.reset_peaks();
  EXPECT_EQ(l.peak_resident_bytes(kHost), 4u);
  EXPECT_EQ(l.peak_resident_units(kHost), 1u);
}

// Random operations against a finite budget: the invariants (bytes == Σ copies, ≤ budget) hold
// after every one, every failed reservation leaves the snapshot unchanged, and no evicted copy
// was pinned, leased, windowed or protected.
TEST(ResidencyLedger, RandomizedStressKeepsBudgetAndInvariants) {
  for (auto policy : {CacheEvictionPolicy::LeastRecentlyUsed, CacheEvictionPolicy::LeastFrequentlyUsed}) {
    std::mt19937 rng(1234 + static_cast<int>(policy));
    std::vector<OffloadUnitSpec> specs;
    const int n = 24;
    for (int i = 0; i < n; ++i) {
      const auto p = i % 7 == 0   ? ResidencyPolicy::Pinned
                     : i % 3 == 0 ? ResidencyPolicy::Windowed
                                  : ResidencyPolicy::Cacheable;
      specs.push_back(unit("u" + std::to_string(i), 1, p, kHost));
    }
    const std::uint64_t budget = 40;
    ResidencyLedger l(OffloadConfig::create(budget / 2, budget, 1).value().with_eviction_policy(policy), specs);
    auto pick = [&] { return "u" + std::to_string(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
    auto tier = [&] { return rng() % 2 ? kHost : kDevice; };
    int reserved_ok = 0, reserved_failed = 0;
    for (int step = 0; step < 4000; ++step) {
      const MemoryTier t = tier();
      switch (rng() % 8) {
        case 0:
        case 1: {  // a batch of 1–3 distinct ids, some protected
          std::vector<CopyRequest> reqs;
          std::set<std::string> seen, protect;
          for (int k = 0, m = 1 + rng() % 3; k < m; ++k) {
            const auto id = pick();
            if (seen.insert(id).second && !l.has_copy(id, t)) reqs.push_back({id, 1 + rng() % 9});
          }
          for (int k = 0; k < 3; ++k) protect.insert(pick());
          const auto before = l.snapshot();
          auto r = l.reserve_copies(reqs, t, protect);
          if (!r) {
            ++reserved_failed;
            ASSERT_EQ(r.error().kind, K::BudgetExhausted) << r.error().message();
            ASSERT_EQ(l.snapshot(), before) << "step " << step;
            break;
          }
          ++reserved_ok;
          for (const auto& ev : r.value()) {
            const auto& c = before.copies.at(ev.id)[t == kDevice ? 0 : 1];
            ASSERT_TRUE(c && c->state == CopyState::Resident && c->pins == 0 && !c->in_flight) << ev.id;
            ASSERT_EQ(protect.count(ev.id), 0u) << ev.id;
            ASSERT_NE(l.plan().find(ev.id)->policy(), ResidencyPolicy::Pinned);
            for (const auto& [key, w] : before.windows)
              ASSERT_FALSE(key.second == (t == kDevice ? 0 : 1) && w.count(ev.id));
          }
          for (const auto& q : reqs) {  // publish most, roll back some
            if (rng() % 5 == 0) {
              ASSERT_TRUE(l.rollback_reserved(q.id, t));
            } else {
              ASSERT_TRUE(l.publish_reserved(q.id, t, 1 + rng() % q.bytes));
            }
          }
          break;
        }
        case 2:
          (void)l.pin(pick(), t, 1 + rng() % 3);
          break;
        case 3:
          l.unpin(pick(), t);
          break;
        case 4:
          (void)l.evict(pick(), t);
          break;
        case 5: {
          std::set<std::string> w;
          for (int k = 0, m = rng() % 4; k < m; ++k) w.insert(pick());
          ASSERT_TRUE(l.set_group_window("g" + std::to_string(rng() % 2), w, t));
          break;
        }
        case 6:
          l.clear_group_window("g" + std::to_string(rng() % 2));
          break;
        case 7:
          (void)l.trim_to(t, {pick(), pick()});
          break;
      }
      ASSERT_NO_THROW(l.check_invariants()) << "step " << step;
      ASSERT_LE(l.resident_bytes(kHost), budget);
      ASSERT_LE(l.resident_bytes(kDevice), budget / 2);
    }
    EXPECT_GT(reserved_ok, 100);
    EXPECT_GT(reserved_failed, 10) << "the stress must actually hit the budget";
    EXPECT_GT(l.evictions(kHost).count, 10u);
  }
}

// The prefetch worker reserves host copies from its thread while the executor pins: the mutex
// must keep the totals exact (run under TSan).
TEST(ResidencyLedger, ConcurrentReserversKeepTheBudget) {
  std::vector<OffloadUnitSpec> specs;
  for (int i = 0; i < 64; ++i) specs.push_back(unit("u" + std::to_string(i), 1));
  ResidencyLedger l(host_budget(16), specs);
  auto worker = [&](int first) {
    for (int round = 0; round < 50; ++round) {
      for (int i = first; i < 64; i += 2) {
        const std::string id = "u" + std::to_string(i);
        const CopyRequest req{id, 2};
        if (l.reserve_copies({&req, 1}, kHost)) {
          EXPECT_TRUE(l.publish_reserved(id, kHost, 2));
          if (l.pin(id, kHost)) l.unpin(id, kHost);
          (void)l.evict(id, kHost);
        }
      }
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  l.check_invariants();
  EXPECT_LE(l.peak_resident_bytes(kHost), 16u);
}

}  // namespace
