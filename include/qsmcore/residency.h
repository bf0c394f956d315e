// Weight residency policies (residency.md §2–§3): where a network's weights live while it
// runs. FullyResident keeps every unit packed in memory; LayerwiseHost keeps raw weights on the
// host and a bounded window of packed units; DenseDiskStream leaves units on disk with finite
// host and device caches. This header is the policy vocabulary only; the ledger, schedule,
// prefetch worker and shard cache live in src/residency/.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "qsmcore/error.h"

namespace qsmcore {

/// A value or an error (C++20 has no std::expected). Fallible residency calls return one so
/// that callers branch on the error kind instead of parsing exception text.
template <class T, class E>
class Result {
 public:
  static Result ok(T value) { return Result(std::in_place_index<0>, std::move(value)); }
  static Result err(E error) { return Result(std::in_place_index<1>, std::move(error)); }
  /// Implicit from either alternative (when they differ), so `return error;` reads naturally.
  // Templates with distinct constraints so that Result<X, X> still declares two constructors.
  template <class U = T>
  requires(!std::is_same_v<T, E> && std::is_same_v<U, T>) Result(T value)
      : v_(std::in_place_index<0>, std::move(value)) {}
  template <class U = E>
  requires(!std::is_same_v<T, E> && std::is_same_v<U, E>) Result(E error)
      : v_(std::in_place_index<1>, std::move(error)) {}

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  /// The value; calling it on an error is a bug (throws Error{Internal} with the error text).
  T& value() & { return check(), std::get<0>(v_); }
  const T& value() const& { return check(), std::get<0>(v_); }
  T&& value() && { return check(), std::get<0>(std::move(v_)); }
  /// The error; calling it on a value is a bug (throws Error{Internal}).
  const E& error() const {
    if (has_value()) throw Error(ErrorKind::Internal, "Result::error() called on a value");
    return std::get<1>(v_);
  }
  /// The value, or throws Error{kind, error().message()}: the bridge to qsmcore's error idiom.
  T value_or_throw(ErrorKind kind) && {
    if (!has_value()) throw Error(kind, describe());
    return std::get<0>(std::move(v_));
  }

  bool operator==(const Result&) const = default;

 private:
  template <std::size_t I, class V>
  Result(std::in_place_index_t<I> tag, V&& v) : v_(tag, std::forward<V>(v)) {}
  void check() const {
    if (!has_value()) throw Error(ErrorKind::Internal, "Result::value() called on an error: " + describe());
  }
  std::string describe() const {
    if constexpr (requires(const E& e) { e.message(); }) {
      return std::get<1>(v_).message();
    } else {
      return "error";
    }
  }
  std::variant<T, E> v_;
};

/// Result of a check that produces nothing but may fail.
template <class E>
using Status = Result<std::monostate, E>;

enum class CacheEvictionPolicy { LeastRecentlyUsed, LeastFrequentlyUsed };
/// Disk is only a source, never a copy target.
enum class MemoryTier { Device, Host, Disk };
/// Pinned: kept for the manager's lifetime; Windowed: only inside an execution window;
/// Cacheable: retained or evicted as the cache policy permits.
enum class ResidencyPolicy { Pinned, Windowed, Cacheable };
enum class ExecutionResidency { FullyResident, LayerwiseHost, DenseDiskStream };

const char* to_string(CacheEvictionPolicy p);  // "lru" | "lfu"
const char* to_string(MemoryTier t);           // "device" | "host" | "disk"
const char* to_string(ResidencyPolicy p);      // "pinned" | "windowed" | "cacheable"
const char* to_string(ExecutionResidency e);   // "fully_resident" | "layerwise_host" | "dense_disk_stream"

constexpr std::size_t kMemoryTierCount = 3;
constexpr std::size_t tier_index(MemoryTier t) {
  return static_cast<std::size_t>(t);
}

/// Current + next unit kept on the device by dense streaming; not tunable (§2).
constexpr std::size_t kDenseTransferWindow = 2;
/// Default bound on simultaneously open checkpoint payload sources (§2, §7).
constexpr std::size_t kDefaultMaxCachedShards = 4;
/// OffloadPlan schema version (§3).
constexpr std::uint32_t kOffloadPlanSchemaVersion = 1;

/// Configuration and plan errors of eredu-core's OffloadError (§3).
struct OffloadError {
  enum class Kind {
    UnsupportedSchemaVersion,  // schema_version
    EmptyUnitId,
    ZeroSizedUnit,            // id
    DuplicateUnitId,          // id
    ByteTotalOverflow,        // tier
    BudgetExceeded,           // tier, planned_bytes, budget_bytes
    ContradictoryAssignment,  // id, policy, tier, reason
    ZeroPrefetchDepth,
  };
  Kind kind = Kind::EmptyUnitId;
  std::uint32_t schema_version = 0;
  std::string id{};
  MemoryTier tier = MemoryTier::Device;
  ResidencyPolicy policy = ResidencyPolicy::Pinned;
  std::uint64_t planned_bytes = 0;
  std::uint64_t budget_bytes = 0;
  std::string reason{};

