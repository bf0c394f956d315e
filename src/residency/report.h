// Residency telemetry (residency.md §7–§8). Counters saturate instead of wrapping; a pass
// report is the delta between two snapshots, and accumulating passes sums counters and takes the
// maximum of peaks, so an aborted forward (never committed) changes nothing.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qsmcore/residency.h"

namespace qsmcore::residency {

struct TransferStats {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  void record(std::uint64_t bytes, double seconds);
  void accumulate(const TransferStats& o);
  bool operator==(const TransferStats&) const = default;
};

enum class TransferDirection { DeviceToHost, DeviceToDisk, HostToDevice, HostToDisk, DiskToDevice, DiskToHost };
constexpr std::size_t kTransferDirectionCount = 6;
const char* to_string(TransferDirection d);  // "device_to_host", …

struct PrefetchStats {
  std::uint64_t requests = 0, hits = 0, misses = 0, stalls = 0;
  double stall_seconds = 0;
  void accumulate(const PrefetchStats& o);
  bool operator==(const PrefetchStats&) const = default;
};

struct EvictionStats {
  std::uint64_t count = 0, bytes = 0;
  void accumulate(const EvictionStats& o);
  bool operator==(const EvictionStats&) const = default;
};

/// The backend allocator's view (oneDNN/host allocator), latest sample.
struct AllocatorMemoryMetrics {
  std::uint64_t active = 0, cached = 0, peak = 0;
  bool operator==(const AllocatorMemoryMetrics&) const = default;
};

struct ProcessMetrics {
  std::uint64_t rss_bytes = 0, minor_page_faults = 0, major_page_faults = 0;
  bool operator==(const ProcessMetrics&) const = default;
};

/// VmRSS from /proc/self/status and minflt/majflt from /proc/self/stat; nullopt where unavailable.
std::optional<ProcessMetrics> sample_process_metrics();

/// Per-tier arrays are indexed by tier_index (device, host, disk).
struct OffloadReport {
  std::array<std::uint64_t, kMemoryTierCount> planned_bytes{}, resident_bytes{}, peak_resident_bytes{};
  std::array<std::uint64_t, kMemoryTierCount> resident_units{}, peak_resident_units{};
  std::array<TransferStats, kTransferDirectionCount> transfers{};
  PrefetchStats prefetch;
  std::array<PrefetchStats, kMemoryTierCount> prefetch_by_tier{};
  EvictionStats evictions;
  std::array<EvictionStats, kMemoryTierCount> evictions_by_tier{};  // by source tier
  std::optional<AllocatorMemoryMetrics> allocator{};                // latest, not a peak
  std::optional<ProcessMetrics> process{};                          // latest, not a peak
  bool process_sampled = false;                                     // true once sampling ran, even where unsupported

