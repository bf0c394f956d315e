#include "spill/transfers.h"

#include <chrono>

#include "qsmcore/error.h"
#include "spill/direct_operand.h"

namespace qsmcore {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
// Enough for every transfer of a step of a batch without blocking the runner.
constexpr std::size_t kQueue = 256;
}  // namespace

SpillTransfers::SpillTransfers(const ArenaLayout& layout, std::size_t sets, const residency::SpillFile& file)
    : layout_(layout), file_(file), worker_(kQueue), stream_worker_(kQueue) {
  QSM_ASSERT(file.bytes() >= layout.file_bytes * sets, "a spill file smaller than its layout");
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
  settle_operands();
  if (pending_.empty()) return;
  const auto t0 = Clock::now();
  std::vector<std::string> keys;
  keys.swap(pending_);
  for (const auto& k : keys) worker_.wait(k);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.wait_seconds += since(t0);
}

// A streamed operand: its buffer's region of the file for one set. Kernels read and write it a
// slab at a time, in order, so the file overlaps their compute: after a read, the next slab is
// read ahead into the page cache; a write is written back while the next slab computes and
// settled (waited for, dropped) at the next write or when the step ends. At most one slab each
// way is in the page cache at a time.
class SpillTransfers::FileOperand final : public kernels::StreamedOperand {
 public:
  FileOperand(const SpillTransfers& io, std::uint64_t base, std::size_t size) : io_(io), base_(base), size_(size) {}
  ~FileOperand() override {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      settle_written();
      forget_ahead();
    } catch (...) {  // dropping pages is best effort; the data is in the file either way
    }
  }
  void read(void* dst, std::size_t offset, std::size_t bytes) const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ahead_.bytes > 0 && ahead_.offset != offset) forget_ahead();
    ahead_ = {};
    io_.stream_io(false, nullptr, dst, bytes, base_ + offset);
    const std::size_t next = offset + bytes;
    if (bytes > 0 && next < size_) {
      ahead_ = {next, std::min(bytes, size_ - next)};
      io_.file_.read_ahead(ahead_.bytes, base_ + ahead_.offset);
    }
  }
  void write(const void* src, std::size_t offset, std::size_t bytes) const override {
    std::lock_guard<std::mutex> lock(mu_);
    io_.stream_io(true, src, nullptr, bytes, base_ + offset);
    settle_written();
    written_ = {offset, bytes};
  }

 private:
  struct Range {
    std::size_t offset = 0, bytes = 0;
  };
  void settle_written() const {
    if (written_.bytes > 0) io_.timed([&] { io_.file_.settle(written_.bytes, base_ + written_.offset); });
    written_ = {};
  }
  void forget_ahead() const {
    if (ahead_.bytes > 0) io_.file_.forget(ahead_.bytes, base_ + ahead_.offset);
    ahead_ = {};
  }

  const SpillTransfers& io_;
  std::uint64_t base_;
  std::size_t size_;
  mutable std::mutex mu_;
  mutable Range written_, ahead_;
};

void SpillTransfers::stream_io(bool write, const void* src, void* dst, std::size_t bytes, std::uint64_t at) const {
  timed([&] {
    if (write)
      file_.write_behind(src, bytes, at);
    else
      file_.read(dst, bytes, at);
  });
  std::lock_guard<std::mutex> lock(mu_);
  (write ? stats_.written : stats_.read) += bytes;
}

void SpillTransfers::timed(const std::function<void()>& io) const {
  const auto t0 = Clock::now();
  io();
  const double s = since(t0);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.io_seconds += s;
  stats_.wait_seconds += s;
}

// The bound operands settle their last writes through file_ and mu_: before those go.
SpillTransfers::~SpillTransfers() {
  direct_.clear();
  operands_.clear();
}

void SpillTransfers::bind(std::size_t step, std::size_t set, const ArenaPieces& arena, std::size_t n_in,
                          std::size_t n_out, kernels::ExecContext& ctx) {
  ctx.streamed_in.clear();
  ctx.streamed_out.clear();
  settle_operands();
  direct_.clear();
  operands_.clear();
  const auto& list = layout_.streamed[step];
  if (list.empty()) return;
  ctx.streamed_in.assign(n_in, nullptr);
  ctx.streamed_out.assign(n_out, nullptr);
  for (const auto& s : list) {
    const std::uint64_t base = s.file_offset + layout_.file_bytes * set;
    std::unique_ptr<kernels::StreamedOperand> op;
    if (file_.direct() && s.io_bytes > 0) {
      auto d = std::make_unique<DirectOperand>(*this, base, s.operand_bytes, arena.at(s.io_offset), s.io_bytes);
      direct_.push_back(d.get());
      op = std::move(d);
    } else {
      op = std::make_unique<FileOperand>(*this, base, s.operand_bytes);
    }
    op->staging = s.staging_bytes > 0 ? arena.at(s.staging_offset) : nullptr;
    op->staging_bytes = s.staging_bytes;
    (s.output ? ctx.streamed_out : ctx.streamed_in)[s.slot] = op.get();
    operands_.push_back(std::move(op));
  }
}

// Direct operands hold written bytes and transfers in flight until settled; page-cache ones
// settle as they go (their last write-back is waited for when they are dropped).
void SpillTransfers::settle_operands() {
  for (const DirectOperand* d : direct_) d->settle();
}

SpillStats SpillTransfers::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace qsmcore
