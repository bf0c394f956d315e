// The residency ledger (residency.md §5): one per plan, accounting every host and device
// copy of every unit. All growth goes through reserve_copies, which evicts what it must in a
// deterministic order or fails without touching anything, so per-tier resident bytes never
// exceed a finite budget. Thread-safe (one mutex): the prefetch worker reserves host copies
// from its own thread while the executor pins device copies.
// Transfer generations (publish_reserved's transfer_generation, resolve_transfer,
// CopyRecord::in_flight) are the spec's API for asynchronous copies, kept and tested
// (ledger_test.cpp) but not on the production path: ResidencyExecutor publishes without one,
// because packing on a CPU is finished before publish_reserved is called (residency.md §6).
#pragma once
#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "residency/offload_plan.h"

namespace qsmcore::residency {

struct CopyRequest {
  std::string id{};
  std::uint64_t bytes = 0;
};

/// A copy removed to make room (or by evict / trim_to).
struct Eviction {
  std::string id{};
  MemoryTier tier = MemoryTier::Host;
  std::uint64_t bytes = 0;
  bool operator==(const Eviction&) const = default;
};

/// A copy that a failed reservation could not evict, and why (several reasons may hold).
struct BlockingUnit {
  std::string id{};
  std::uint64_t bytes = 0;
  bool pinned = false;             // policy Pinned
  std::uint64_t pins = 0;          // in use: live leases
  bool active_window = false;      // in a group window for the tier
  bool request_protected = false;  // in the request's protected set
  bool reserved = false;           // reserved, not yet published
  bool in_flight = false;          // published with an unresolved transfer
  std::string reason() const;      // "pinned, in use (2 pins), windowed"
  bool operator==(const BlockingUnit&) const = default;
};

struct LedgerError {
  enum class Kind {
    InvalidTargetTier,              // operation: Disk is never a copy target
    UnknownUnit,                    // id
    DuplicateBatchUnit,             // id
    ZeroReservation,                // id
    CopyAlreadyExists,              // id, tier
    ArithmeticOverflow,             // operation
    BudgetExhausted,                // requested, tier, required/budget/resident bytes, blocking_units
    NotReserved,                    // id, tier: publish/rollback of a copy that is not reserved
    NotResident,                    // id, tier: pin of a copy that is not resident
    PublicationExceedsReservation,  // id, tier, reserved_bytes, actual_bytes
    ZeroPublication,                // id, tier
    PinnedEviction,                 // id, tier
    InUseEviction,                  // id, tier, pin_count
    PendingTransfer,                // id, tier: evicting a copy whose transfer is unresolved
    TransferMismatch,               // id, tier: resolve_transfer with another generation
  };
  Kind kind = Kind::UnknownUnit;
  std::string operation{};
  std::string id{};
  MemoryTier tier = MemoryTier::Host;
  // BudgetExhausted (eredu's fields): the first requested id, the batch's bytes, the tier state.
  std::string requested{};
  std::uint64_t required_bytes = 0;
  std::uint64_t budget_bytes = 0;
  std::uint64_t resident_bytes = 0;
  std::vector<BlockingUnit> blocking_units{};
  std::uint64_t pin_count = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t actual_bytes = 0;

  std::string message() const;
  bool operator==(const LedgerError&) const = default;
};
const char* to_string(LedgerError::Kind k);

enum class CopyState { Reserved, Resident };

/// One unit's materialisation in one tier.
struct CopyRecord {
  CopyState state = CopyState::Reserved;
  std::uint64_t bytes = 0;
  std::uint64_t pins = 0;
  std::uint64_t last_used = 0;               // ledger tick of the last reservation or pin
  std::uint64_t frequency = 0;               // demand-weighted pin count (LFU)
  std::optional<std::uint64_t> in_flight{};  // transfer generation, until resolve_transfer
  bool operator==(const CopyRecord&) const = default;
};

struct EvictionCounter {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
  bool operator==(const EvictionCounter&) const = default;
};

/// Everything the ledger holds, for tests ("a failed reservation changes nothing") and reports.
struct LedgerSnapshot {
  std::map<std::string, std::array<std::optional<CopyRecord>, 2>> copies;  // [device, host]
  std::array<std::uint64_t, 2> resident_bytes{}, peak_resident_bytes{};
  std::array<std::size_t, 2> resident_units{}, peak_resident_units{};
  std::array<EvictionCounter, 2> evictions{};
  std::map<std::pair<std::string, int>, std::set<std::string>> windows;  // (group, tier) → ids
  std::uint64_t tick = 0;
  bool operator==(const LedgerSnapshot&) const = default;
};

class ResidencyLedger {
 public:
  /// Throws Error{InvalidInput} with the OffloadError's message when the plan is invalid.
  ResidencyLedger(const OffloadConfig& config, std::vector<OffloadUnitSpec> units);
  explicit ResidencyLedger(OffloadPlan plan);
  ResidencyLedger(const ResidencyLedger&) = delete;
  ResidencyLedger& operator=(const ResidencyLedger&) = delete;

