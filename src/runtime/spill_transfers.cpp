#include "runtime/spill_transfers.h"

#include <chrono>

namespace qsmcore {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
// Enough for every transfer of a step of a batch without blocking the runner.
constexpr std::size_t kQueue = 256;
}  // namespace

SpillTransfers::SpillTransfers(const ArenaLayout& layout, std::size_t sets, const std::string& dir)
    : layout_(layout), file_(dir, layout.file_bytes * sets), worker_(kQueue) {
  stats_.file_bytes = layout.file_bytes * sets;
  stats_.dir = file_.dir();
}

void SpillTransfers::start(std::size_t step, ArenaLayout::When when, const std::vector<const ArenaPieces*>& arenas) {
  const auto& list = layout_.transfers[step];
  for (std::size_t set = 0; set < arenas.size(); ++set) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const ArenaLayout::Transfer t = list[i];
      if (t.when != when) continue;
      std::byte* at = arenas[set]->at(t.arena_offset);
      const std::uint64_t file_at = t.file_offset + layout_.file_bytes * set;
      std::string key = std::to_string(step) + ":" + std::to_string(set) + ":" + std::to_string(i);
      worker_.submit_blocking(key, [this, t, at, file_at] {
        const auto t0 = Clock::now();
        if (t.write)
          file_.write(at, t.bytes, file_at);
        else
          file_.read(at, t.bytes, file_at);
        const double s = since(t0);
        std::lock_guard<std::mutex> lock(mu_);
        stats_.io_seconds += s;
        (t.write ? stats_.written : stats_.read) += t.bytes;
      });
      pending_.push_back(std::move(key));
    }
  }
}

void SpillTransfers::finish() {
  if (pending_.empty()) return;
  const auto t0 = Clock::now();
  std::vector<std::string> keys;
  keys.swap(pending_);
  for (const auto& k : keys) worker_.wait(k);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.wait_seconds += since(t0);
}

SpillReport SpillTransfers::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace qsmcore
