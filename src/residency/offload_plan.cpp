#include "residency/offload_plan.h"

#include <algorithm>
#include <cctype>

namespace qsmcore::residency {

Result<OffloadUnitId, OffloadError> OffloadUnitId::create(std::string id) {
  const bool blank = std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isspace(c); });
  if (blank) return OffloadError{.kind = OffloadError::Kind::EmptyUnitId};
  return OffloadUnitId(std::move(id));
}

Result<OffloadUnitSpec, OffloadError> OffloadUnitSpec::create(OffloadUnitId id, std::uint64_t bytes,
                                                              ResidencyPolicy policy, MemoryTier tier) {
  if (bytes == 0) return OffloadError{.kind = OffloadError::Kind::ZeroSizedUnit, .id = id.str()};
  if (policy == ResidencyPolicy::Pinned && tier == MemoryTier::Disk) {
    return OffloadError{.kind = OffloadError::Kind::ContradictoryAssignment,
                        .id = id.str(),
                        .tier = tier,
                        .policy = policy,
                        .reason = "pinned units must be assigned to a resident memory tier"};
  }
  return OffloadUnitSpec(std::move(id), bytes, policy, tier);
}

Result<OffloadUnitSpec, OffloadError> OffloadUnitSpec::create(std::string id, std::uint64_t bytes,
                                                              ResidencyPolicy policy, MemoryTier tier) {
  auto valid = OffloadUnitId::create(std::move(id));
  if (!valid) return valid.error();
  return create(std::move(valid).value(), bytes, policy, tier);
}

Result<OffloadPlan, OffloadError> OffloadPlan::create(const OffloadConfig& config, std::vector<OffloadUnitSpec> units,
                                                      std::uint32_t schema_version) {
  using K = OffloadError::Kind;
  if (schema_version != kOffloadPlanSchemaVersion)
    return OffloadError{.kind = K::UnsupportedSchemaVersion, .schema_version = schema_version};
  // OffloadConfig's fields are public, so a hand-built config may bypass create().
  if (config.prefetch_depth == 0) return OffloadError{.kind = K::ZeroPrefetchDepth};
  std::stable_sort(units.begin(), units.end(), [](const auto& a, const auto& b) { return a.id() < b.id(); });
  for (std::size_t i = 1; i < units.size(); ++i)
    if (units[i - 1].id() == units[i].id()) return OffloadError{.kind = K::DuplicateUnitId, .id = units[i].id().str()};
  OffloadPlan plan;
  plan.config_ = config;
  plan.schema_version_ = schema_version;
  for (const auto& u : units) {
    auto& total = plan.planned_[tier_index(u.tier())];
    if (__builtin_add_overflow(total, u.bytes(), &total))
      return OffloadError{.kind = K::ByteTotalOverflow, .tier = u.tier()};
    ++plan.planned_units_[tier_index(u.tier())];
  }
  for (MemoryTier t : {MemoryTier::Device, MemoryTier::Host}) {
    const auto budget = config.budget(t);
    if (budget && plan.planned_[tier_index(t)] > *budget) {
      return OffloadError{
          .kind = K::BudgetExceeded, .tier = t, .planned_bytes = plan.planned_[tier_index(t)], .budget_bytes = *budget};
    }
  }
  plan.units_ = std::move(units);
  return plan;
}

const OffloadUnitSpec* OffloadPlan::find(const std::string& id) const {
  auto it = std::lower_bound(units_.begin(), units_.end(), id,
                             [](const OffloadUnitSpec& u, const std::string& key) { return u.id().str() < key; });
  return it != units_.end() && it->id().str() == id ? &*it : nullptr;
}

}  // namespace qsmcore::residency
