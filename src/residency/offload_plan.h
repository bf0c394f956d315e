// Validated unit ids, unit assignments and the explicit offload plan (residency.md §3):
// the static description a ResidencyLedger is built from.
#pragma once
#include <array>
#include <compare>
#include <string>
#include <vector>

#include "qsmcore/residency.h"

namespace qsmcore::residency {

/// A unit's stable identifier: non-empty after trimming whitespace (else EmptyUnitId). Ordered
/// and hashable through its string.
class OffloadUnitId {
 public:
  static Result<OffloadUnitId, OffloadError> create(std::string id);
  const std::string& str() const { return id_; }
  bool operator==(const OffloadUnitId& o) const { return id_ == o.id_; }
  // Spelled out: emscripten's libc++ 14 has no operator<=> for std::string to default from.
  std::strong_ordering operator<=>(const OffloadUnitId& o) const { return id_.compare(o.id_) <=> 0; }

 private:
  explicit OffloadUnitId(std::string id) : id_(std::move(id)) {}
  std::string id_;
};

/// One unit's assignment: bytes ≠ 0 (ZeroSizedUnit); Pinned on Disk is ContradictoryAssignment.
class OffloadUnitSpec {
 public:
  static Result<OffloadUnitSpec, OffloadError> create(OffloadUnitId id, std::uint64_t bytes, ResidencyPolicy policy,
                                                      MemoryTier tier);
  /// Convenience for callers holding a plain string (validates the id too).
  static Result<OffloadUnitSpec, OffloadError> create(std::string id, std::uint64_t bytes, ResidencyPolicy policy,
                                                      MemoryTier tier);
  const OffloadUnitId& id() const { return id_; }
  std::uint64_t bytes() const { return bytes_; }
  ResidencyPolicy policy() const { return policy_; }
  MemoryTier tier() const { return tier_; }
  bool operator==(const OffloadUnitSpec&) const = default;

 private:
  OffloadUnitSpec(OffloadUnitId id, std::uint64_t bytes, ResidencyPolicy policy, MemoryTier tier)
      : id_(std::move(id)), bytes_(bytes), policy_(policy), tier_(tier) {}
  OffloadUnitId id_;
  std::uint64_t bytes_;
  ResidencyPolicy policy_;
  MemoryTier tier_;
};

/// Units sorted by id, no duplicates, per-tier planned bytes without overflow and within the
/// configured budgets.
class OffloadPlan {
 public:
  static Result<OffloadPlan, OffloadError> create(const OffloadConfig& config, std::vector<OffloadUnitSpec> units,
                                                  std::uint32_t schema_version = kOffloadPlanSchemaVersion);
  std::uint32_t schema_version() const { return schema_version_; }
  const OffloadConfig& config() const { return config_; }
  const std::vector<OffloadUnitSpec>& units() const { return units_; }
  std::uint64_t planned_bytes(MemoryTier t) const { return planned_[tier_index(t)]; }
  std::size_t planned_units(MemoryTier t) const { return planned_units_[tier_index(t)]; }
  /// The unit with this id, or null.
  const OffloadUnitSpec* find(const std::string& id) const;

 private:
  OffloadPlan() = default;
  std::uint32_t schema_version_ = kOffloadPlanSchemaVersion;
  OffloadConfig config_;
  std::vector<OffloadUnitSpec> units_;
  std::array<std::uint64_t, kMemoryTierCount> planned_{};
  std::array<std::size_t, kMemoryTierCount> planned_units_{};
};

}  // namespace qsmcore::residency
