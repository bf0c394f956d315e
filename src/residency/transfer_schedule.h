// DenseTransferSchedule (residency.md §6): the ordered, bounded cursor of dense streaming.
// Units are admitted strictly in execution order and at most `capacity` transfers are ready at
// once, so the device never holds more than the current and the next unit.
// Spec API kept, not on the production path: eredu's cursor as the spec lists it, tested on the
// spec's example (tests/residency/transfer_schedule_test.cpp). Production dense streaming is
// ResidencyExecutor::acquire (src/runtime/residency_executor.cpp): the ledger's group windows
// bound the device to the current and next unit, and the current unit is packed synchronously (a
// CPU has no copy engine), so no transfer is ever queued (residency.md §6).
#pragma once
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qsmcore/residency.h"

namespace qsmcore::residency {

struct TransferScheduleError {
  enum class Kind {
    ZeroCapacity,
    UnorderedPending,  // previous, actual
    OutOfOrder,        // expected, actual
    CapacityExceeded,  // capacity
    NoPendingUnit,     // actual
  };
  Kind kind = Kind::ZeroCapacity;
  std::size_t previous = 0, expected = 0, actual = 0, capacity = 0;

  std::string message() const {
    switch (kind) {
      case Kind::ZeroCapacity:
        return "dense transfer schedule capacity must be at least 1";
      case Kind::UnorderedPending:
        return "pending units must be strictly increasing: " + std::to_string(actual) + " follows " +
               std::to_string(previous);
      case Kind::OutOfOrder:
        return "unit " + std::to_string(actual) + " admitted out of order (expected " + std::to_string(expected) + ")";
      case Kind::CapacityExceeded:
        return "dense transfer schedule already holds " + std::to_string(capacity) + " ready transfers";
      case Kind::NoPendingUnit:
        return "no pending unit left to admit (got " + std::to_string(actual) + ")";
    }
    return "dense transfer schedule error";
  }
  bool operator==(const TransferScheduleError&) const = default;
};

template <class T>
class DenseTransferSchedule {
 public:
  using Error = TransferScheduleError;

  /// `pending`: unit indices in execution order (strictly increasing); `capacity` ≥ 1.
  static Result<DenseTransferSchedule, Error> create(std::vector<std::size_t> pending, std::size_t capacity) {
    if (capacity == 0) return Error{.kind = Error::Kind::ZeroCapacity};
    for (std::size_t i = 1; i < pending.size(); ++i) {
      if (pending[i] <= pending[i - 1])
        return Error{.kind = Error::Kind::UnorderedPending, .previous = pending[i - 1], .actual = pending[i]};
    }
    return DenseTransferSchedule(std::deque<std::size_t>(pending.begin(), pending.end()), capacity);
  }

  /// A slot is free and a unit is still pending.
  bool can_admit() const { return ready_.size() < capacity_ && !pending_.empty(); }

  /// Admits the front pending unit with its transfer; any other index is OutOfOrder.
  Status<Error> admit(std::size_t index, T transfer) {
    if (pending_.empty()) return Error{.kind = Error::Kind::NoPendingUnit, .actual = index};
    if (ready_.size() >= capacity_) return Error{.kind = Error::Kind::CapacityExceeded, .capacity = capacity_};
    if (index != pending_.front())
      return Error{.kind = Error::Kind::OutOfOrder, .expected = pending_.front(), .actual = index};
    pending_.pop_front();
    ready_.emplace_back(index, std::move(transfer));
    return std::monostate{};
  }

  /// The oldest ready transfer (FIFO), or nothing.
  std::optional<std::pair<std::size_t, T>> pop_ready() {
    if (ready_.empty()) return std::nullopt;
    auto front = std::move(ready_.front());
    ready_.pop_front();
    return front;
  }

  /// Ready then pending indices, truncated to `lookahead`: the units a window should protect.
  std::vector<std::size_t> desired_indices(std::size_t lookahead) const {
    std::vector<std::size_t> out;
    for (const auto& r : ready_) {
      if (out.size() == lookahead) return out;
      out.push_back(r.first);
    }
    for (std::size_t p : pending_) {
      if (out.size() == lookahead) return out;
      out.push_back(p);
    }
    return out;
  }

  std::optional<std::size_t> next_pending() const {
    return pending_.empty() ? std::nullopt : std::optional<std::size_t>(pending_.front());
  }
  std::size_t ready_len() const { return ready_.size(); }
  std::size_t pending_len() const { return pending_.size(); }
  std::size_t capacity() const { return capacity_; }
  bool is_finished() const { return ready_.empty() && pending_.empty(); }

 private:
  DenseTransferSchedule(std::deque<std::size_t> pending, std::size_t capacity)
      : pending_(std::move(pending)), capacity_(capacity) {}
  std::deque<std::size_t> pending_;
  std::deque<std::pair<std::size_t, T>> ready_;
  std::size_t capacity_;
};

}  // namespace qsmcore::residency
