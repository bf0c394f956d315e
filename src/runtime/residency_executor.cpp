#include "runtime/residency_executor.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>

#include "qsmcore/error.h"

namespace qsmcore {
namespace {

/// v = max(v, x) for a figure written by runs and read by reports on other threads.
void raise_to(std::atomic<std::uint64_t>& v, std::uint64_t x) {
  std::uint64_t cur = v.load();
  while (cur < x && !v.compare_exchange_weak(cur, x)) {
  }
}

using residency::TransferDirection;
using Clock = std::chrono::steady_clock;

constexpr const char* kStatic = "static";
constexpr const char* kHostWindow = "dense:0:host";
constexpr const char* kDeviceWindow = "dense:0:device";

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string mib(std::uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / 1048576.0);
  return s;
}

// Largest sum of `width` consecutive values.
std::uint64_t max_window(const std::vector<std::uint64_t>& v, std::size_t width) {
  std::uint64_t best = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint64_t s = 0;
    for (std::size_t j = i; j < v.size() && j < i + width; ++j) s += v[j];
    best = std::max(best, s);
  }
  return best;
}

}  // namespace

Tensor HostWeights::leaf(const graph::LeafKey& k) const {
  const auto& t = by_initializer.at(static_cast<std::size_t>(k.initializer));
  QSM_ASSERT(t.has_value(), "a host weight that was never read");
  return k.channels < 0 ? *t : graph::slice_input_channels(*t, k.ch0, k.channels);
}

ResidencyExecutor::ResidencyExecutor(const Plan& plan, const LayerWeightResidency& policy, WeightReader& reader,
                                     const HostWeights* eager, std::uint64_t static_bytes,
                                     const std::string& model_name)
    : plan_(plan),
      policy_(policy),
      mode_(execution_residency(policy)),
      reader_(reader),
      eager_(eager),
      static_bytes_(static_bytes) {
  QSM_ASSERT(mode_ != ExecutionResidency::FullyResident, "a residency executor for a fully resident model");
  const auto n = static_cast<std::size_t>(count());
  device_.resize(n);
  host_.resize(n);
  prefetched_unused_.assign(n, false);
  admit(model_name);
}

ResidencyExecutor::~ResidencyExecutor() {
  worker_.reset();  // cancels queued reads and joins before the copies go
}

// Admission, before anything is materialised (§4): the windows the policy asks for, checked
// against the model's units and the budgets, then the ledger that tracks them.
void ResidencyExecutor::admit(const std::string& model_name) {
  auto cfg = offload(policy_);
  if (!cfg) throw Error(ErrorKind::InvalidInput, model_name + ": residency policy: " + cfg.error().message());
  const OffloadConfig config = cfg.value();
  set_windows(model_name);
  check_budgets(model_name, config);
  make_ledger(model_name, config);
}

// The device window (depth_) and the host lookahead, refused where longer than the model.
void ResidencyExecutor::set_windows(const std::string& model_name) {
  const std::size_t n = static_cast<std::size_t>(count());
  if (mode_ == ExecutionResidency::LayerwiseHost) {
    depth_ = device_depth(policy_, n);
    if (depth_ > n) {
      throw Error(ErrorKind::InvalidInput, model_name + ": InvalidLayerWindow: a device window of " +
                                               std::to_string(depth_) + " units exceeds the model's " +
                                               std::to_string(n) + " weight units");
    }
  } else {
    const auto d = *dense(policy_);
    depth_ = std::min<std::size_t>(n, 2);
    lookahead_ = d.host_budget_bytes > 0 ? d.host_lookahead : 0;
    if (lookahead_ > n) {
      throw Error(ErrorKind::InvalidInput, model_name + ": InvalidHostLayerWindow: a host lookahead of " +
                                               std::to_string(lookahead_) + " units exceeds the model's " +
                                               std::to_string(n) + " weight units");
    }
  }
}

