#include "residency/ledger.h"

#include <algorithm>
#include <tuple>

#include "core/saturating.h"

namespace qsmcore::residency {
namespace {

using K = LedgerError::Kind;

// Ledger slot of a copy tier: Device 0, Host 1 (Disk has no copies).
int slot(MemoryTier t) {
  return t == MemoryTier::Device ? 0 : 1;
}
MemoryTier tier_of(int s) {
  return s == 0 ? MemoryTier::Device : MemoryTier::Host;
}

LedgerError invalid_target(const char* operation) {
  return LedgerError{.kind = K::InvalidTargetTier, .operation = operation, .tier = MemoryTier::Disk};
}
LedgerError unit_error(K kind, const std::string& id, MemoryTier tier) {
  return LedgerError{.kind = kind, .id = id, .tier = tier};
}

}  // namespace

std::string BlockingUnit::reason() const {
  std::vector<std::string> r;
  if (pinned) r.push_back("pinned");
  if (pins != 0) r.push_back("in use (" + std::to_string(pins) + (pins == 1 ? " pin)" : " pins)"));
  if (active_window) r.push_back("windowed");
  if (request_protected) r.push_back("protected");
  if (reserved) r.push_back("reserved");
  if (in_flight) r.push_back("transfer in flight");
  std::string s;
  for (const auto& x : r) s += (s.empty() ? "" : ", ") + x;
  return s;
}

const char* to_string(LedgerError::Kind k) {
  switch (k) {
    case K::InvalidTargetTier:
      return "InvalidTargetTier";
    case K::UnknownUnit:
      return "UnknownUnit";
    case K::DuplicateBatchUnit:
      return "DuplicateBatchUnit";
    case K::ZeroReservation:
      return "ZeroReservation";
    case K::CopyAlreadyExists:
      return "CopyAlreadyExists";
    case K::ArithmeticOverflow:
      return "ArithmeticOverflow";
    case K::BudgetExhausted:
      return "BudgetExhausted";
    case K::NotReserved:
      return "NotReserved";
    case K::NotResident:
      return "NotResident";
    case K::PublicationExceedsReservation:
      return "PublicationExceedsReservation";
    case K::ZeroPublication:
      return "ZeroPublication";
    case K::PinnedEviction:
      return "PinnedEviction";
    case K::InUseEviction:
      return "InUseEviction";
    case K::PendingTransfer:
      return "PendingTransfer";
    case K::TransferMismatch:
      return "TransferMismatch";
  }
  return "?";
}

std::string LedgerError::message() const {
  const std::string where = "unit '" + id + "' (" + to_string(tier) + ")";
  switch (kind) {
    case K::InvalidTargetTier:
      return operation + " requires a host or device tier";
    case K::UnknownUnit:
      return "unknown residency unit '" + id + "'";
    case K::DuplicateBatchUnit:
      return "unit '" + id + "' appears twice in one reservation";
    case K::ZeroReservation:
      return "zero-byte reservation for unit '" + id + "'";
    case K::CopyAlreadyExists:
      return where + " already has a copy";
    case K::ArithmeticOverflow:
      return "byte total overflows during " + operation;
    case K::BudgetExhausted: {
      std::string s = std::string(to_string(tier)) + " budget exhausted reserving '" + requested +
                      "': " + std::to_string(required_bytes) + " bytes requested, " + std::to_string(resident_bytes) +
                      " resident, budget " + std::to_string(budget_bytes);
      if (blocking_units.empty()) return s + "; nothing else is resident";
      s += "; blocked by";
      for (std::size_t i = 0; i < blocking_units.size(); ++i)
        s += (i ? ", " : " ") + blocking_units[i].id + " [" + blocking_units[i].reason() + "]";
      return s;
    }
    case K::NotReserved:
      return where + " has no reserved copy";
    case K::NotResident:
      return where + " has no resident copy";
    case K::PublicationExceedsReservation:
      return where + " published " + std::to_string(actual_bytes) + " bytes, more than the " +
             std::to_string(reserved_bytes) + " reserved";
    case K::ZeroPublication:
      return where + " published zero bytes";
    case K::PinnedEviction:
      return "cannot evict pinned " + where;
    case K::InUseEviction:
      return "cannot evict " + where + " with " + std::to_string(pin_count) + " live leases";
    case K::PendingTransfer:
      return where + " has an unresolved transfer";
    case K::TransferMismatch:
      return where + " has no in-flight transfer of that generation";
  }
  return "ledger error";
}

ResidencyLedger::ResidencyLedger(const OffloadConfig& config, std::vector<OffloadUnitSpec> units)
    : ResidencyLedger(OffloadPlan::create(config, std::move(units)).value_or_throw(ErrorKind::InvalidInput)) {}

ResidencyLedger::ResidencyLedger(OffloadPlan plan) : plan_(std::move(plan)) {
  for (const auto& u : plan_.units()) units_.emplace(u.id().str(), Unit{u.policy(), {}});
}

ResidencyLedger::Unit* ResidencyLedger::find(const std::string& id) {
  auto it = units_.find(id);
  return it == units_.end() ? nullptr : &it->second;
}
const ResidencyLedger::Unit* ResidencyLedger::find(const std::string& id) const {
  auto it = units_.find(id);
  return it == units_.end() ? nullptr : &it->second;
}

bool ResidencyLedger::window_contains_locked(const std::string& id, int tier) const {
  for (const auto& [key, ids] : windows_)
    if (key.second == tier && ids.count(id)) return true;
  return false;
}

void ResidencyLedger::remove_locked(const std::string&, Unit& u, int s, bool count_eviction) {
  const std::uint64_t b = u.copies[s]->bytes;
  bytes_[s] -= b;
  --count_[s];
  if (count_eviction) {
    ++evictions_[s].count;
    evictions_[s].bytes = saturating_add(evictions_[s].bytes, b);
  }
  u.copies[s].reset();
}

void ResidencyLedger::update_peaks_locked(int s) {
  peak_bytes_[s] = std::max(peak_bytes_[s], bytes_[s]);
  peak_count_[s] = std::max(peak_count_[s], count_[s]);
}

Result<std::vector<Eviction>, LedgerError> ResidencyLedger::reserve_copies(std::span<const CopyRequest> requests,
                                                                           MemoryTier tier,
                                                                           const std::set<std::string>& protected_ids) {
  if (tier == MemoryTier::Disk) return invalid_target("capacity reservation");
  std::lock_guard lock(m_);
  const int s = slot(tier);
  // Validate the whole batch before planning anything.
  std::set<std::string> seen;
  std::uint64_t required = 0;
  for (const auto& r : requests) {
    const Unit* u = find(r.id);
    if (!u) return unit_error(K::UnknownUnit, r.id, tier);
    if (!seen.insert(r.id).second) return unit_error(K::DuplicateBatchUnit, r.id, tier);
    if (r.bytes == 0) return unit_error(K::ZeroReservation, r.id, tier);
    if (u->copies[s]) return unit_error(K::CopyAlreadyExists, r.id, tier);
    if (__builtin_add_overflow(required, r.bytes, &required))
      return LedgerError{.kind = K::ArithmeticOverflow, .operation = "batch capacity reservation", .tier = tier};
  }
  if (requests.empty()) return std::vector<Eviction>{};

  std::vector<Eviction> evicted;
  if (const auto budget = plan_.config().budget(tier)) {
    std::uint64_t needed = 0;
    if (__builtin_add_overflow(bytes_[s], required, &needed))
      return LedgerError{.kind = K::ArithmeticOverflow, .operation = "budget reservation", .tier = tier};
    const std::uint64_t release = needed > *budget ? needed - *budget : 0;
    if (release != 0) {
      // Candidate order (§5): Windowed 0 before Cacheable 1; LFU frequency (0 under LRU);
      // last use; id. std::map iterates by id, and the id is the final key anyway.
      struct Candidate {
        int priority;
        std::uint64_t frequency, last_used;
        const std::string* id;
        std::uint64_t bytes;
      };
      const bool lfu = plan_.config().eviction_policy == CacheEvictionPolicy::LeastFrequentlyUsed;
      std::vector<Candidate> candidates;
      for (const auto& [id, u] : units_) {
        const auto& c = u.copies[s];
        if (!c || c->state != CopyState::Resident || c->in_flight || u.policy == ResidencyPolicy::Pinned ||
            c->pins != 0 || protected_ids.count(id) || window_contains_locked(id, s))
          continue;
        candidates.push_back(
            {u.policy == ResidencyPolicy::Windowed ? 0 : 1, lfu ? c->frequency : 0, c->last_used, &id, c->bytes});
      }
      std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        return std::tie(a.priority, a.frequency, a.last_used, *a.id) <
               std::tie(b.priority, b.frequency, b.last_used, *b.id);
      });
      std::uint64_t releasable = 0;
      for (const auto& c : candidates) {
        if (releasable >= release) break;
        releasable += c.bytes;  // ≤ bytes_[s]: cannot overflow
        evicted.push_back({*c.id, tier, c.bytes});
      }
      if (releasable < release) {
        LedgerError e{.kind = K::BudgetExhausted,
                      .tier = tier,
                      .requested = requests.front().id,
                      .required_bytes = required,
                      .budget_bytes = *budget,
                      .resident_bytes = bytes_[s]};
        for (const auto& [id, u] : units_) {
          const auto& c = u.copies[s];
          if (!c) continue;
          BlockingUnit b{.id = id,
                         .bytes = c->bytes,
                         .pinned = u.policy == ResidencyPolicy::Pinned,
                         .pins = c->pins,
                         .active_window = window_contains_locked(id, s),
                         .request_protected = protected_ids.count(id) != 0,
                         .reserved = c->state == CopyState::Reserved,
                         .in_flight = c->in_flight.has_value()};
          if (b.pinned || b.pins || b.active_window || b.request_protected || b.reserved || b.in_flight)
            e.blocking_units.push_back(std::move(b));
        }
        return e;  // nothing was mutated
      }
    }
  }
  // Commit: every check is done, nothing below can fail.
  for (const auto& ev : evicted) remove_locked(ev.id, units_.at(ev.id), s, /*count_eviction=*/true);
  for (const auto& r : requests) {
    units_.at(r.id).copies[s] = CopyRecord{.state = CopyState::Reserved, .bytes = r.bytes, .last_used = ++tick_};
    bytes_[s] += r.bytes;
    ++count_[s];
  }
  update_peaks_locked(s);
  return evicted;
}