  TransferStats& transfer(TransferDirection d) { return transfers[static_cast<std::size_t>(d)]; }
  const TransferStats& transfer(TransferDirection d) const { return transfers[static_cast<std::size_t>(d)]; }
  void record_transfer(TransferDirection d, std::uint64_t bytes, double seconds);
  /// A lookahead checked `tier` for a copy: hit or miss (one request either way).
  void record_prefetch(MemoryTier tier, bool hit);
  /// A demand acquisition had to materialise synchronously.
  void record_stall(MemoryTier tier, double seconds);
  void record_eviction(MemoryTier tier, std::uint64_t bytes);
  /// Latest resident figures of a tier; peaks only grow.
  void observe_resident(MemoryTier tier, std::uint64_t bytes, std::uint64_t units);
  /// Samples the process (sets process_sampled even when the sample is unavailable).
  void sample_process();
  std::string to_json(int indent = -1) const;
  bool operator==(const OffloadReport&) const = default;
};

/// BackgroundPrefetchReport (§7): the prefetch worker's counters.
struct BackgroundPrefetchReport {
  std::uint64_t submitted = 0;
  std::uint64_t coalesced = 0;  // duplicate or already resident
  std::uint64_t started = 0, completed = 0, cancelled = 0, failed = 0;
  std::uint64_t queue_capacity = 0, peak_queue_occupancy = 0;
  std::uint64_t backpressure_count = 0;  // submit waited for a slot
  double backpressure_seconds = 0;
  std::uint64_t demand_waits = 0;
  double demand_wait_seconds = 0;
  std::uint64_t ready_before_demand = 0, in_flight_at_demand = 0, evicted_before_use = 0;
  std::string to_json(int indent = -1) const;
  bool operator==(const BackgroundPrefetchReport&) const = default;
};

struct DenseCacheMetrics {
  std::uint64_t requests = 0, hits = 0, misses = 0, evictions = 0, evicted_bytes = 0;
  void accumulate(const DenseCacheMetrics& o);
  /// this − earlier, clamped at 0 per counter.
  DenseCacheMetrics minus(const DenseCacheMetrics& earlier) const;
  bool operator==(const DenseCacheMetrics&) const = default;
};

/// Streamed units held in one tier (device figures exclude pinned static weights).
struct DenseTierMetrics {
  std::uint64_t current_layers = 0, peak_layers = 0, current_bytes = 0, peak_bytes = 0;
  DenseCacheMetrics cache{};
  void observe(std::uint64_t layers, std::uint64_t bytes);
  bool operator==(const DenseTierMetrics&) const = default;
};

struct DenseGroupReport {
  std::string group{};
  std::uint64_t planned_layers = 0, planned_bytes = 0, completed_executions = 0;
  DenseTierMetrics host{}, device{};
  bool operator==(const DenseGroupReport&) const = default;
};

/// The cumulative counters a pass is measured against (snapshot at begin, again at commit).
struct DenseStreamCounters {
  std::uint64_t forwards = 0;
  DenseCacheMetrics host_cache{}, device_cache{};
  std::uint64_t disk_to_host_bytes = 0, disk_to_device_bytes = 0, host_to_device_bytes = 0;
  bool operator==(const DenseStreamCounters&) const = default;
};

/// One (or, accumulated, several) forward passes.
struct DensePassReport {
  std::uint64_t forwards = 0;
  DenseCacheMetrics host_cache{}, device_cache{};
  std::uint64_t peak_host_layers = 0, peak_host_bytes = 0, peak_device_layers = 0, peak_device_bytes = 0;
  std::uint64_t disk_to_host_bytes = 0, disk_to_device_bytes = 0, host_to_device_bytes = 0;

  /// Counters: end − begin (clamped at 0); peaks as observed during the pass.
  static DensePassReport between(const DenseStreamCounters& begin, const DenseStreamCounters& end,
                                 const DenseTierMetrics& host_peaks, const DenseTierMetrics& device_peaks);
  /// Sums counters, keeps the maximum of peaks.
  void accumulate(const DensePassReport& o);
  std::string to_json(int indent = -1) const;
  bool operator==(const DensePassReport&) const = default;
};

/// Begin / observe / commit-or-abort around one forward: only a committed pass reaches `total`.
class DensePassTracker {
 public:
  void begin(const DenseStreamCounters& now);
  /// Peaks of streamed units during the pass (call after every residency change).
  void observe(std::uint64_t host_layers, std::uint64_t host_bytes, std::uint64_t device_layers,
               std::uint64_t device_bytes);
  /// Ends the pass: its report is returned and added to total(). Without begin() it is a bug.
  DensePassReport commit(const DenseStreamCounters& now);
  void abort();
  bool active() const { return begin_.has_value(); }
  const DensePassReport& total() const { return total_; }
  const std::optional<DensePassReport>& last() const { return last_; }

 private:
  std::optional<DenseStreamCounters> begin_{};
  DenseTierMetrics host_, device_;
  DensePassReport total_;
  std::optional<DensePassReport> last_{};
};

struct DenseDiskStreamReport {
  std::uint64_t planned_layer_count = 0, planned_layer_bytes = 0;
  std::uint64_t maximum_host_layer_bytes = 0, pinned_static_device_bytes = 0;
  std::uint64_t transfer_stream_index = 0;
  DenseDiskStreamLoadOptions residency;
  BackgroundPrefetchReport background;
  DenseTierMetrics host_layers, device_layers;
  std::vector<DenseGroupReport> groups{};
  std::optional<DensePassReport> last_pass{};
  DensePassReport passes;  // every committed pass accumulated
  std::string to_json(int indent = -1) const;
  bool operator==(const DenseDiskStreamReport&) const = default;
};

}  // namespace qsmcore::residency