// The largest device and host windows against the budgets, refused before any copy is made.
void ResidencyExecutor::check_budgets(const std::string& model_name, const OffloadConfig& config) {
  std::vector<std::uint64_t> dev, host;
  for (const auto& u : plan_.units()) {
    dev.push_back(u.device_bytes);
    host.push_back(u.host_bytes);
  }
  max_window_bytes_ = max_window(dev, depth_);
  const std::uint64_t dev_required = static_bytes_ + max_window_bytes_;
  if (config.device_budget_bytes && dev_required > *config.device_budget_bytes) {
    throw Error(ErrorKind::OutOfBudget, model_name + ": DeviceBudgetTooSmall: static weights " + mib(static_bytes_) +
                                            " + the largest window of " + std::to_string(depth_) +
                                            " execution-ready units " + mib(max_window_bytes_) + " = " +
                                            mib(dev_required) + " (" + std::to_string(dev_required) +
                                            " bytes) needed, device budget " + mib(*config.device_budget_bytes));
  }
  std::uint64_t host_required = 0;
  if (mode_ == ExecutionResidency::LayerwiseHost) {
    for (auto b : host) host_required += b;
  } else if (lookahead_ > 0) {
    host_required = max_window(host, lookahead_);
  }
  max_host_window_bytes_ = host_required;
  if (config.host_budget_bytes && host_required > *config.host_budget_bytes) {
    throw Error(ErrorKind::OutOfBudget,
                model_name + ": HostBudgetTooSmall: " + mib(host_required) + " (" + std::to_string(host_required) +
                    " bytes) of raw weights needed on the host, budget " + mib(*config.host_budget_bytes));
  }
}

// The ledger of every unit (and the static weights, pinned on the device), charged with what
// exists already: the static weights, and in LayerwiseHost the host copies read at load; the
// prefetch worker where a host lookahead reads ahead.
void ResidencyExecutor::make_ledger(const std::string& model_name, const OffloadConfig& config) {
  std::vector<residency::OffloadUnitSpec> specs;
  auto add = [&](const std::string& id, std::uint64_t bytes, ResidencyPolicy p, MemoryTier t) {
    auto s = residency::OffloadUnitSpec::create(id, bytes, p, t);
    if (!s) throw Error(ErrorKind::Internal, model_name + ": " + s.error().message());
    specs.push_back(s.value());
  };
  if (static_bytes_ > 0) add(kStatic, static_bytes_, ResidencyPolicy::Pinned, MemoryTier::Device);
  for (const auto& u : plan_.units()) {
    if (mode_ == ExecutionResidency::LayerwiseHost)
      add(u.id, u.host_bytes, ResidencyPolicy::Windowed, MemoryTier::Host);
    else
      add(u.id, u.host_bytes, ResidencyPolicy::Cacheable, MemoryTier::Disk);
  }
  ledger_ = std::make_unique<residency::ResidencyLedger>(config, std::move(specs));
  if (static_bytes_ > 0) {
    const residency::CopyRequest req{kStatic, static_bytes_};
    auto r = ledger_->reserve_copies(std::span(&req, 1), MemoryTier::Device);
    if (!r) throw Error(ErrorKind::OutOfBudget, model_name + ": " + r.error().message());
    (void)ledger_->publish_reserved(kStatic, MemoryTier::Device, static_bytes_);
  }
  for (std::size_t t = 0; t < kMemoryTierCount; ++t)
    report_.planned_bytes[t] = ledger_->plan().planned_bytes(static_cast<MemoryTier>(t));

  if (mode_ == ExecutionResidency::LayerwiseHost) {
    // The host copies already exist (read at load); the ledger charges them.
    QSM_ASSERT(eager_ != nullptr, "LayerwiseHost without its host store");
    for (int u = 0; u < count(); ++u) {
      const auto& unit = plan_.units()[static_cast<std::size_t>(u)];
      const residency::CopyRequest req{unit.id, unit.host_bytes};
      auto r = ledger_->reserve_copies(std::span(&req, 1), MemoryTier::Host);
      if (!r) throw Error(ErrorKind::OutOfBudget, model_name + ": " + r.error().message());
      (void)ledger_->publish_reserved(unit.id, MemoryTier::Host, unit.host_bytes);
    }
  } else if (lookahead_ > 0) {
    worker_ = std::make_unique<residency::PrefetchWorker>(dense(policy_)->background_queue_capacity);
  }
}

int ResidencyExecutor::unit_index(const std::string& s) const {
  // Ids are "u<index>:<node>", the index zero-padded to at least four digits (plan.cpp): from
  // unit 10 000 on it has five or more, so every digit up to the ':' is read (the first four
  // alone named unit 1000 for unit 10 000, whose copies were then never freed). Anything else
  // (the static weights' id) is no unit.
  const std::size_t colon = s.find(':');
  if (s.size() < 2 || s[0] != 'u' || colon == std::string::npos || colon < 2) return -1;
  int u = 0;
  for (std::size_t i = 1; i < colon; ++i) {
    if (s[i] < '0' || s[i] > '9' || u > (std::numeric_limits<int>::max() - 9) / 10) return -1;
    u = u * 10 + (s[i] - '0');
  }
  return u < count() ? u : -1;
}

