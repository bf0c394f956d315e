// Parking (parking.h).
#include "spill/parking.h"

#include <algorithm>
#include <exception>

#include "qsmcore/error.h"
#include "spill/file.h"

namespace qsmcore::networks {

Parking::Parking(std::string dir) : dir_(std::move(dir)) {}

Parking::~Parking() {
  if (!parked_) return;
  try {
    unpark();
  } catch (const std::exception&) {  // the run is failing already; its error is the one to see
  }
}

void Parking::add(const Buffer& b) {
  QSM_ASSERT(!parked_, "a block added to parked buffers");
  const bool known = std::any_of(blocks_.begin(), blocks_.end(), [&](const Block& k) { return k.buffer == &b; });
  if (b.parkable() && !known) blocks_.push_back({&b});
}

void Parking::remove(const Buffer& b) noexcept {
  const auto it = std::find_if(blocks_.begin(), blocks_.end(), [&](const Block& k) { return k.buffer == &b; });
  if (it == blocks_.end()) return;
  if (it->away) it->buffer->forget_parked();  // freed next: counted in again for its free, not read
  blocks_.erase(it);
  if (std::none_of(blocks_.begin(), blocks_.end(), [](const Block& k) { return k.away; })) parked_ = false;
}

std::int64_t Parking::bytes() const {
  std::int64_t n = 0;
  for (const Block& b : blocks_) n += static_cast<std::int64_t>(b.buffer->size());
  return n;
}

void Parking::park() {
  if (parked_ || blocks_.empty()) return;
  std::uint64_t span = 0;
  for (const Block& b : blocks_) span += b.buffer->page_span();
  // One file for the lot, kept for the next park (a file's blocks are trimmed when freed).
  if (!file_ || file_->bytes() < span) {
    file_.reset();
    file_ = std::make_unique<residency::SpillFile>(dir_, span, "parked buffers");
  }
  // Whole pages of blocks mapped on their own: aligned for direct I/O, which leaves no page
  // cache behind to be charged to the process.
  direct_ = file_->direct() && span % residency::SpillFile::kBlock == 0;
  std::uint64_t at = 0;
  try {
    for (Block& b : blocks_) {
      b.at = at;
      if (direct_)
        file_->write_direct(b.buffer->data(), b.buffer->page_span(), at);
      else
        file_->write(b.buffer->data(), b.buffer->size(), at);
      b.buffer->park_pages();
      b.away = true;
      at += b.buffer->page_span();
    }
  } catch (...) {  // a full disk: what was parked comes back, and the run fails as it would have
    try {
      read_back();
    } catch (...) {    // NOLINT(bugprone-empty-catch): the write's error is the one to see
      parked_ = true;  // what is still away comes back on the next unpark, or the destructor's
    }
    throw;
  }
  parked_ = true;
  written_ += static_cast<std::int64_t>(span);
}

void Parking::release_file() {
  if (!parked_ && file_) residency::SpillFile::free_in_background(std::move(file_));
}

void Parking::unpark() {
  if (!parked_) return;
  read_back();
  parked_ = false;
}

void Parking::forget() {
  if (!parked_) return;
  for (Block& b : blocks_)
    if (b.away) {
      b.buffer->forget_parked();
      b.away = false;
    }
  parked_ = false;
}

// Each block at the place it was written: a read-back that threw (the memory cap, a failed
// read) can be retried, and blocks removed meanwhile leave the others' places as they were.
void Parking::read_back() {
  for (Block& b : blocks_) {
    if (!b.away) continue;
    b.buffer->unpark_pages();
    try {
      if (direct_)
        file_->read_direct(b.buffer->data(), b.buffer->page_span(), b.at);
      else
        file_->read(b.buffer->data(), b.buffer->size(), b.at);
    } catch (...) {
      b.buffer->park_pages();  // not counted until its bytes are back
      throw;
    }
    b.away = false;
  }
}

}  // namespace qsmcore::networks