  /// Atomically reserves one copy per request in `tier`. When the finite budget would be
  /// exceeded, evicts resident copies in candidate order (Windowed before Cacheable; under LFU
  /// lower frequency first; then least recently used; then id) until enough bytes are free;
  /// pinned-policy, leased, reserved, in-flight, protected and windowed copies are never
  /// candidates. If they cannot free enough, fails with BudgetExhausted naming the blockers and
  /// changes nothing. Returns the evictions it made.
  Result<std::vector<Eviction>, LedgerError> reserve_copies(std::span<const CopyRequest> requests, MemoryTier tier,
                                                            const std::set<std::string>& protected_ids = {});
  /// Marks a reserved copy resident with its actual size (≤ reserved; the excess is released).
  /// With a transfer generation the copy stays in flight until resolve_transfer.
  Status<LedgerError> publish_reserved(const std::string& id, MemoryTier tier, std::uint64_t actual_bytes,
                                       std::optional<std::uint64_t> transfer_generation = std::nullopt);
  /// Removes a reserved copy (a failed materialisation); not counted as an eviction.
  Status<LedgerError> rollback_reserved(const std::string& id, MemoryTier tier);
  /// Settles in-flight copies of `generation`: clears the flag on success, removes them on failure.
  Status<LedgerError> resolve_transfer(std::span<const std::string> ids, MemoryTier tier, std::uint64_t generation,
                                       bool succeeded);

  /// Leases a resident copy: pins + 1, touches recency, frequency += demand.
  Status<LedgerError> pin(const std::string& id, MemoryTier tier, std::uint64_t demand = 1);
  /// Releases a lease; saturates at 0 and ignores unknown ids (safe from destructors).
  void unpin(const std::string& id, MemoryTier tier) noexcept;
  /// Removes a resident copy; PinnedEviction / InUseEviction / PendingTransfer refuse. Returns the
  /// bytes freed, or nullopt when there is no resident copy (a reserved copy is left alone).
  Result<std::optional<std::uint64_t>, LedgerError> evict(const std::string& id, MemoryTier tier);
  /// Evicts every evictable resident copy in `tier` outside `keep` (layerwise trim after compute);
  /// pinned-policy, leased and in-flight copies stay.
  Result<std::vector<Eviction>, LedgerError> trim_to(MemoryTier tier, const std::set<std::string>& keep);

  /// Replaces group `group`'s protected window in `tier` (an empty set clears it).
  Status<LedgerError> set_group_window(const std::string& group, const std::set<std::string>& ids, MemoryTier tier);
  void clear_group_window(const std::string& group);                   // every tier
  void clear_group_window(const std::string& group, MemoryTier tier);  // one tier
  /// The union of all groups' windows for `tier`.
  std::set<std::string> active_window(MemoryTier tier) const;

  bool has_copy(const std::string& id, MemoryTier tier) const;  // reserved or resident
  bool is_resident(const std::string& id, MemoryTier tier) const;
  std::optional<CopyRecord> copy(const std::string& id, MemoryTier tier) const;
  /// Charged bytes (reserved + resident) and copy counts; Disk is always 0.
  std::uint64_t resident_bytes(MemoryTier tier) const;
  std::uint64_t peak_resident_bytes(MemoryTier tier) const;
  std::size_t resident_units(MemoryTier tier) const;
  std::size_t peak_resident_units(MemoryTier tier) const;
  std::vector<std::string> resident_ids(MemoryTier tier) const;
  EvictionCounter evictions(MemoryTier tier) const;
  /// Sets the peaks to the current values (start of a pass).
  void reset_peaks();
  std::optional<std::uint64_t> budget(MemoryTier tier) const { return plan_.config().budget(tier); }
  const OffloadPlan& plan() const { return plan_; }

  LedgerSnapshot snapshot() const;
  /// Recomputes every total from the copies and checks it against the counters and budgets;
  /// throws Error{Internal} describing the first violation.
  void check_invariants() const;

 private:
  struct Unit {
    ResidencyPolicy policy;
    std::array<std::optional<CopyRecord>, 2> copies;
  };
  Unit* find(const std::string& id);
  const Unit* find(const std::string& id) const;
  bool window_contains_locked(const std::string& id, int tier) const;
  void remove_locked(const std::string& id, Unit& u, int tier, bool count_eviction);
  void update_peaks_locked(int tier);

  mutable std::mutex m_;
  OffloadPlan plan_;
  std::map<std::string, Unit> units_;
  std::array<std::uint64_t, 2> bytes_{}, peak_bytes_{};
  std::array<std::size_t, 2> count_{}, peak_count_{};
  std::array<EvictionCounter, 2> evictions_{};
  std::map<std::pair<std::string, int>, std::set<std::string>> windows_;
  std::uint64_t tick_ = 0;
};

}  // namespace qsmcore::residency
