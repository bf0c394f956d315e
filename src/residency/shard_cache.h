// The weight store's shard cache (residency.md §7): bounds how many payload sources (the
// .onnx file, each external-data file) are open at once. It bounds a COUNT, not bytes: a source
// reads by pread and holds no payload. Least recently used unleased shards are closed first; a
// shard leased by an in-flight read is never closed under it.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "io/byte_source.h"
#include "qsmcore/residency.h"

namespace qsmcore::residency {

struct ShardCacheError {
  enum class Kind { InvalidShardCacheLimit, CapacityExhausted };
  Kind kind = Kind::CapacityExhausted;
  std::size_t maximum = 0;  // CapacityExhausted: the bound
  std::size_t leased = 0;   // CapacityExhausted: shards leased at the bound
  std::string path{};       // CapacityExhausted: the shard that could not be opened
  std::string message() const;
  bool operator==(const ShardCacheError&) const = default;
};

struct WeightStoreDiagnostics {
  std::string backend = "pread";
  std::uint64_t cache_hits = 0, cache_misses = 0, evictions = 0;
  std::uint64_t currently_cached_shards = 0;
  std::vector<std::string> touched_shard_paths{};  // sorted, every path ever leased
  std::uint64_t physical_reads = 0, physical_read_bytes = 0;
  std::string to_json(int indent = -1) const;
  bool operator==(const WeightStoreDiagnostics&) const = default;
};

class ShardCache;

/// Holds one shard open (RAII). Safe to outlive the cache that issued it.
class ShardLease {
 public:
  ShardLease() = default;
  ShardLease(ShardLease&& o) noexcept;
  ShardLease& operator=(ShardLease&& o) noexcept;
  ShardLease(const ShardLease&) = delete;
  ShardLease& operator=(const ShardLease&) = delete;
  ~ShardLease();

  const io::ByteSource& source() const { return *source_; }
  const std::string& path() const { return path_; }
  explicit operator bool() const { return source_ != nullptr; }

 private:
  friend class ShardCache;
  void release() noexcept;
  std::shared_ptr<void> state_;  // ShardCache's shared state (type-erased to keep it private)
  std::string path_{};
  std::shared_ptr<io::ByteSource> source_;
};

class ShardCache {
 public:
  using Opener = std::function<std::shared_ptr<io::ByteSource>(const std::string& path)>;

  /// `max_cached_shards` ≥ 1, else Error{InvalidInput} (InvalidShardCacheLimit).
  explicit ShardCache(std::size_t max_cached_shards, Opener open = io::open_file_source);
  /// The same check as a value, for callers validating a policy before building anything.
  static Status<ShardCacheError> validate_limit(std::size_t max_cached_shards);

  /// Leases `path`, opening it on a miss (closing the least recently used unleased shard when at
  /// the bound). CapacityExhausted when every cached shard is leased. Errors of the opener
  /// (Error{Io}) propagate unchanged and leave the cache as it was.
  Result<ShardLease, ShardCacheError> lease(const std::string& path);
  /// Leases `path` and reads [offset, offset+length) into dst, counting a physical read.
  /// CapacityExhausted throws Error{OutOfBudget}.
  void read(const std::string& path, std::uint64_t offset, std::size_t length, void* dst);

  std::size_t max_cached_shards() const;
  /// Cached shard paths, least recently used first.
  std::vector<std::string> cached_paths() const;
  WeightStoreDiagnostics diagnostics() const;

 private:
  struct Entry {
    std::shared_ptr<io::ByteSource> source;
    std::uint64_t last_use = 0;
    std::size_t leases = 0;
  };
  struct State {
    std::mutex m;
    std::size_t max = 0;
    Opener open;
    std::map<std::string, Entry> entries;
    std::set<std::string> touched;
    std::uint64_t tick = 0;
    WeightStoreDiagnostics diag;
  };
  friend class ShardLease;
  static void release(State& s, const std::string& path) noexcept;
  std::shared_ptr<State> state_;
};

}  // namespace qsmcore::residency