Status<LedgerError> ResidencyLedger::publish_reserved(const std::string& id, MemoryTier tier,
                                                      std::uint64_t actual_bytes,
                                                      std::optional<std::uint64_t> transfer_generation) {
  if (tier == MemoryTier::Disk) return invalid_target("publication");
  std::lock_guard lock(m_);
  const int s = slot(tier);
  Unit* u = find(id);
  if (!u) return unit_error(K::UnknownUnit, id, tier);
  auto& c = u->copies[s];
  if (!c || c->state != CopyState::Reserved) return unit_error(K::NotReserved, id, tier);
  if (actual_bytes == 0) return unit_error(K::ZeroPublication, id, tier);
  if (actual_bytes > c->bytes) {
    return LedgerError{.kind = K::PublicationExceedsReservation,
                       .id = id,
                       .tier = tier,
                       .reserved_bytes = c->bytes,
                       .actual_bytes = actual_bytes};
  }
  bytes_[s] -= c->bytes - actual_bytes;
  c->bytes = actual_bytes;
  c->state = CopyState::Resident;
  c->in_flight = transfer_generation;
  return std::monostate{};
}

Status<LedgerError> ResidencyLedger::rollback_reserved(const std::string& id, MemoryTier tier) {
  if (tier == MemoryTier::Disk) return invalid_target("rollback");
  std::lock_guard lock(m_);
  const int s = slot(tier);
  Unit* u = find(id);
  if (!u) return unit_error(K::UnknownUnit, id, tier);
  if (!u->copies[s] || u->copies[s]->state != CopyState::Reserved) return unit_error(K::NotReserved, id, tier);
  remove_locked(id, *u, s, /*count_eviction=*/false);
  return std::monostate{};
}

