// The §2 policy family: validation rules and the per-variant table, verbatim from eredu
// (residency.md §2–§3); messages name the rule so a CLI user can fix the value.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "qsmcore/residency.h"

namespace qsmcore {

const char* to_string(CacheEvictionPolicy p) {
  return p == CacheEvictionPolicy::LeastFrequentlyUsed ? "lfu" : "lru";
}

const char* to_string(MemoryTier t) {
  switch (t) {
    case MemoryTier::Device:
      return "device";
    case MemoryTier::Host:
      return "host";
    case MemoryTier::Disk:
      return "disk";
  }
  return "?";
}

const char* to_string(ResidencyPolicy p) {
  switch (p) {
    case ResidencyPolicy::Pinned:
      return "pinned";
    case ResidencyPolicy::Windowed:
      return "windowed";
    case ResidencyPolicy::Cacheable:
      return "cacheable";
  }
  return "?";
}

const char* to_string(ExecutionResidency e) {
  switch (e) {
    case ExecutionResidency::FullyResident:
      return "fully_resident";
    case ExecutionResidency::LayerwiseHost:
      return "layerwise_host";
    case ExecutionResidency::DenseDiskStream:
      return "dense_disk_stream";
  }
  return "?";
}

const char* to_string(OffloadError::Kind k) {
  using K = OffloadError::Kind;
  switch (k) {
    case K::UnsupportedSchemaVersion:
      return "UnsupportedSchemaVersion";
    case K::EmptyUnitId:
      return "EmptyUnitId";
    case K::ZeroSizedUnit:
      return "ZeroSizedUnit";
    case K::DuplicateUnitId:
      return "DuplicateUnitId";
    case K::ByteTotalOverflow:
      return "ByteTotalOverflow";
    case K::BudgetExceeded:
      return "BudgetExceeded";
    case K::ContradictoryAssignment:
      return "ContradictoryAssignment";
    case K::ZeroPrefetchDepth:
      return "ZeroPrefetchDepth";
  }
  return "?";
}

std::string OffloadError::message() const {
  using K = Kind;
  switch (kind) {
    case K::UnsupportedSchemaVersion:
      return "unsupported offload plan schema version " + std::to_string(schema_version) +
             " (supported: " + std::to_string(kOffloadPlanSchemaVersion) + ")";
    case K::EmptyUnitId:
      return "offload unit id must not be empty";
    case K::ZeroSizedUnit:
      return "offload unit '" + id + "' has zero bytes";
    case K::DuplicateUnitId:
      return "offload unit id '" + id + "' appears more than once";
    case K::ByteTotalOverflow:
      return std::string("planned bytes for the ") + to_string(tier) + " tier overflow";
    case K::BudgetExceeded:
      return std::string("planned ") + to_string(tier) + " bytes " + std::to_string(planned_bytes) +
             " exceed the budget of " + std::to_string(budget_bytes) + " bytes";
    case K::ContradictoryAssignment:
      return "offload unit '" + id + "' cannot be " + to_string(policy) + " on " + to_string(tier) + ": " + reason;
    case K::ZeroPrefetchDepth:
      return "prefetch depth must be at least 1";
  }
  return "offload error";
}

const char* to_string(WeightResidencyPolicyError::Kind k) {
  using K = WeightResidencyPolicyError::Kind;
  switch (k) {
    case K::ZeroHostLookahead:
      return "ZeroHostLookahead";
    case K::ZeroQueueCapacity:
      return "ZeroQueueCapacity";
    case K::HostDisabledControls:
      return "HostDisabledControls";
    case K::ZeroParameterBankScratchLimit:
      return "ZeroParameterBankScratchLimit";
    case K::ZeroParameterBankPrefillTarget:
      return "ZeroParameterBankPrefillTarget";
    case K::ParameterBankPrefillTargetExceedsScratch:
      return "ParameterBankPrefillTargetExceedsScratch";
    case K::Offload:
      return "Offload";
  }
  return "?";
}

std::string WeightResidencyPolicyError::message() const {
  using K = Kind;
  switch (kind) {
    case K::ZeroHostLookahead:
      return "host lookahead must be at least 1 when the host budget is non-zero";
    case K::ZeroQueueCapacity:
      return "background queue capacity must be at least 1 when the host budget is non-zero";
    case K::HostDisabledControls:
      return "host budget 0 selects direct disk-to-device loading: host lookahead and queue capacity must be 0";
    case K::ZeroParameterBankScratchLimit:
      return "parameter bank scratch limit must be non-zero";
    case K::ZeroParameterBankPrefillTarget:
      return "parameter bank prefill target must be non-zero";
    case K::ParameterBankPrefillTargetExceedsScratch:
      return "parameter bank prefill target " + std::to_string(target_bytes) + " bytes exceeds the scratch limit of " +
             std::to_string(scratch_bytes) + " bytes";
    case K::Offload:
      return "derived offload configuration is invalid: " + (offload ? offload->message() : "?");
  }
  return "weight residency policy error";
}

Result<OffloadConfig, OffloadError> OffloadConfig::create(std::optional<std::uint64_t> device,
                                                          std::optional<std::uint64_t> host, std::size_t depth) {
  if (depth == 0) return OffloadError{.kind = OffloadError::Kind::ZeroPrefetchDepth};
  OffloadConfig c;
  c.device_budget_bytes = device;
  c.host_budget_bytes = host;
  c.prefetch_depth = depth;
  return c;
}

OffloadConfig OffloadConfig::with_eviction_policy(CacheEvictionPolicy p) const {
  OffloadConfig c = *this;
  c.eviction_policy = p;
  return c;
}

std::optional<std::uint64_t> OffloadConfig::budget(MemoryTier t) const {
  switch (t) {
    case MemoryTier::Device:
      return device_budget_bytes;
    case MemoryTier::Host:
      return host_budget_bytes;
    case MemoryTier::Disk:
      return std::nullopt;
  }
  return std::nullopt;
}

LayerwiseLoadOptions LayerwiseLoadOptions::with_max_cached_shards(std::size_t n) const {
  LayerwiseLoadOptions o = *this;
  o.max_cached_shards = n;
  return o;
}

LayerwiseLoadOptions LayerwiseLoadOptions::with_memory_sampling(bool backend, bool process) const {
  LayerwiseLoadOptions o = *this;
  o.sample_backend_memory = backend;
  o.sample_process_memory = process;
  return o;
}

namespace {
WeightResidencyPolicyError policy_error(WeightResidencyPolicyError::Kind k) {
  return {.kind = k};
}
}  // namespace

Result<DenseDiskStreamLoadOptions, WeightResidencyPolicyError> DenseDiskStreamLoadOptions::create(std::uint64_t device,
                                                                                                  std::uint64_t host,
                                                                                                  std::size_t lookahead,
                                                                                                  std::size_t queue) {
  DenseDiskStreamLoadOptions d;
  d.device_budget_bytes = device;
  d.host_budget_bytes = host;
  d.host_lookahead = lookahead;
  d.background_queue_capacity = queue;
  if (auto v = d.validate(); !v) return v.error();
  return d;
}

Status<WeightResidencyPolicyError> DenseDiskStreamLoadOptions::validate() const {
  using K = WeightResidencyPolicyError::Kind;
  if (host_budget_bytes == 0) {
    if (host_lookahead != 0 || background_queue_capacity != 0) return policy_error(K::HostDisabledControls);
    return std::monostate{};
  }
  if (host_lookahead == 0) return policy_error(K::ZeroHostLookahead);
  if (background_queue_capacity == 0) return policy_error(K::ZeroQueueCapacity);
  return std::monostate{};
}

DenseDiskStreamLoadOptions DenseDiskStreamLoadOptions::with_eviction_policy(CacheEvictionPolicy p) const {
  DenseDiskStreamLoadOptions d = *this;
  d.eviction_policy = p;
  return d;
}

DenseDiskStreamLoadOptions DenseDiskStreamLoadOptions::with_max_cached_shards(std::size_t n) const {
  DenseDiskStreamLoadOptions d = *this;
  d.max_cached_shards = n;
  return d;
}

DenseDiskStreamLoadOptions DenseDiskStreamLoadOptions::with_memory_sampling(bool backend, bool process) const {
  DenseDiskStreamLoadOptions d = *this;
  d.sample_backend_memory = backend;
  d.sample_process_memory = process;
  return d;
}

Result<ParameterBankLoadOptions, WeightResidencyPolicyError> ParameterBankLoadOptions::create(std::uint64_t scratch,
                                                                                              std::uint64_t target) {
  ParameterBankLoadOptions o;
  o.compact_bank_scratch_bytes = scratch;
  o.prefill_compact_bank_target_bytes = target;
  if (auto v = o.validate(); !v) return v.error();
  return o;
}

Status<WeightResidencyPolicyError> ParameterBankLoadOptions::validate() const {
  using K = WeightResidencyPolicyError::Kind;
  if (compact_bank_scratch_bytes == 0) return policy_error(K::ZeroParameterBankScratchLimit);
  if (prefill_compact_bank_target_bytes == 0) return policy_error(K::ZeroParameterBankPrefillTarget);
  if (prefill_compact_bank_target_bytes > compact_bank_scratch_bytes) {
    return WeightResidencyPolicyError{.kind = K::ParameterBankPrefillTargetExceedsScratch,
                                      .target_bytes = prefill_compact_bank_target_bytes,
                                      .scratch_bytes = compact_bank_scratch_bytes};
  }
  return std::monostate{};
}

LayerWeightResidency to_layer_weight_residency(const OrdinaryWeightResidency& r) {
  return r.value;
}

namespace {
// Visitor helper: one lambda per alternative.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;
}  // namespace

std::size_t max_cached_shards(const LayerWeightResidency& r) {
  return std::visit(Overloaded{[](const FullyResident&) { return kDefaultMaxCachedShards; },
                               [](const LayerwiseLoadOptions& o) { return o.max_cached_shards; },
                               [](const DenseDiskStreamLoadOptions& d) { return d.max_cached_shards; }},
                    r);
}

bool sample_backend_memory(const LayerWeightResidency& r) {
  return std::visit(Overloaded{[](const FullyResident&) { return false; },
                               [](const LayerwiseLoadOptions& o) { return o.sample_backend_memory; },
                               [](const DenseDiskStreamLoadOptions& d) { return d.sample_backend_memory; }},
                    r);
}

bool sample_process_memory(const LayerWeightResidency& r) {
  return std::visit(Overloaded{[](const FullyResident&) { return false; },
                               [](const LayerwiseLoadOptions& o) { return o.sample_process_memory; },
                               [](const DenseDiskStreamLoadOptions& d) { return d.sample_process_memory; }},
                    r);
}

std::size_t device_depth(const LayerWeightResidency& r, std::size_t unit_count) {
  return std::visit(
      Overloaded{[&](const FullyResident&) { return unit_count; },
                 // Independent of unit_count: the loader rejects depth > unit count (InvalidLayerWindow).
                 [](const LayerwiseLoadOptions& o) { return o.offload.prefetch_depth; },
                 [&](const DenseDiskStreamLoadOptions&) { return std::min(unit_count, kDenseTransferWindow); }},
      r);
}

Result<OffloadConfig, WeightResidencyPolicyError> offload(const LayerWeightResidency& r) {
  using R = Result<OffloadConfig, WeightResidencyPolicyError>;
  return std::visit(Overloaded{[](const FullyResident&) -> R { return OffloadConfig{}; },
                               [](const LayerwiseLoadOptions& o) -> R { return o.offload; },
                               [](const DenseDiskStreamLoadOptions& d) -> R {
                                 if (auto v = d.validate(); !v) return v.error();
                                 // The offload prefetch depth tracks the host lookahead; the device
                                 // window stays at kDenseTransferWindow.
                                 auto c = OffloadConfig::create(d.device_budget_bytes, d.host_budget_bytes,
                                                                std::max(d.host_lookahead, kDenseTransferWindow));
                                 if (!c) {
                                   return WeightResidencyPolicyError{.kind = WeightResidencyPolicyError::Kind::Offload,
                                                                     .offload = c.error()};
                                 }
                                 return c.value().with_eviction_policy(d.eviction_policy);
                               }},
                    r);
}

std::optional<DenseDiskStreamLoadOptions> dense(const LayerWeightResidency& r) {
  if (const auto* d = std::get_if<DenseDiskStreamLoadOptions>(&r)) return *d;
  return std::nullopt;
}

bool is_fully_resident(const LayerWeightResidency& r) {
  return std::holds_alternative<FullyResident>(r);
}

ExecutionResidency execution_residency(const LayerWeightResidency& r) {
  return std::visit(Overloaded{[](const FullyResident&) { return ExecutionResidency::FullyResident; },
                               [](const LayerwiseLoadOptions&) { return ExecutionResidency::LayerwiseHost; },
                               [](const DenseDiskStreamLoadOptions&) { return ExecutionResidency::DenseDiskStream; }},
                    r);
}

namespace {

// Exact byte text that parse_byte_size reads back: the largest binary unit dividing the value.
std::string exact_bytes(std::uint64_t b) {
  static const std::pair<const char*, std::uint64_t> units[] = {
      {"TiB", std::uint64_t{1} << 40}, {"GiB", std::uint64_t{1} << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}};
  for (const auto& [name, f] : units)
    if (b != 0 && b % f == 0) return std::to_string(b / f) + name;
  return std::to_string(b);
}

std::string sample_text(bool backend, bool process) {
  if (backend && process) return ",sample=all";
  if (backend) return ",sample=backend";
  if (process) return ",sample=process";
  return "";
}

}  // namespace

std::string to_string(const LayerWeightResidency& r) {
  return std::visit(Overloaded{[](const FullyResident&) { return std::string("full"); },
                               [](const LayerwiseLoadOptions& o) {
                                 std::string s = "layerwise:depth=" + std::to_string(o.offload.prefetch_depth);
                                 if (o.offload.host_budget_bytes)
                                   s += ",host=" + exact_bytes(*o.offload.host_budget_bytes);
                                 if (o.offload.device_budget_bytes)
                                   s += ",device=" + exact_bytes(*o.offload.device_budget_bytes);
                                 s += std::string(",evict=") + to_string(o.offload.eviction_policy);
                                 s += ",shards=" + std::to_string(o.max_cached_shards);
                                 return s + sample_text(o.sample_backend_memory, o.sample_process_memory);
                               },
                               [](const DenseDiskStreamLoadOptions& d) {
                                 std::string s = "stream:device=" + exact_bytes(d.device_budget_bytes) +
                                                 ",host=" + exact_bytes(d.host_budget_bytes) +
                                                 ",lookahead=" + std::to_string(d.host_lookahead) +
                                                 ",queue=" + std::to_string(d.background_queue_capacity) +
                                                 ",evict=" + to_string(d.eviction_policy) +
                                                 ",shards=" + std::to_string(d.max_cached_shards);
                                 return s + sample_text(d.sample_backend_memory, d.sample_process_memory);
                               }},
                    r);
}

std::string to_json(const LayerWeightResidency& r, int indent) {
  nlohmann::ordered_json j;
  j["kind"] = to_string(execution_residency(r));
  auto budget = [](std::optional<std::uint64_t> b) {
    return b ? nlohmann::ordered_json(*b) : nlohmann::ordered_json();
  };
  std::visit(Overloaded{[](const FullyResident&) {},
                        [&](const LayerwiseLoadOptions& o) {
                          j["device_budget_bytes"] = budget(o.offload.device_budget_bytes);
                          j["host_budget_bytes"] = budget(o.offload.host_budget_bytes);
                          j["prefetch_depth"] = o.offload.prefetch_depth;
                          j["eviction_policy"] = to_string(o.offload.eviction_policy);
                        },
                        [&](const DenseDiskStreamLoadOptions& d) {
                          j["device_budget_bytes"] = d.device_budget_bytes;
                          j["host_budget_bytes"] = d.host_budget_bytes;
                          j["host_lookahead"] = d.host_lookahead;
                          j["background_queue_capacity"] = d.background_queue_capacity;
                          j["eviction_policy"] = to_string(d.eviction_policy);
                        }},
             r);
  j["max_cached_shards"] = max_cached_shards(r);
  j["sample_backend_memory"] = sample_backend_memory(r);
  j["sample_process_memory"] = sample_process_memory(r);
  return j.dump(indent);
}

}  // namespace qsmcore