void ResidencyExecutor::evict_device(const std::vector<residency::Eviction>& ev) {
  for (const auto& e : ev) {
    const int u = unit_index(e.id);
    if (u < 0) continue;
    device_[static_cast<std::size_t>(u)].reset();
    std::lock_guard<std::mutex> lock(report_mu_);
    report_.record_eviction(MemoryTier::Device, e.bytes);
    dense_.device_cache.evictions += 1;
    dense_.device_cache.evicted_bytes += e.bytes;
  }
}

void ResidencyExecutor::evict_host(const std::vector<residency::Eviction>& ev) {
  for (const auto& e : ev) {
    const int u = unit_index(e.id);
    if (u < 0) continue;
    bool unused = false;
    {
      std::lock_guard<std::mutex> lock(host_mu_);
      host_[static_cast<std::size_t>(u)].reset();
      unused = prefetched_unused_[static_cast<std::size_t>(u)];
      prefetched_unused_[static_cast<std::size_t>(u)] = false;
    }
    if (unused && worker_) worker_->note_evicted_before_use();
    if (worker_) worker_->discard_completed(e.id);
    std::lock_guard<std::mutex> lock(report_mu_);
    report_.record_eviction(MemoryTier::Host, e.bytes);
    dense_.host_cache.evictions += 1;
    dense_.host_cache.evicted_bytes += e.bytes;
  }
}

void ResidencyExecutor::trim_device(int from, int to) {
  std::set<std::string> keep{kStatic};
  for (int j = from; j < to && j < count(); ++j) keep.insert(id(j));
  auto r = ledger_->trim_to(MemoryTier::Device, keep);
  if (!r) throw Error(ErrorKind::Internal, r.error().message());
  evict_device(r.value());
}

std::shared_ptr<const std::vector<Tensor>> ResidencyExecutor::read_host_copy(int u,
                                                                             const std::set<std::string>& protect) {
  const auto& unit = plan_.units()[static_cast<std::size_t>(u)];
  const residency::CopyRequest req{unit.id, unit.host_bytes};
  auto r = ledger_->reserve_copies(std::span(&req, 1), MemoryTier::Host, protect);
  if (!r) throw Error(ErrorKind::OutOfBudget, "host copy of " + unit.id + ": " + r.error().message());
  evict_host(r.value());
  auto leaves = std::make_shared<std::vector<Tensor>>();
  const auto t0 = Clock::now();
  try {
    for (const auto& k : unit.leaves) leaves->push_back(reader_.read(k));
  } catch (...) {
    (void)ledger_->rollback_reserved(unit.id, MemoryTier::Host);
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(report_mu_);
    report_.record_transfer(TransferDirection::DiskToHost, unit.host_bytes, seconds_since(t0));
    dense_.disk_to_host_bytes += unit.host_bytes;
  }
  {
    std::lock_guard<std::mutex> lock(host_mu_);
    host_[static_cast<std::size_t>(u)] = leaves;
  }
  (void)ledger_->publish_reserved(unit.id, MemoryTier::Host, unit.host_bytes);
  return leaves;
}

void ResidencyExecutor::submit_prefetch(int u) {
  {
    std::lock_guard<std::mutex> lock(host_mu_);
    if (host_[static_cast<std::size_t>(u)]) {
      worker_->note_already_resident();
      return;
    }
  }
  if (worker_->contains(id(u))) return;
  // The ledger's host window (the current lookahead) protects what must stay; anything else
  // cached may go to make room for this unit.
  worker_->submit_blocking(id(u), [this, u] {
    read_host_copy(u, {});
    std::lock_guard<std::mutex> lock(host_mu_);
    prefetched_unused_[static_cast<std::size_t>(u)] = true;
  });
}

