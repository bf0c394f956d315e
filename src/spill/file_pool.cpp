// SpillFilePool (spill/file_pool.h): the kept spill file of one model's runs.
#include "spill/file_pool.h"

namespace qsmcore {

std::unique_ptr<residency::SpillFile> SpillFilePool::take(const std::string& dir, std::uint64_t bytes) {
  std::unique_ptr<residency::SpillFile> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    f.swap(idle_);
  }
  if (f && f->bytes() >= bytes && f->dir() == residency::SpillFile::resolve_dir(dir)) return f;
  f.reset();  // freed before a larger one is allocated: the disk holds one at a time
  f = std::make_unique<residency::SpillFile>(dir, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  ++made_;
  return f;
}

void SpillFilePool::keep(std::unique_ptr<residency::SpillFile> f) {
  std::unique_ptr<residency::SpillFile> dropped;  // freed outside the lock (declared first: destroyed last)
  std::lock_guard<std::mutex> lock(mu_);
  if (!f) {
    dropped.swap(idle_);
  } else if (!idle_ || idle_->bytes() < f->bytes()) {
    dropped.swap(idle_);
    idle_ = std::move(f);
  } else {
    dropped = std::move(f);
  }
}

void SpillFilePool::release() {
  std::unique_ptr<residency::SpillFile> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    f.swap(idle_);
  }
  if (f) residency::SpillFile::free_in_background(std::move(f));
}

std::size_t SpillFilePool::files_made() const {
  std::lock_guard<std::mutex> lock(mu_);
  return made_;
}

std::uint64_t SpillFilePool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_ ? idle_->bytes() : 0;
}

}  // namespace qsmcore
