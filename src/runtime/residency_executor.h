// The residency executor: supplies a plan's weight units under a LayerWeightResidency policy
// (residency.md §4–§6, mapped onto the CPU engine as in §9).
//   Disk   = the model file, read through WeightReader (shard cache).
//   Host   = a unit's raw initializers as stored (its "host copy").
//   Device = the unit's execution-ready copy: its kernel with weights packed/BN-folded.
//   H→D    = build the unit (fold + pack) from its host copy; Disk→D = the same from a staging
//            read when the host tier is disabled.
// Every copy is charged to a ResidencyLedger before it is allocated, so no tier exceeds its
// budget; admission (budget too small for the static weights plus the largest window) fails
// in the constructor, before the first forward allocates anything.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "qsmcore/residency.h"
#include "residency/ledger.h"
#include "residency/prefetch_worker.h"
#include "residency/report.h"
#include "runtime/plan.h"
#include "runtime/weight_reader.h"

namespace qsmcore {

/// Raw initializers resident for a LayerwiseHost model (read eagerly at load).
struct HostWeights {
  std::vector<std::optional<Tensor>> by_initializer;
  /// A leaf of the store: the whole initializer (shared, no copy) or its channel slice.
  Tensor leaf(const graph::LeafKey& k) const;
};

class ResidencyExecutor : public UnitProvider {
 public:
  /// `eager` is the LayerwiseHost host store (null for DenseDiskStream). `static_bytes` are the
  /// weights that stay resident whatever the policy (small constants), charged to the device
  /// budget as one pinned unit.
  ResidencyExecutor(const Plan& plan, const LayerWeightResidency& policy, WeightReader& reader,
                    const HostWeights* eager, std::uint64_t static_bytes, const std::string& model_name);
  ~ResidencyExecutor() override;

  void begin_forward() override;
  const UnitCopy& acquire(int unit) override;
  void complete(int unit) override;
  void finish_forward(bool ok) override;

  residency::OffloadReport offload_report() const;
  /// The whole report: policy, admission figures, units, offload counters, dense stream and
  /// background worker counters, weight store diagnostics (JSON).
  std::string report_json(int indent = 2) const;
  std::uint64_t peak_device_units() const { return peak_device_units_; }
  std::uint64_t peak_host_bytes() const;
  std::uint64_t peak_device_bytes() const;
  std::uint64_t host_budget() const;
  std::uint64_t device_budget() const;
  std::uint64_t forwards() const { return forwards_; }
  /// Weight bytes a forward may add on top of what is loaded: the largest device window, plus
  /// the host cache a dense stream may fill (its budget, or the lookahead window when unbounded).
  std::uint64_t forward_weight_bytes() const;

 private:
  const std::string& id(int u) const { return plan_.units()[static_cast<std::size_t>(u)].id; }
  int count() const { return static_cast<int>(plan_.units().size()); }
  void admit(const std::string& model_name);
  void set_windows(const std::string& model_name);
  void check_budgets(const std::string& model_name, const OffloadConfig& config);
  void make_ledger(const std::string& model_name, const OffloadConfig& config);
  void evict_device(const std::vector<residency::Eviction>& ev);
  void evict_host(const std::vector<residency::Eviction>& ev);
  void trim_device(int from, int to);  // keeps device copies of units [from, to)
  void ensure_device(int u, const std::set<std::string>& window);
  // Host copy of u (reading it if needed); returns its leaves in unit.leaves order.
  std::shared_ptr<const std::vector<Tensor>> host_copy(int u, const std::set<std::string>& protect, bool demand);
  std::shared_ptr<const std::vector<Tensor>> read_host_copy(int u, const std::set<std::string>& protect);
  void submit_prefetch(int u);
  int unit_index(const std::string& id) const;

  const Plan& plan_;
  LayerWeightResidency policy_;
  ExecutionResidency mode_;
  WeightReader& reader_;
  const HostWeights* eager_;
  std::uint64_t static_bytes_;
  std::size_t depth_ = 1;      // device window (units)
  std::size_t lookahead_ = 0;  // dense host window (units); 0 = direct disk → device
  std::uint64_t max_window_bytes_ = 0, max_host_window_bytes_ = 0;
  std::unique_ptr<residency::ResidencyLedger> ledger_;
  std::unique_ptr<residency::PrefetchWorker> worker_;

  std::vector<std::optional<UnitCopy>> device_;
  mutable std::mutex host_mu_;  // host_ is written by the prefetch worker
  std::vector<std::shared_ptr<const std::vector<Tensor>>> host_;
  std::vector<bool> prefetched_unused_;
  std::vector<int> pinned_;  // units pinned on the device by acquire, not yet completed

  mutable std::mutex report_mu_;
  residency::OffloadReport report_;
  residency::DenseStreamCounters dense_;
  // Written by the runs, read by reports from any thread (report_json beside a run): atomics.
  std::atomic<std::uint64_t> peak_device_units_{0}, peak_staging_bytes_{0};
  std::atomic<std::uint64_t> forwards_{0};
};

}  // namespace qsmcore
