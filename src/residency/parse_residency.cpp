// --residency text → LayerWeightResidency. Every key is checked against the same rules as the
// typed constructors (OffloadConfig::create, DenseDiskStreamLoadOptions::create), so the CLI can
// never build a policy the library would reject later; a policy that cannot apply is refused,
// never ignored (residency.md §12 "silent no-ops").
#include <charconv>
#include <map>

#include "memory/byte_size.h"
#include "qsmcore/residency.h"

namespace qsmcore {
namespace {

[[noreturn]] void fail(const std::string& text, const std::string& why) {
  throw Error(ErrorKind::InvalidInput,
              "--residency '" + text + "': " + why +
                  " (write full | layerwise[:depth=N,host=BYTES,device=BYTES] | "
                  "stream[:device=BYTES,host=BYTES,lookahead=N,queue=N,evict=lru|lfu,shards=N])");
}

// key=value pairs after the ':'; duplicate keys and pairs without '=' are errors.
std::map<std::string, std::string> parse_pairs(const std::string& text, const std::string& body) {
  std::map<std::string, std::string> pairs;
  std::size_t start = 0;
  while (start <= body.size()) {
    const std::size_t comma = body.find(',', start);
    const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) fail(text, "'" + item + "' is not key=value");
    const std::string key = item.substr(0, eq);
    if (eq + 1 == item.size()) fail(text, "key '" + key + "' has no value");
    if (!pairs.emplace(key, item.substr(eq + 1)).second) fail(text, "key '" + key + "' is given twice");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return pairs;
}

std::size_t parse_count(const std::string& text, const std::string& key, const std::string& value) {
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size())
    fail(text, "key '" + key + "' needs a non-negative integer, got '" + value + "'");
  return n;
}

CacheEvictionPolicy parse_evict(const std::string& text, const std::string& value) {
  if (value == "lru") return CacheEvictionPolicy::LeastRecentlyUsed;
  if (value == "lfu") return CacheEvictionPolicy::LeastFrequentlyUsed;
  fail(text, "key 'evict' must be lru or lfu, got '" + value + "'");
}

std::pair<bool, bool> parse_sample(const std::string& text, const std::string& value) {
  if (value == "none") return {false, false};
  if (value == "backend") return {true, false};
  if (value == "process") return {false, true};
  if (value == "all") return {true, true};
  fail(text, "key 'sample' must be none, backend, process or all, got '" + value + "'");
}

// Takes the value of `key` out of `pairs` (so leftovers are unknown keys).
std::optional<std::string> take(std::map<std::string, std::string>& pairs, const std::string& key) {
  auto it = pairs.find(key);
  if (it == pairs.end()) return std::nullopt;
  std::string v = it->second;
  pairs.erase(it);
  return v;
}

std::uint64_t parse_bytes(const std::string& text, const std::string& key, const std::string& value) {
  try {
    return memory::parse_byte_size(value, "key '" + key + "'");
  } catch (const Error& e) {
    fail(text, e.what());
  }
}

std::size_t parse_shards(const std::string& text, const std::string& value) {
  const std::size_t n = parse_count(text, "shards", value);
  if (n == 0) fail(text, "key 'shards' must be at least 1 (InvalidShardCacheLimit: the shard cache bounds open files)");
  return n;
}

void reject_leftovers(const std::string& text, const std::map<std::string, std::string>& pairs,
                      const std::string& allowed) {
  if (!pairs.empty()) fail(text, "unknown key '" + pairs.begin()->first + "' (allowed: " + allowed + ")");
}

LayerwiseLoadOptions parse_layerwise(const std::string& text, std::map<std::string, std::string> pairs) {
  std::size_t depth = 1;
  std::optional<std::uint64_t> host, device;
  if (auto v = take(pairs, "depth")) depth = parse_count(text, "depth", *v);
  if (auto v = take(pairs, "host")) host = parse_bytes(text, "host", *v);
  if (auto v = take(pairs, "device")) device = parse_bytes(text, "device", *v);
  auto config = OffloadConfig::create(device, host, depth);
  if (!config) fail(text, "key 'depth' must be at least 1 (" + config.error().message() + ")");
  LayerwiseLoadOptions o(config.value());
  if (auto v = take(pairs, "evict")) o.offload = o.offload.with_eviction_policy(parse_evict(text, *v));
  if (auto v = take(pairs, "shards")) o = o.with_max_cached_shards(parse_shards(text, *v));
  if (auto v = take(pairs, "sample")) {
    const auto [backend, process] = parse_sample(text, *v);
    o = o.with_memory_sampling(backend, process);
  }
  reject_leftovers(text, pairs, "depth, host, device, evict, shards, sample");
  return o;
}

DenseDiskStreamLoadOptions parse_stream(const std::string& text, std::map<std::string, std::string> pairs) {
  DenseDiskStreamLoadOptions d;
  if (auto v = take(pairs, "device")) d.device_budget_bytes = parse_bytes(text, "device", *v);
  if (auto v = take(pairs, "host")) d.host_budget_bytes = parse_bytes(text, "host", *v);
  // Host 0 is direct disk → device loading: its lookahead and queue default to 0, not 2.
  std::size_t lookahead = d.host_budget_bytes == 0 ? 0 : d.host_lookahead;
  std::size_t queue = d.host_budget_bytes == 0 ? 0 : d.background_queue_capacity;
  if (auto v = take(pairs, "lookahead")) lookahead = parse_count(text, "lookahead", *v);
  if (auto v = take(pairs, "queue")) queue = parse_count(text, "queue", *v);
  auto created = DenseDiskStreamLoadOptions::create(d.device_budget_bytes, d.host_budget_bytes, lookahead, queue);
  if (!created) {
    using K = WeightResidencyPolicyError::Kind;
    const auto& e = created.error();
    const std::string key = e.kind == K::ZeroHostLookahead   ? "lookahead"
                            : e.kind == K::ZeroQueueCapacity ? "queue"
                                                             : "lookahead/queue";
    fail(text, "key '" + key + "': " + e.message() + " (" + to_string(e.kind) + ")");
  }
  d = created.value();
  if (auto v = take(pairs, "evict")) d = d.with_eviction_policy(parse_evict(text, *v));
  if (auto v = take(pairs, "shards")) d = d.with_max_cached_shards(parse_shards(text, *v));
  if (auto v = take(pairs, "sample")) {
    const auto [backend, process] = parse_sample(text, *v);
    d = d.with_memory_sampling(backend, process);
  }
  reject_leftovers(text, pairs, "device, host, lookahead, queue, evict, shards, sample");
  return d;
}

}  // namespace

LayerWeightResidency parse_residency(const std::string& text) {
  const std::size_t colon = text.find(':');
  const std::string mode = text.substr(0, colon);
  std::map<std::string, std::string> pairs;
  if (colon != std::string::npos) {
    if (colon + 1 == text.size()) fail(text, "nothing after ':'");
    pairs = parse_pairs(text, text.substr(colon + 1));
  }
  if (mode == "full") {
    reject_leftovers(text, pairs, "none: full takes no options");
    return FullyResident{};
  }
  if (mode == "layerwise") return parse_layerwise(text, std::move(pairs));
  if (mode == "stream") return parse_stream(text, std::move(pairs));
  fail(text, "unknown mode '" + mode + "'");
}

}  // namespace qsmcore
