// The spill files of one OnnxModel's runs: a file outlives its run, so the next run takes it when
// it is large enough and in the same directory, and a wrapper's many runs (NeXtQSM's six VJPs)
// allocate and free one file, not one each (freeing one can take seconds: runtime/plan.h
// SpillRun::file). Runs in parallel (tile threads) take one each; one is kept, the largest. It
// goes with the pool (the model), with release(), or with the first run that spills nothing
// (keep(nullptr): a budget that fits again frees the disk).
//
// One mutex guards the kept file and the count; no file is created or freed under it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "spill/file.h"

namespace qsmcore {

class SpillFilePool {
 public:
  /// A file of at least `bytes` in `dir` ("" = the default folder): the kept one when it is
  /// large enough and there, else a new one (the kept one freed first: the disk holds one at a
  /// time). Throws what residency::SpillFile's constructor throws.
  std::unique_ptr<residency::SpillFile> take(const std::string& dir, std::uint64_t bytes);
  /// A run is over with `f`: kept when it is larger than the one kept (which is then freed),
  /// else freed; nullptr (a run that spilled nothing) frees the one kept.
  void keep(std::unique_ptr<residency::SpillFile> f);
  /// Frees the kept file on a thread of its own (residency::SpillFile::free_in_background).
  void release();
  /// Files take() has created since the pool was made.
  std::size_t files_made() const;
  /// The bytes of the kept file (0: none kept).
  std::uint64_t kept_bytes() const;

 private:
  mutable std::mutex mu_;
  std::unique_ptr<residency::SpillFile> idle_;
  std::size_t made_ = 0;
};

}  // namespace qsmcore