std::shared_ptr<const std::vector<Tensor>> ResidencyExecutor::host_copy(int u, const std::set<std::string>& protect,
                                                                        bool demand) {
  const auto t0 = Clock::now();
  bool waited = false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    {
      std::lock_guard<std::mutex> lock(host_mu_);
      if (auto h = host_[static_cast<std::size_t>(u)]) {
        prefetched_unused_[static_cast<std::size_t>(u)] = false;
        std::lock_guard<std::mutex> rl(report_mu_);
        if (demand) {
          report_.record_prefetch(MemoryTier::Host, !waited);
          if (waited) report_.record_stall(MemoryTier::Host, seconds_since(t0));
          dense_.host_cache.requests += 1;
          (waited ? dense_.host_cache.misses : dense_.host_cache.hits) += 1;
        }
        return h;
      }
    }
    bool known = false;
    try {
      known = worker_ && worker_->wait(id(u));
    } catch (const std::exception&) {
      // The background read failed (e.g. it ran after the window moved on and found no room):
      // read it here, where a failure is the demander's to see.
      break;
    }
    if (known) {
      waited = true;
      continue;
    }
    break;
  }
  // Not prefetched (or evicted before use): read it now — a stall.
  auto h = read_host_copy(u, protect);
  std::lock_guard<std::mutex> rl(report_mu_);
  report_.record_prefetch(MemoryTier::Host, false);
  report_.record_stall(MemoryTier::Host, seconds_since(t0));
  dense_.host_cache.requests += 1;
  dense_.host_cache.misses += 1;
  return h;
}

void ResidencyExecutor::ensure_device(int u, const std::set<std::string>& window) {
  const auto& unit = plan_.units()[static_cast<std::size_t>(u)];
  {
    std::lock_guard<std::mutex> lock(report_mu_);
    dense_.device_cache.requests += 1;
    if (device_[static_cast<std::size_t>(u)]) {
      dense_.device_cache.hits += 1;
      return;
    }
    dense_.device_cache.misses += 1;
  }
  std::set<std::string> protect = window;
  protect.insert(kStatic);
  const residency::CopyRequest req{unit.id, unit.device_bytes};
  auto r = ledger_->reserve_copies(std::span(&req, 1), MemoryTier::Device, protect);
  if (!r) throw Error(ErrorKind::OutOfBudget, "device copy of " + unit.id + ": " + r.error().message());
  evict_device(r.value());
  UnitCopy copy;
  try {
    std::shared_ptr<const std::vector<Tensor>> leaves;
    TransferDirection dir = TransferDirection::HostToDevice;
    if (mode_ == ExecutionResidency::LayerwiseHost) {
      // Views of the host store (a channel slice is cut for the build and dropped after it).
      auto view = std::make_shared<std::vector<Tensor>>();
      for (const auto& k : unit.leaves) view->push_back(eager_->leaf(k));
      leaves = std::move(view);
    } else if (lookahead_ > 0) {
      leaves = host_copy(u, {}, true);
      (void)ledger_->pin(unit.id, MemoryTier::Host);  // not evicted while it is packed
    } else {
      // Direct: read into a staging buffer, pack, drop it. No host copy exists.
      auto staging = std::make_shared<std::vector<Tensor>>();
      for (const auto& k : unit.leaves) staging->push_back(reader_.read(k));
      raise_to(peak_staging_bytes_, unit.host_bytes);
      leaves = std::move(staging);
      dir = TransferDirection::DiskToDevice;
    }
    auto leaf = [&](const graph::LeafKey& key) -> Tensor {
      for (std::size_t k = 0; k < unit.leaves.size(); ++k)
        if (unit.leaves[k] == key) return (*leaves)[k];
      throw Error(ErrorKind::Internal,
                  unit.id + ": leaf " + std::to_string(key.initializer) + " missing from its copy");
    };
    const auto t0 = Clock::now();
    copy = plan_.build_unit(u, leaf);
    if (lookahead_ > 0 && mode_ == ExecutionResidency::DenseDiskStream) ledger_->unpin(unit.id, MemoryTier::Host);
    std::lock_guard<std::mutex> lock(report_mu_);
    report_.record_transfer(dir, dir == TransferDirection::DiskToDevice ? unit.host_bytes : copy.bytes,
                            seconds_since(t0));
    if (dir == TransferDirection::DiskToDevice)
      dense_.disk_to_device_bytes += unit.host_bytes;
    else
      dense_.host_to_device_bytes += copy.bytes;
  } catch (...) {
    if (lookahead_ > 0 && mode_ == ExecutionResidency::DenseDiskStream) ledger_->unpin(unit.id, MemoryTier::Host);
    (void)ledger_->rollback_reserved(unit.id, MemoryTier::Device);
    throw;
  }
  auto p = ledger_->publish_reserved(unit.id, MemoryTier::Device, copy.bytes);
  if (!p) throw Error(ErrorKind::Internal, unit.id + ": " + p.error().message());
  device_[static_cast<std::size_t>(u)] = std::move(copy);
  std::uint64_t resident = 0;
  for (const auto& d : device_) resident += d ? 1 : 0;
  raise_to(peak_device_units_, resident);
}

