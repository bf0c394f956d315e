// Parking (parking.h).
#include "networks/parking.h"

#include <algorithm>
#include <exception>

#include "qsmcore/error.h"
#include "residency/spill_file.h"

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
  if (b.parkable() && std::find(blocks_.begin(), blocks_.end(), &b) == blocks_.end()) blocks_.push_back(&b);
}

void Parking::remove(const Buffer& b) {
  QSM_ASSERT(!parked_, "a block removed from parked buffers");
  blocks_.erase(std::remove(blocks_.begin(), blocks_.end(), &b), blocks_.end());
}

std::int64_t Parking::bytes() const {
  std::int64_t n = 0;
  for (const Buffer* b : blocks_) n += static_cast<std::int64_t>(b->size());
  return n;
}

void Parking::park() {
  if (parked_ || blocks_.empty()) return;
  std::uint64_t span = 0;
  for (const Buffer* b : blocks_) span += b->page_span();
  // One file for the lot, kept for the next park (a file's blocks are trimmed when freed).
  if (!file_ || file_->bytes() < span) {
    file_.reset();
    file_ = std::make_unique<residency::SpillFile>(dir_, span);
  }
  // Whole pages of blocks mapped on their own: aligned for direct I/O, which leaves no page
  // cache behind to be charged to the process.
  direct_ = file_->direct() && span % residency::SpillFile::kBlock == 0;
  std::uint64_t at = 0;
  std::size_t done = 0;
  try {
    for (const Buffer* b : blocks_) {
      if (direct_)
        file_->write_direct(b->data(), b->page_span(), at);
      else
        file_->write(b->data(), b->size(), at);
      b->park_pages();
      ++done;
      at += b->page_span();
    }
  } catch (...) {  // a full disk: what was parked comes back, and the run fails as it would have
    read_back(done);
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
  read_back(blocks_.size());
  parked_ = false;
}

void Parking::forget() {
  if (!parked_) return;
  for (std::size_t i = back_; i < blocks_.size(); ++i) blocks_[i]->forget_parked();
  back_ = 0;
  parked_ = false;
}

// From the first block not read back yet: a read-back that threw (the memory cap) can be retried.
void Parking::read_back(std::size_t n) {
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < back_; ++i) at += blocks_[i]->page_span();
  for (; back_ < n; ++back_) {
    const Buffer* b = blocks_[back_];
    b->unpark_pages();
    try {
      if (direct_)
        file_->read_direct(b->data(), b->page_span(), at);
      else
        file_->read(b->data(), b->size(), at);
    } catch (...) {
      b->park_pages();  // not counted until its bytes are back
      throw;
    }
    at += b->page_span();
  }
  back_ = 0;
}

}  // namespace qsmcore::networks