  std::string message() const;
  bool operator==(const OffloadError&) const = default;
};
const char* to_string(OffloadError::Kind k);

/// Budgets and prefetch depth shared by every policy (§3). None = unbounded; a zero budget is
/// meaningful and forbids non-empty units in that tier.
struct OffloadConfig {
  std::optional<std::uint64_t> device_budget_bytes{};
  std::optional<std::uint64_t> host_budget_bytes{};
  std::size_t prefetch_depth = 1;  // logical units the executor may prefetch ahead (≥ 1)
  CacheEvictionPolicy eviction_policy = CacheEvictionPolicy::LeastRecentlyUsed;

  /// Fails with ZeroPrefetchDepth when depth = 0; eviction policy LRU.
  static Result<OffloadConfig, OffloadError> create(std::optional<std::uint64_t> device,
                                                    std::optional<std::uint64_t> host, std::size_t depth);
  OffloadConfig with_eviction_policy(CacheEvictionPolicy p) const;
  std::optional<std::uint64_t> budget(MemoryTier t) const;  // Disk: none
  bool operator==(const OffloadConfig&) const = default;
};

/// Loader controls for host-backed layerwise execution (§2); no validation beyond OffloadConfig.
struct LayerwiseLoadOptions {
  OffloadConfig offload;
  std::size_t max_cached_shards = kDefaultMaxCachedShards;
  bool sample_backend_memory = false;
  bool sample_process_memory = false;

  LayerwiseLoadOptions() = default;
  explicit LayerwiseLoadOptions(OffloadConfig o) : offload(o) {}
  LayerwiseLoadOptions with_max_cached_shards(std::size_t n) const;
  LayerwiseLoadOptions with_memory_sampling(bool backend, bool process) const;
  bool operator==(const LayerwiseLoadOptions&) const = default;
};

/// Policy validation errors (§2): dense controls, MoE parameter-bank limits, derived config.
struct WeightResidencyPolicyError {
  enum class Kind {
    ZeroHostLookahead,
    ZeroQueueCapacity,
    HostDisabledControls,
    ZeroParameterBankScratchLimit,
    ZeroParameterBankPrefillTarget,
    ParameterBankPrefillTargetExceedsScratch,  // target_bytes, scratch_bytes
    Offload,                                   // offload
  };
  Kind kind = Kind::ZeroHostLookahead;
  std::uint64_t target_bytes = 0;
  std::uint64_t scratch_bytes = 0;
  std::optional<OffloadError> offload{};

  std::string message() const;
  bool operator==(const WeightResidencyPolicyError&) const = default;
};
const char* to_string(WeightResidencyPolicyError::Kind k);

/// Bounded dense-unit streaming from checkpoint storage (§2).
struct DenseDiskStreamLoadOptions {
  std::uint64_t device_budget_bytes = std::uint64_t{4} << 30;  // includes pinned static weights
  std::uint64_t host_budget_bytes = std::uint64_t{16} << 30;   // 0 selects direct disk → device
  std::size_t host_lookahead = 2;                              // current + imminent host copies protected from eviction
  std::size_t background_queue_capacity = 2;                   // pending background host materialisations
  CacheEvictionPolicy eviction_policy = CacheEvictionPolicy::LeastRecentlyUsed;
  std::size_t max_cached_shards = kDefaultMaxCachedShards;
  bool sample_backend_memory = false;
  bool sample_process_memory = false;  // includes page-fault counters

