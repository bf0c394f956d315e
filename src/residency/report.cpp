#include "residency/report.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/saturating.h"
#include "qsmcore/error.h"

namespace qsmcore::residency {

using Json = nlohmann::ordered_json;

namespace {

std::uint64_t minus_clamped(std::uint64_t a, std::uint64_t b) {
  return a > b ? a - b : 0;
}

const char* tier_name(std::size_t i) {
  return to_string(static_cast<MemoryTier>(i));
}

Json json(const TransferStats& t) {
  return Json{{"count", t.count}, {"bytes", t.bytes}, {"seconds", t.seconds}};
}
Json json(const PrefetchStats& p) {
  return Json{{"requests", p.requests},
              {"hits", p.hits},
              {"misses", p.misses},
              {"stalls", p.stalls},
              {"stall_seconds", p.stall_seconds}};
}
Json json(const EvictionStats& e) {
  return Json{{"count", e.count}, {"bytes", e.bytes}};
}
Json json(const DenseCacheMetrics& c) {
  return Json{{"requests", c.requests},
              {"hits", c.hits},
              {"misses", c.misses},
              {"evictions", c.evictions},
              {"evicted_bytes", c.evicted_bytes}};
}
Json json(const DenseTierMetrics& t) {
  return Json{{"current_layers", t.current_layers},
              {"peak_layers", t.peak_layers},
              {"current_bytes", t.current_bytes},
              {"peak_bytes", t.peak_bytes},
              {"cache", json(t.cache)}};
}
template <class A>
Json per_tier(const A& a) {
  Json j;
  for (std::size_t i = 0; i < kMemoryTierCount; ++i) j[tier_name(i)] = a[i];
  return j;
}

}  // namespace

void TransferStats::record(std::uint64_t b, double s) {
  count = saturating_add(count, 1);
  bytes = saturating_add(bytes, b);
  seconds += s;
}
void TransferStats::accumulate(const TransferStats& o) {
  count = saturating_add(count, o.count);
  bytes = saturating_add(bytes, o.bytes);
  seconds += o.seconds;
}

const char* to_string(TransferDirection d) {
  switch (d) {
    case TransferDirection::DeviceToHost:
      return "device_to_host";
    case TransferDirection::DeviceToDisk:
      return "device_to_disk";
    case TransferDirection::HostToDevice:
      return "host_to_device";
    case TransferDirection::HostToDisk:
      return "host_to_disk";
    case TransferDirection::DiskToDevice:
      return "disk_to_device";
    case TransferDirection::DiskToHost:
      return "disk_to_host";
  }
  return "?";
}

void PrefetchStats::accumulate(const PrefetchStats& o) {
  requests = saturating_add(requests, o.requests);
  hits = saturating_add(hits, o.hits);
  misses = saturating_add(misses, o.misses);
  stalls = saturating_add(stalls, o.stalls);
  stall_seconds += o.stall_seconds;
}

void EvictionStats::accumulate(const EvictionStats& o) {
  count = saturating_add(count, o.count);
  bytes = saturating_add(bytes, o.bytes);
}

std::optional<ProcessMetrics> sample_process_metrics() {
  ProcessMetrics m;
  {
    std::ifstream status("/proc/self/status");
    if (!status) return std::nullopt;
    std::string line;
    bool found = false;
    while (std::getline(status, line)) {
      if (line.rfind("VmRSS:", 0) == 0) {
        std::istringstream in(line.substr(6));
        std::uint64_t kib = 0;
        if (!(in >> kib)) return std::nullopt;
        m.rss_bytes = kib * 1024;
        found = true;
        break;
      }
    }
    if (!found) return std::nullopt;
  }
  std::ifstream statf("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(statf)), std::istreambuf_iterator<char>());
  // The command name (field 2) may contain spaces and ')': fields restart after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(stat.substr(close + 1));
  // Fields 3.. : state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt.
  std::string state;
  std::uint64_t skip = 0, minflt = 0, cminflt = 0, majflt = 0;
  if (!(in >> state >> skip >> skip >> skip >> skip >> skip >> skip >> minflt >> cminflt >> majflt))
    return std::nullopt;
  m.minor_page_faults = minflt;
  m.major_page_faults = majflt;
  return m;
}

void OffloadReport::record_transfer(TransferDirection d, std::uint64_t bytes, double seconds) {
  transfer(d).record(bytes, seconds);
}

void OffloadReport::record_prefetch(MemoryTier tier, bool hit) {
  for (PrefetchStats* p : {&prefetch, &prefetch_by_tier[tier_index(tier)]}) {
    p->requests = saturating_add(p->requests, 1);
    std::uint64_t& outcome = hit ? p->hits : p->misses;
    outcome = saturating_add(outcome, 1);
  }
}

void OffloadReport::record_stall(MemoryTier tier, double seconds) {
  for (PrefetchStats* p : {&prefetch, &prefetch_by_tier[tier_index(tier)]}) {
    p->stalls = saturating_add(p->stalls, 1);
    p->stall_seconds += seconds;
  }
}

void OffloadReport::record_eviction(MemoryTier tier, std::uint64_t bytes) {
  for (EvictionStats* e : {&evictions, &evictions_by_tier[tier_index(tier)]}) {
    e->count = saturating_add(e->count, 1);
    e->bytes = saturating_add(e->bytes, bytes);
  }
}

void OffloadReport::observe_resident(MemoryTier tier, std::uint64_t bytes, std::uint64_t units) {
  const std::size_t i = tier_index(tier);
  resident_bytes[i] = bytes;
  resident_units[i] = units;
  peak_resident_bytes[i] = std::max(peak_resident_bytes[i], bytes);
  peak_resident_units[i] = std::max(peak_resident_units[i], units);
}

void OffloadReport::sample_process() {
  process_sampled = true;
  process = sample_process_metrics();
}

std::string OffloadReport::to_json(int indent) const {
  Json j;
  j["planned_bytes"] = per_tier(planned_bytes);
  j["resident_bytes"] = per_tier(resident_bytes);
  j["peak_resident_bytes"] = per_tier(peak_resident_bytes);
  j["resident_units"] = per_tier(resident_units);
  j["peak_resident_units"] = per_tier(peak_resident_units);
  Json t;
  for (std::size_t i = 0; i < kTransferDirectionCount; ++i)
    t[to_string(static_cast<TransferDirection>(i))] = json(transfers[i]);
  j["transfers"] = t;
  j["prefetch"] = json(prefetch);
  Json pt;
  for (std::size_t i = 0; i < kMemoryTierCount; ++i) pt[tier_name(i)] = json(prefetch_by_tier[i]);
  j["prefetch_by_tier"] = pt;
  j["evictions"] = json(evictions);
  Json et;
  for (std::size_t i = 0; i < kMemoryTierCount; ++i) et[tier_name(i)] = json(evictions_by_tier[i]);
  j["evictions_by_tier"] = et;
  j["allocator"] = allocator
                       ? Json{{"active", allocator->active}, {"cached", allocator->cached}, {"peak", allocator->peak}}
                       : Json();
  j["process"] = process ? Json{{"rss_bytes", process->rss_bytes},
                                {"minor_page_faults", process->minor_page_faults},
                                {"major_page_faults", process->major_page_faults}}
                         : Json();
  j["process_sampled"] = process_sampled;
  return j.dump(indent);
}

std::string BackgroundPrefetchReport::to_json(int indent) const {
  Json j{{"submitted", submitted},
         {"coalesced", coalesced},
         {"started", started},
         {"completed", completed},
         {"cancelled", cancelled},
         {"failed", failed},
         {"queue_capacity", queue_capacity},
         {"peak_queue_occupancy", peak_queue_occupancy},
         {"backpressure_count", backpressure_count},
         {"backpressure_seconds", backpressure_seconds},
         {"demand_waits", demand_waits},
         {"demand_wait_seconds", demand_wait_seconds},
         {"ready_before_demand", ready_before_demand},
         {"in_flight_at_demand", in_flight_at_demand},
         {"evicted_before_use", evicted_before_use}};
  return j.dump(indent);
}

void DenseCacheMetrics::accumulate(const DenseCacheMetrics& o) {
  requests = saturating_add(requests, o.requests);
  hits = saturating_add(hits, o.hits);
  misses = saturating_add(misses, o.misses);
  evictions = saturating_add(evictions, o.evictions);
  evicted_bytes = saturating_add(evicted_bytes, o.evicted_bytes);
}

DenseCacheMetrics DenseCacheMetrics::minus(const DenseCacheMetrics& e) const {
  return {minus_clamped(requests, e.requests), minus_clamped(hits, e.hits), minus_clamped(misses, e.misses),
          minus_clamped(evictions, e.evictions), minus_clamped(evicted_bytes, e.evicted_bytes)};
}

void DenseTierMetrics::observe(std::uint64_t layers, std::uint64_t bytes) {
  current_layers = layers;
  current_bytes = bytes;
  peak_layers = std::max(peak_layers, layers);
  peak_bytes = std::max(peak_bytes, bytes);
}

DensePassReport DensePassReport::between(const DenseStreamCounters& b, const DenseStreamCounters& e,
                                         const DenseTierMetrics& host, const DenseTierMetrics& device) {
  DensePassReport r;
  r.forwards = minus_clamped(e.forwards, b.forwards);
  r.host_cache = e.host_cache.minus(b.host_cache);
  r.device_cache = e.device_cache.minus(b.device_cache);
  r.peak_host_layers = host.peak_layers;
  r.peak_host_bytes = host.peak_bytes;
  r.peak_device_layers = device.peak_layers;
  r.peak_device_bytes = device.peak_bytes;
  r.disk_to_host_bytes = minus_clamped(e.disk_to_host_bytes, b.disk_to_host_bytes);
  r.disk_to_device_bytes = minus_clamped(e.disk_to_device_bytes, b.disk_to_device_bytes);
  r.host_to_device_bytes = minus_clamped(e.host_to_device_bytes, b.host_to_device_bytes);
  return r;
}

void DensePassReport::accumulate(const DensePassReport& o) {
  forwards = saturating_add(forwards, o.forwards);
  host_cache.accumulate(o.host_cache);
  device_cache.accumulate(o.device_cache);
  peak_host_layers = std::max(peak_host_layers, o.peak_host_layers);
  peak_host_bytes = std::max(peak_host_bytes, o.peak_host_bytes);
  peak_device_layers = std::max(peak_device_layers, o.peak_device_layers);
  peak_device_bytes = std::max(peak_device_bytes, o.peak_device_bytes);
  disk_to_host_bytes = saturating_add(disk_to_host_bytes, o.disk_to_host_bytes);
  disk_to_device_bytes = saturating_add(disk_to_device_bytes, o.disk_to_device_bytes);
  host_to_device_bytes = saturating_add(host_to_device_bytes, o.host_to_device_bytes);
}

namespace {
Json pass_json(const DensePassReport& p) {
  return Json{{"forwards", p.forwards},
              {"host_cache", json(p.host_cache)},
              {"device_cache", json(p.device_cache)},
              {"peak_host_layers", p.peak_host_layers},
              {"peak_host_bytes", p.peak_host_bytes},
              {"peak_device_layers", p.peak_device_layers},
              {"peak_device_bytes", p.peak_device_bytes},
              {"disk_to_host_bytes", p.disk_to_host_bytes},
              {"disk_to_device_bytes", p.disk_to_device_bytes},
              {"host_to_device_bytes", p.host_to_device_bytes}};
}
}  // namespace

std::string DensePassReport::to_json(int indent) const {
  return pass_json(*this).dump(indent);
}

void DensePassTracker::begin(const DenseStreamCounters& now) {
  begin_ = now;
  host_ = {};
  device_ = {};
}

void DensePassTracker::observe(std::uint64_t host_layers, std::uint64_t host_bytes, std::uint64_t device_layers,
                               std::uint64_t device_bytes) {
  if (!begin_) return;
  host_.observe(host_layers, host_bytes);
  device_.observe(device_layers, device_bytes);
}

DensePassReport DensePassTracker::commit(const DenseStreamCounters& now) {
  QSM_ASSERT(begin_.has_value(), "DensePassTracker::commit without begin");
  DensePassReport r = DensePassReport::between(*begin_, now, host_, device_);
  total_.accumulate(r);
  last_ = r;
  begin_.reset();
  return r;
}

void DensePassTracker::abort() {
  begin_.reset();
}

std::string DenseDiskStreamReport::to_json(int indent) const {
  Json j;
  j["planned_layer_count"] = planned_layer_count;
  j["planned_layer_bytes"] = planned_layer_bytes;
  j["maximum_host_layer_bytes"] = maximum_host_layer_bytes;
  j["pinned_static_device_bytes"] = pinned_static_device_bytes;
  j["transfer_stream_index"] = transfer_stream_index;
  j["residency"] = Json::parse(qsmcore::to_json(LayerWeightResidency(residency)));
  j["background"] = Json::parse(background.to_json());
  j["host_layers"] = json(host_layers);
  j["device_layers"] = json(device_layers);
  Json groups_json = Json::array();
  for (const auto& g : groups) {
    groups_json.push_back(Json{{"group", g.group},
                               {"planned_layers", g.planned_layers},
                               {"planned_bytes", g.planned_bytes},
                               {"completed_executions", g.completed_executions},
                               {"host", json(g.host)},
                               {"device", json(g.device)}});
  }
  j["groups"] = groups_json;
  j["last_pass"] = last_pass ? pass_json(*last_pass) : Json();
  j["passes"] = pass_json(passes);
  return j.dump(indent);
}

}  // namespace qsmcore::residency
