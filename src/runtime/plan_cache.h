// The plan cache of one OnnxModel: one plan per key (input shapes and conv-chain window share),
// each with the residency executor that supplies its weight units under a streaming policy
// (null when fully resident), least recently used dropped first beyond a capacity
// (ModelOptions::max_cached_plans; 1 under a streaming policy).
//
// Plans and executors are held by shared_ptr and handed out as copies: dropping an entry (a
// newer plan, clear_plans, set_threads) never frees a plan or an executor a run on another
// thread still holds; it goes when that run lets go. One mutex guards the entries; every call
// takes it briefly, never while a plan is built or destroyed: what a call drops is returned to
// the caller, so the destructors (a plan's primitives and packed weights, an executor's worker)
// run after the lock is released. Building is the caller's business (OnnxModel::Impl builds one
// plan at a time under its own lock, and looks here before and after taking it).
//
// A template over the plan and executor types so its tests can hold fake entries; the engine's
// instantiation is compiled once, in plan_cache.cpp.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "qsmcore/tensor.h"

namespace qsmcore {

/// What a plan is cached by: the input shapes it was built for and its conv chains' window share.
struct PlanKey {
  std::vector<Shape> shapes;
  std::int64_t share = 0;
  bool operator==(const PlanKey&) const = default;
};

template <class PlanT, class ExecutorT>
class PlanCacheOf {
 public:
  struct Entry {
    PlanKey key;
    std::shared_ptr<PlanT> plan;
    std::shared_ptr<ExecutorT> executor;  // null: the plan needs none (fully resident, no units)
  };

  /// `capacity`: entries kept (at least 1).
  explicit PlanCacheOf(std::size_t capacity = 1) : capacity_(std::max<std::size_t>(capacity, 1)) {}

  /// Entries beyond the new capacity, least recently used first, are dropped (and returned).
  std::vector<Entry> set_capacity(std::size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = std::max<std::size_t>(capacity, 1);
    return evict_locked();
  }

  /// The entry for `key`, now the most recently used; nullopt on a miss.
  std::optional<Entry> find(const PlanKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
    if (it == entries_.end()) return std::nullopt;
    std::rotate(it, it + 1, entries_.end());  // most recently used last
    return entries_.back();
  }

  /// Whether `key` is cached (its place in the order unchanged).
  bool contains(const PlanKey& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
  }

  /// Adds `e` as the most recently used (replacing an entry of the same key); returns what it
  /// dropped: that entry and the least recently used beyond the capacity.
  std::vector<Entry> insert(Entry e) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Entry> dropped;
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& x) { return x.key == e.key; });
    if (it != entries_.end()) {
      dropped.push_back(std::move(*it));
      entries_.erase(it);
    }
    entries_.push_back(std::move(e));
    for (auto& x : evict_locked()) dropped.push_back(std::move(x));
    return dropped;
  }

  /// Drops the entry holding `plan` (compared by address: the caller holds it, so the address is
  /// not another plan's); returns it (empty when it was not cached).
  std::vector<Entry> erase(const PlanT* plan) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Entry> dropped;
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->plan.get() != plan) {
        ++it;
        continue;
      }
      dropped.push_back(std::move(*it));
      it = entries_.erase(it);
    }
    return dropped;
  }

  /// Drops every entry; returns them.
  std::vector<Entry> clear() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Entry> dropped;
    dropped.swap(entries_);
    return dropped;
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }

  /// The executor of the most recently used entry that has one (null: none has).
  std::shared_ptr<ExecutorT> latest_executor() const {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
      if (it->executor) return it->executor;
    return nullptr;
  }

 private:
  std::vector<Entry> evict_locked() {
    std::vector<Entry> dropped;
    while (entries_.size() > capacity_) {
      dropped.push_back(std::move(entries_.front()));
      entries_.erase(entries_.begin());
    }
    return dropped;
  }

  mutable std::mutex mu_;
  std::size_t capacity_;
  std::vector<Entry> entries_;  // least recently used first
};

class Plan;
class ResidencyExecutor;
/// The engine's plan cache (instantiated in plan_cache.cpp).
using PlanCache = PlanCacheOf<Plan, ResidencyExecutor>;
extern template class PlanCacheOf<Plan, ResidencyExecutor>;

}  // namespace qsmcore
