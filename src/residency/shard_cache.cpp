#include "residency/shard_cache.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace qsmcore::residency {

std::string ShardCacheError::message() const {
  if (kind == Kind::InvalidShardCacheLimit) return "the shard cache limit must be at least 1 open shard";
  return "cannot open shard '" + path + "': all " + std::to_string(maximum) + " cached shards are leased (" +
         std::to_string(leased) + " leased)";
}

std::string WeightStoreDiagnostics::to_json(int indent) const {
  nlohmann::ordered_json j{{"backend", backend},
                           {"cache_hits", cache_hits},
                           {"cache_misses", cache_misses},
                           {"evictions", evictions},
                           {"currently_cached_shards", currently_cached_shards},
                           {"touched_shard_paths", touched_shard_paths},
                           {"physical_reads", physical_reads},
                           {"physical_read_bytes", physical_read_bytes}};
  return j.dump(indent);
}

ShardLease::ShardLease(ShardLease&& o) noexcept
    : state_(std::move(o.state_)), path_(std::move(o.path_)), source_(std::move(o.source_)) {}

ShardLease& ShardLease::operator=(ShardLease&& o) noexcept {
  if (this != &o) {
    release();
    state_ = std::move(o.state_);
    path_ = std::move(o.path_);
    source_ = std::move(o.source_);
  }
  return *this;
}

ShardLease::~ShardLease() {
  release();
}

void ShardLease::release() noexcept {
  if (state_) ShardCache::release(*static_cast<ShardCache::State*>(state_.get()), path_);
  state_.reset();
  source_.reset();
}

void ShardCache::release(State& s, const std::string& path) noexcept {
  std::lock_guard lock(s.m);
  auto it = s.entries.find(path);
  if (it != s.entries.end() && it->second.leases != 0) --it->second.leases;
}

ShardCache::ShardCache(std::size_t max_cached_shards, Opener open) : state_(std::make_shared<State>()) {
  if (auto v = validate_limit(max_cached_shards); !v) throw Error(ErrorKind::InvalidInput, v.error().message());
  state_->max = max_cached_shards;
  state_->open = std::move(open);
}

Status<ShardCacheError> ShardCache::validate_limit(std::size_t max_cached_shards) {
  if (max_cached_shards == 0) return ShardCacheError{.kind = ShardCacheError::Kind::InvalidShardCacheLimit};
  return std::monostate{};
}

Result<ShardLease, ShardCacheError> ShardCache::lease(const std::string& path) {
  State& s = *state_;
  std::lock_guard lock(s.m);
  auto it = s.entries.find(path);
  if (it != s.entries.end()) {
    ++s.diag.cache_hits;
  } else {
    ++s.diag.cache_misses;
    // Pick the victim before opening, but close it only once the open succeeded.
    auto victim = s.entries.end();
    if (s.entries.size() >= s.max) {
      std::size_t leased = 0;
      for (auto e = s.entries.begin(); e != s.entries.end(); ++e) {
        if (e->second.leases != 0) {
          ++leased;
        } else if (victim == s.entries.end() || e->second.last_use < victim->second.last_use) {
          victim = e;
        }
      }
      if (victim == s.entries.end()) {
        return ShardCacheError{
            .kind = ShardCacheError::Kind::CapacityExhausted, .maximum = s.max, .leased = leased, .path = path};
      }
    }
    std::shared_ptr<io::ByteSource> source = s.open(path);  // may throw: nothing changed yet
    if (!source) throw Error(ErrorKind::Internal, "shard opener returned no source for " + path);
    if (victim != s.entries.end()) {
      s.entries.erase(victim);
      ++s.diag.evictions;
    }
    it = s.entries.emplace(path, Entry{std::move(source), 0, 0}).first;
  }
  it->second.last_use = ++s.tick;
  ++it->second.leases;
  s.touched.insert(path);
  ShardLease lease;
  lease.state_ = state_;
  lease.path_ = path;
  lease.source_ = it->second.source;
  return lease;
}

void ShardCache::read(const std::string& path, std::uint64_t offset, std::size_t length, void* dst) {
  auto lease = this->lease(path);
  if (!lease) throw Error(ErrorKind::OutOfBudget, lease.error().message());
  lease.value().source().read(offset, length, dst);  // outside the lock: reads run in parallel
  std::lock_guard lock(state_->m);
  ++state_->diag.physical_reads;
  state_->diag.physical_read_bytes += length;
}

std::size_t ShardCache::max_cached_shards() const {
  return state_->max;
}

std::vector<std::string> ShardCache::cached_paths() const {
  std::lock_guard lock(state_->m);
  std::vector<std::pair<std::uint64_t, std::string>> order;
  for (const auto& [p, e] : state_->entries) order.emplace_back(e.last_use, p);
  std::sort(order.begin(), order.end());
  std::vector<std::string> out;
  for (auto& [t, p] : order) out.push_back(std::move(p));
  return out;
}

WeightStoreDiagnostics ShardCache::diagnostics() const {
  std::lock_guard lock(state_->m);
  WeightStoreDiagnostics d = state_->diag;
  d.currently_cached_shards = state_->entries.size();
  d.touched_shard_paths.assign(state_->touched.begin(), state_->touched.end());
  return d;
}

}  // namespace qsmcore::residency