  /// host = 0 ⇒ lookahead = queue = 0 (HostDisabledControls); host > 0 ⇒ lookahead ≠ 0
  /// (ZeroHostLookahead) and queue ≠ 0 (ZeroQueueCapacity). The device budget is checked
  /// against the plan at load, not here.
  static Result<DenseDiskStreamLoadOptions, WeightResidencyPolicyError> create(std::uint64_t device, std::uint64_t host,
                                                                               std::size_t lookahead,
                                                                               std::size_t queue);
  Status<WeightResidencyPolicyError> validate() const;
  bool host_enabled() const { return host_budget_bytes != 0; }
  DenseDiskStreamLoadOptions with_eviction_policy(CacheEvictionPolicy p) const;
  DenseDiskStreamLoadOptions with_max_cached_shards(std::size_t n) const;
  DenseDiskStreamLoadOptions with_memory_sampling(bool backend, bool process) const;
  bool operator==(const DenseDiskStreamLoadOptions&) const = default;
};

/// MoE parameter-bank cache controls (§2, related types); unused by QSM networks.
struct ParameterBankLoadOptions {
  std::uint64_t compact_bank_scratch_bytes = UINT64_MAX;
  std::uint64_t prefill_compact_bank_target_bytes = std::uint64_t{1} << 30;
  /// Both ≠ 0 and target ≤ scratch.
  static Result<ParameterBankLoadOptions, WeightResidencyPolicyError> create(std::uint64_t scratch,
                                                                             std::uint64_t target);
  Status<WeightResidencyPolicyError> validate() const;
  bool operator==(const ParameterBankLoadOptions&) const = default;
};

struct FullyResident {
  bool operator==(const FullyResident&) const = default;
};

/// Placement policy for ordinary execution units; default-constructs to FullyResident.
using LayerWeightResidency = std::variant<FullyResident, LayerwiseLoadOptions, DenseDiskStreamLoadOptions>;

/// The same three policies as used inside MoE IndependentParameterBanks; a distinct type so the
/// two cannot be mixed up silently.
struct OrdinaryWeightResidency {
  LayerWeightResidency value;
  bool operator==(const OrdinaryWeightResidency&) const = default;
};
LayerWeightResidency to_layer_weight_residency(const OrdinaryWeightResidency& r);

// The §2 table, one free function per method.
std::size_t max_cached_shards(const LayerWeightResidency& r);
bool sample_backend_memory(const LayerWeightResidency& r);
bool sample_process_memory(const LayerWeightResidency& r);
/// Maximum execution-device unit window: unit_count | o.offload.prefetch_depth | min(unit_count, 2).
std::size_t device_depth(const LayerWeightResidency& r, std::size_t unit_count);
/// The shared offload configuration this policy resolves to (dense: validated first).
Result<OffloadConfig, WeightResidencyPolicyError> offload(const LayerWeightResidency& r);
std::optional<DenseDiskStreamLoadOptions> dense(const LayerWeightResidency& r);
bool is_fully_resident(const LayerWeightResidency& r);
ExecutionResidency execution_residency(const LayerWeightResidency& r);

/// The policy in parse_residency's syntax (round-trips), e.g.
/// "stream:device=4GiB,host=16GiB,lookahead=2,queue=2,evict=lru,shards=4".
std::string to_string(const LayerWeightResidency& r);
/// The policy as a JSON object (every field, budgets in bytes; null for an unbounded budget).
std::string to_json(const LayerWeightResidency& r, int indent = -1);

/// Parses the CLI's --residency value:
///   full
///   layerwise[:depth=N,host=BYTES,device=BYTES,evict=lru|lfu,shards=N,sample=KIND]
///   stream[:device=BYTES,host=BYTES,lookahead=N,queue=N,evict=lru|lfu,shards=N,sample=KIND]
/// BYTES: a plain number or a size with unit (KiB MiB GiB TiB, kB MB GB TB, K M G T = binary).
/// KIND: none | backend | process | all. `stream` with host=0 defaults lookahead and queue to 0.
/// Throws Error{InvalidInput} naming the bad key and the rule it breaks.
LayerWeightResidency parse_residency(const std::string& text);

}  // namespace qsmcore