Status<LedgerError> ResidencyLedger::resolve_transfer(std::span<const std::string> ids, MemoryTier tier,
                                                      std::uint64_t generation, bool succeeded) {
  if (tier == MemoryTier::Disk) return invalid_target("transfer resolution");
  std::lock_guard lock(m_);
  const int s = slot(tier);
  for (const auto& id : ids) {  // check all first: resolution is all-or-nothing
    const Unit* u = find(id);
    if (!u) return unit_error(K::UnknownUnit, id, tier);
    if (!u->copies[s] || u->copies[s]->in_flight != generation) return unit_error(K::TransferMismatch, id, tier);
  }
  for (const auto& id : ids) {
    Unit& u = *find(id);
    if (succeeded) {
      u.copies[s]->in_flight.reset();
    } else {
      remove_locked(id, u, s, /*count_eviction=*/false);
    }
  }
  return std::monostate{};
}

Status<LedgerError> ResidencyLedger::pin(const std::string& id, MemoryTier tier, std::uint64_t demand) {
  if (tier == MemoryTier::Disk) return invalid_target("pin");
  std::lock_guard lock(m_);
  Unit* u = find(id);
  if (!u) return unit_error(K::UnknownUnit, id, tier);
  auto& c = u->copies[slot(tier)];
  if (!c || c->state != CopyState::Resident) return unit_error(K::NotResident, id, tier);
  c->pins = saturating_add(c->pins, 1);
  c->last_used = ++tick_;
  c->frequency = saturating_add(c->frequency, demand);
  return std::monostate{};
}