void ResidencyExecutor::begin_forward() {
  ledger_->reset_peaks();
}

const UnitCopy& ResidencyExecutor::acquire(int u) {
  const int end = std::min(count(), u + static_cast<int>(depth_));
  std::set<std::string> window;
  for (int j = u; j < end; ++j) window.insert(id(j));
  if (mode_ == ExecutionResidency::DenseDiskStream) {
    if (lookahead_ > 0) {
      std::set<std::string> hw;
      for (int j = u; j < u + static_cast<int>(lookahead_) && j < count(); ++j) hw.insert(id(j));
      (void)ledger_->set_group_window(kHostWindow, hw, MemoryTier::Host);
      for (int j = u; j < u + static_cast<int>(lookahead_) && j < count(); ++j) submit_prefetch(j);
    }
    (void)ledger_->set_group_window(kDeviceWindow, window, MemoryTier::Device);
  }
  // Copies outside the window go first, so at most `depth` units are ever on the device.
  trim_device(u, end);
  if (mode_ == ExecutionResidency::LayerwiseHost) {
    for (int j = u; j < end; ++j) ensure_device(j, window);
  } else {
    ensure_device(u, window);  // the next unit is built when it is current: a CPU has no copy engine
  }
  auto pr = ledger_->pin(id(u), MemoryTier::Device);
  if (!pr) throw Error(ErrorKind::Internal, pr.error().message());
  pinned_.push_back(u);
  return *device_[static_cast<std::size_t>(u)];
}

void ResidencyExecutor::complete(int u) {
  ledger_->unpin(id(u), MemoryTier::Device);
  std::erase(pinned_, u);
}

void ResidencyExecutor::finish_forward(bool ok) {
  for (int u : pinned_) ledger_->unpin(id(u), MemoryTier::Device);
  pinned_.clear();
  if (!ok && worker_) worker_->cancel_all();
  trim_device(0, 0);
  ledger_->clear_group_window(kHostWindow);
  ledger_->clear_group_window(kDeviceWindow);
  if (ok) {
    ++forwards_;
    std::lock_guard<std::mutex> lock(report_mu_);
    dense_.forwards += 1;
    if (sample_process_memory(policy_)) report_.sample_process();
    if (sample_backend_memory(policy_)) {
      residency::AllocatorMemoryMetrics m;
      const auto st = memory_counters();
      m.active = static_cast<std::uint64_t>(st.current[static_cast<std::size_t>(MemCategory::Weights)]);
      m.peak = static_cast<std::uint64_t>(st.peak[static_cast<std::size_t>(MemCategory::Weights)]);
      report_.allocator = m;
    }
  }
}

std::uint64_t ResidencyExecutor::forward_weight_bytes() const {
  std::uint64_t largest = 0, total = 0, largest_sliced = 0, largest_derived = 0;
  for (const auto& u : plan_.units()) {
    largest = std::max(largest, u.host_bytes);
    largest_derived = std::max(largest_derived, u.derived_bytes);
    total += u.host_bytes;
    const bool sliced = std::any_of(u.leaves.begin(), u.leaves.end(), [](const auto& k) { return k.channels >= 0; });
    if (sliced) largest_sliced = std::max(largest_sliced, u.host_bytes);
  }
  // The device window, plus one derived copy (a BN-folded weight) while a unit is built, and
  // what its kernel derives while packing (Winograd's transformed weights: 64/27 of the unit's).
  std::uint64_t b = max_window_bytes_ + largest + largest_derived;
  // Under LayerwiseHost a unit's leaves are views of the host store, except channel slices (the
  // per-input convs of a split concat read part of a weight): those are cut as copies for the
  // build (ensure_device), so one is held beside the derived copy and the packed one. Uncounted,
  // the test U-Net's BN-folded 512->256 conv, split in two parts of 13.5 MiB, ran 13.5 MiB above
  // its prediction at every window depth. (Where a sliced unit derives nothing, this counts one
  // slice more than is held: the cheaper error.)
  if (mode_ == ExecutionResidency::LayerwiseHost) b += largest_sliced;
  if (mode_ == ExecutionResidency::DenseDiskStream) {
    if (lookahead_ > 0) {
      b += std::min(ledger_->budget(MemoryTier::Host).value_or(total), total);  // the host cache
    } else {
      b += largest;  // one staging read
    }
  }
  return b;
}

