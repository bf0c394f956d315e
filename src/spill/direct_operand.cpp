#include "spill/direct_operand.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "qsmcore/error.h"

namespace qsmcore {
namespace {
using Clock = std::chrono::steady_clock;
constexpr std::size_t kBlock = residency::SpillFile::kBlock;
std::size_t block_floor(std::size_t n) {
  return n / kBlock * kBlock;
}
std::size_t block_ceil(std::size_t n) {
  return (n + kBlock - 1) / kBlock * kBlock;
}
}  // namespace

SpillTransfers::DirectOperand::DirectOperand(const SpillTransfers& io, std::uint64_t base, std::size_t size,
                                             std::byte* io_block, std::size_t io_bytes)
    : io_(io), base_(base), size_(size) {
  const auto addr = reinterpret_cast<std::uintptr_t>(io_block);
  const std::size_t skip = block_ceil(addr) - addr;
  // An operand without staging (an addend read into the kernel's own planes) gets one block,
  // and reads through the page cache; one with staging has at least two.
  QSM_ASSERT(io_bytes >= skip + kBlock, "a streamed operand's io block is smaller than a block");
  buf_ = io_block + skip;
  cap_ = block_floor(io_bytes - skip);
}

SpillTransfers::DirectOperand::~DirectOperand() {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    wait_pending();
  } catch (...) {  // settle() reported it already, or the run is failing for another reason
  }
}

// What the worker does is I/O already counted; the runner waiting for it is a wait.
void SpillTransfers::DirectOperand::wait_pending() const {
  if (pending_.empty()) return;
  std::string key;
  key.swap(pending_);
  const auto t0 = Clock::now();
  io_.stream_worker_.wait(key);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(io_.mu_);
  io_.stats_.wait_seconds += s;
}

// One transfer of whole blocks between buf_ and the operand's region, on the stream worker.
void SpillTransfers::DirectOperand::submit(bool write, std::uint64_t block, std::size_t bytes) const {
  pending_ = "d" + std::to_string(io_.next_key_++);
  const residency::SpillFile& file = io_.file_;
  std::byte* buf = buf_;
  const std::uint64_t at = base_ + block;
  const SpillTransfers* owner = &io_;
  io_.stream_worker_.submit_blocking(pending_, [owner, &file, buf, at, bytes, write] {
    const auto t0 = Clock::now();
    if (write)
      file.write_direct(buf, bytes, at);
    else
      file.read_direct(buf, bytes, at);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(owner->mu_);
    owner->stats_.io_seconds += s;
  });
}

void SpillTransfers::DirectOperand::read(void* dst, std::size_t offset, std::size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes == 0) return;
  wait_pending();
  bool direct = true;
  if (ahead_ > 0 && offset >= ahead_at_ && offset + bytes <= ahead_at_ + ahead_)
    std::memcpy(dst, buf_ + (offset - ahead_at_), bytes);
  else
    direct = read_now(dst, offset, bytes);
  ahead_ = 0;
  {
    std::lock_guard<std::mutex> s(io_.mu_);
    io_.stats_.read += bytes;
    if (direct) io_.stats_.direct += bytes;
  }
  read_ahead_after(offset, bytes);
}

bool SpillTransfers::DirectOperand::read_now(void* dst, std::size_t offset, std::size_t bytes) const {
  const std::size_t first = block_floor(offset), end = block_ceil(offset + bytes);
  if (end - first <= cap_) {
    io_.timed([&] { io_.file_.read_direct(buf_, end - first, base_ + first); });
    std::memcpy(dst, buf_ + (offset - first), bytes);
    return true;
  }
  io_.timed([&] { io_.file_.read(dst, bytes, base_ + offset); });
  return false;
}

// The next slab continues where this one ended, or, when this one did not start where the last
// ended (a halo overlaps them), starts as far past this one as this one started past the last.
void SpillTransfers::DirectOperand::read_ahead_after(std::size_t offset, std::size_t bytes) const {
  std::size_t next = offset + bytes;
  if (read_before_ && offset != last_end_ && offset > last_read_) next = offset + (offset - last_read_);
  last_read_ = offset;
  last_end_ = offset + bytes;
  read_before_ = true;
  if (next >= size_) return;
  const std::size_t want = std::min(bytes, size_ - next);
  const std::size_t first = block_floor(next), end = block_ceil(next + want);
  if (end - first > cap_) return;
  submit(false, first, end - first);
  ahead_at_ = first;
  ahead_ = end - first;
}

void SpillTransfers::DirectOperand::write(const void* src, std::size_t offset, std::size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes == 0) return;
  wait_pending();
  const std::size_t first = block_floor(offset);
  const bool direct = offset - first + bytes <= cap_;
  {
    std::lock_guard<std::mutex> s(io_.mu_);
    io_.stats_.written += bytes;
    if (direct) io_.stats_.direct += bytes;
  }
  if (!direct) {
    // Larger than the io block (kernels write from staging, which is not): through the page
    // cache, which is coherent with direct I/O on the same file.
    flush_carry();
    io_.timed([&] { io_.file_.write(src, bytes, base_ + offset); });
    return;
  }
  if (carry_ > 0 && carry_block_ == first && carry_block_ + carry_ == offset) {
    if (carry_at_ > 0) std::memmove(buf_, buf_ + carry_at_, carry_);
  } else {
    flush_carry();
    if (offset > first) rmw_block(first);
  }
  std::memcpy(buf_ + (offset - first), src, bytes);
  const std::size_t end = offset + bytes;
  // The operand's last bytes: their block goes out whole (the rest of it is the region's padding).
  const std::size_t whole = end >= size_ ? block_ceil(end) - first : block_floor(end) - first;
  carry_ = end >= size_ ? 0 : end - (first + whole);
  carry_block_ = first + whole;
  carry_at_ = whole;
  if (whole > 0) submit(true, first, whole);
}

// The block `block` as the file holds it, into buf_ (a slab starting inside it is copied over).
void SpillTransfers::DirectOperand::rmw_block(std::size_t block) const {
  io_.timed([&] { io_.file_.read_direct(buf_, kBlock, base_ + block); });
}

void SpillTransfers::DirectOperand::flush_carry() const {
  if (carry_ == 0) return;
  wait_pending();
  QSM_ASSERT(cap_ >= 2 * kBlock, "a written operand's io block is smaller than two blocks");
  // Completed by what the file holds after it (bytes written earlier out of order, or padding).
  std::byte* tail = buf_ + kBlock;
  std::memmove(tail, buf_ + carry_at_, carry_);
  rmw_block(carry_block_);
  std::memcpy(buf_, tail, carry_);
  io_.timed([&] { io_.file_.write_direct(buf_, kBlock, base_ + carry_block_); });
  carry_ = 0;
}

void SpillTransfers::DirectOperand::settle() const {
  std::lock_guard<std::mutex> lock(mu_);
  wait_pending();
  ahead_ = 0;
  flush_carry();
}

}  // namespace qsmcore