void ResidencyLedger::unpin(const std::string& id, MemoryTier tier) noexcept {
  if (tier == MemoryTier::Disk) return;
  std::lock_guard lock(m_);
  Unit* u = find(id);
  if (!u) return;
  auto& c = u->copies[slot(tier)];
  if (c && c->pins != 0) --c->pins;
}

Result<std::optional<std::uint64_t>, LedgerError> ResidencyLedger::evict(const std::string& id, MemoryTier tier) {
  if (tier == MemoryTier::Disk) return invalid_target("evict");
  std::lock_guard lock(m_);
  const int s = slot(tier);
  Unit* u = find(id);
  if (!u) return unit_error(K::UnknownUnit, id, tier);
  const auto& c = u->copies[s];
  if (!c || c->state != CopyState::Resident) return std::optional<std::uint64_t>{};
  if (u->policy == ResidencyPolicy::Pinned) return unit_error(K::PinnedEviction, id, tier);
  if (c->pins != 0) return LedgerError{.kind = K::InUseEviction, .id = id, .tier = tier, .pin_count = c->pins};
  if (c->in_flight) return unit_error(K::PendingTransfer, id, tier);
  const std::uint64_t b = c->bytes;
  remove_locked(id, *u, s, /*count_eviction=*/true);
  return std::optional<std::uint64_t>{b};
}

Result<std::vector<Eviction>, LedgerError> ResidencyLedger::trim_to(MemoryTier tier,
                                                                    const std::set<std::string>& keep) {
  if (tier == MemoryTier::Disk) return invalid_target("trim");
  std::lock_guard lock(m_);
  const int s = slot(tier);
  std::vector<Eviction> out;
  for (auto& [id, u] : units_) {
    const auto& c = u.copies[s];
    if (!c || c->state != CopyState::Resident || keep.count(id) || u.policy == ResidencyPolicy::Pinned ||
        c->pins != 0 || c->in_flight)
      continue;
    out.push_back({id, tier, c->bytes});
    remove_locked(id, u, s, /*count_eviction=*/true);
  }
  return out;
}

Status<LedgerError> ResidencyLedger::set_group_window(const std::string& group, const std::set<std::string>& ids,
                                                      MemoryTier tier) {
  if (tier == MemoryTier::Disk) return invalid_target("window");
  std::lock_guard lock(m_);
  for (const auto& id : ids)
    if (!find(id)) return unit_error(K::UnknownUnit, id, tier);
  const auto key = std::make_pair(group, slot(tier));
  if (ids.empty()) {
    windows_.erase(key);
  } else {
    windows_[key] = ids;
  }
  return std::monostate{};
}

void ResidencyLedger::clear_group_window(const std::string& group) {
  std::lock_guard lock(m_);
  windows_.erase({group, 0});
  windows_.erase({group, 1});
}

void ResidencyLedger::clear_group_window(const std::string& group, MemoryTier tier) {
  if (tier == MemoryTier::Disk) return;
  std::lock_guard lock(m_);
  windows_.erase({group, slot(tier)});
}

std::set<std::string> ResidencyLedger::active_window(MemoryTier tier) const {
  std::set<std::string> out;
  if (tier == MemoryTier::Disk) return out;
  std::lock_guard lock(m_);
  for (const auto& [key, ids] : windows_)
    if (key.second == slot(tier)) out.insert(ids.begin(), ids.end());
  return out;
}