std::uint64_t ResidencyExecutor::peak_host_bytes() const {
  return ledger_->peak_resident_bytes(MemoryTier::Host);
}
std::uint64_t ResidencyExecutor::peak_device_bytes() const {
  return ledger_->peak_resident_bytes(MemoryTier::Device);
}
std::uint64_t ResidencyExecutor::host_budget() const {
  return ledger_->budget(MemoryTier::Host).value_or(0);
}
std::uint64_t ResidencyExecutor::device_budget() const {
  return ledger_->budget(MemoryTier::Device).value_or(0);
}

residency::OffloadReport ResidencyExecutor::offload_report() const {
  std::lock_guard<std::mutex> lock(report_mu_);
  residency::OffloadReport r = report_;
  for (std::size_t t = 0; t < 2; ++t) {
    const auto tier = static_cast<MemoryTier>(t);
    r.resident_bytes[t] = ledger_->resident_bytes(tier);
    r.peak_resident_bytes[t] = ledger_->peak_resident_bytes(tier);
    r.resident_units[t] = ledger_->resident_units(tier);
    r.peak_resident_units[t] = ledger_->peak_resident_units(tier);
  }
  return r;
}

std::string ResidencyExecutor::report_json(int indent) const {
  nlohmann::json j;
  j["policy"] = nlohmann::json::parse(to_json(policy_));
  j["execution_residency"] = to_string(mode_);
  j["units"] = count();
  j["device_window_units"] = depth_;
  j["host_lookahead_units"] = lookahead_;
  j["static_device_bytes"] = static_bytes_;
  j["largest_device_window_bytes"] = max_window_bytes_;
  j["host_required_bytes"] = max_host_window_bytes_;
  j["peak_device_units"] = peak_device_units_.load();
  j["peak_staging_bytes"] = peak_staging_bytes_.load();
  j["forwards"] = forwards_.load();
  nlohmann::json units = nlohmann::json::array();
  // Per unit (UnitResidencyReport, residency.md §8): planned placement and the current state of
  // its copies in each tier.
  for (const auto& u : plan_.units()) {
    nlohmann::json ju{{"id", u.id}, {"host_bytes", u.host_bytes}, {"device_bytes", u.device_bytes}};
    if (const auto* spec = ledger_->plan().find(u.id)) {
      ju["planned_tier"] = to_string(spec->tier());
      ju["policy"] = to_string(spec->policy());
    }
    for (const auto tier : {MemoryTier::Host, MemoryTier::Device}) {
      const auto c = ledger_->copy(u.id, tier);
      const std::string t = to_string(tier);
      ju[t + "_resident"] = c && c->state == residency::CopyState::Resident;
      ju[t + "_allocated_bytes"] = c ? c->bytes : 0;
      ju[t + "_pins"] = c ? c->pins : 0;
    }
    units.push_back(std::move(ju));
  }
  j["unit_list"] = units;
  j["offload"] = nlohmann::json::parse(offload_report().to_json());
  {
    std::lock_guard<std::mutex> lock(report_mu_);
    j["dense"] = {{"forwards", dense_.forwards},
                  {"disk_to_host_bytes", dense_.disk_to_host_bytes},
                  {"disk_to_device_bytes", dense_.disk_to_device_bytes},
                  {"host_to_device_bytes", dense_.host_to_device_bytes},
                  {"host_cache",
                   {{"requests", dense_.host_cache.requests},
                    {"hits", dense_.host_cache.hits},
                    {"misses", dense_.host_cache.misses},
                    {"evictions", dense_.host_cache.evictions},
                    {"evicted_bytes", dense_.host_cache.evicted_bytes}}},
                  {"device_cache",
                   {{"requests", dense_.device_cache.requests},
                    {"hits", dense_.device_cache.hits},
                    {"misses", dense_.device_cache.misses},
                    {"evictions", dense_.device_cache.evictions},
                    {"evicted_bytes", dense_.device_cache.evicted_bytes}}}};
  }
  if (worker_) j["background"] = nlohmann::json::parse(worker_->report().to_json());
  j["weight_store"] = nlohmann::json::parse(reader_.diagnostics().to_json());
  return j.dump(indent);
}

}  // namespace qsmcore