bool ResidencyLedger::has_copy(const std::string& id, MemoryTier tier) const {
  return copy(id, tier).has_value();
}

bool ResidencyLedger::is_resident(const std::string& id, MemoryTier tier) const {
  auto c = copy(id, tier);
  return c && c->state == CopyState::Resident;
}

std::optional<CopyRecord> ResidencyLedger::copy(const std::string& id, MemoryTier tier) const {
  if (tier == MemoryTier::Disk) return std::nullopt;
  std::lock_guard lock(m_);
  const Unit* u = find(id);
  return u ? u->copies[slot(tier)] : std::nullopt;
}

std::uint64_t ResidencyLedger::resident_bytes(MemoryTier tier) const {
  std::lock_guard lock(m_);
  return tier == MemoryTier::Disk ? 0 : bytes_[slot(tier)];
}
std::uint64_t ResidencyLedger::peak_resident_bytes(MemoryTier tier) const {
  std::lock_guard lock(m_);
  return tier == MemoryTier::Disk ? 0 : peak_bytes_[slot(tier)];
}
std::size_t ResidencyLedger::resident_units(MemoryTier tier) const {
  std::lock_guard lock(m_);
  return tier == MemoryTier::Disk ? 0 : count_[slot(tier)];
}
std::size_t ResidencyLedger::peak_resident_units(MemoryTier tier) const {
  std::lock_guard lock(m_);
  return tier == MemoryTier::Disk ? 0 : peak_count_[slot(tier)];
}
EvictionCounter ResidencyLedger::evictions(MemoryTier tier) const {
  std::lock_guard lock(m_);
  return tier == MemoryTier::Disk ? EvictionCounter{} : evictions_[slot(tier)];
}

std::vector<std::string> ResidencyLedger::resident_ids(MemoryTier tier) const {
  std::vector<std::string> out;
  if (tier == MemoryTier::Disk) return out;
  std::lock_guard lock(m_);
  for (const auto& [id, u] : units_)
    if (u.copies[slot(tier)]) out.push_back(id);
  return out;
}

void ResidencyLedger::reset_peaks() {
  std::lock_guard lock(m_);
  peak_bytes_ = bytes_;
  peak_count_ = count_;
}

LedgerSnapshot ResidencyLedger::snapshot() const {
  std::lock_guard lock(m_);
  LedgerSnapshot snap;
  for (const auto& [id, u] : units_) snap.copies[id] = u.copies;
  snap.resident_bytes = bytes_;
  snap.peak_resident_bytes = peak_bytes_;
  snap.resident_units = count_;
  snap.peak_resident_units = peak_count_;
  snap.evictions = evictions_;
  snap.windows = windows_;
  snap.tick = tick_;
  return snap;
}

void ResidencyLedger::check_invariants() const {
  std::lock_guard lock(m_);
  auto fail = [](const std::string& why) { throw Error(ErrorKind::Internal, "residency ledger invariant: " + why); };
  for (int s = 0; s < 2; ++s) {
    const MemoryTier tier = tier_of(s);
    std::uint64_t sum = 0;
    std::size_t n = 0;
    for (const auto& [id, u] : units_) {
      const auto& c = u.copies[s];
      if (!c) continue;
      if (c->bytes == 0) fail(id + " has a zero-byte copy");
      if (c->last_used > tick_) fail(id + " was used in the future");
      if (c->state == CopyState::Reserved && (c->pins || c->in_flight)) fail(id + " is reserved but leased");
      sum += c->bytes;
      ++n;
    }
    const std::string t = to_string(tier);
    if (sum != bytes_[s]) fail(t + " bytes " + std::to_string(bytes_[s]) + " != sum of copies " + std::to_string(sum));
    if (n != count_[s]) fail(t + " unit count is wrong");
    if (peak_bytes_[s] < bytes_[s] || peak_count_[s] < count_[s]) fail(t + " peak below current");
    if (const auto b = plan_.config().budget(tier); b && bytes_[s] > *b)
      fail(t + " bytes " + std::to_string(bytes_[s]) + " exceed the budget " + std::to_string(*b));
    if (const auto b = plan_.config().budget(tier); b && peak_bytes_[s] > *b) fail(t + " peak exceeds the budget");
  }
}

}  // namespace qsmcore::residency
