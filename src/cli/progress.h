// A one-line progress bar on stderr for long commands. Shown only when stderr is a terminal
// (a log file or a pipe gets nothing) and not asked to be quiet. Safe to call from several
// threads (tile workers report progress).
#pragma once
#include <chrono>
#include <mutex>
#include <string>

namespace qsmcore::cli {

class ProgressBar {
 public:
  /// Enabled when `quiet` is false and stderr is a TTY.
  explicit ProgressBar(bool quiet);
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return enabled_; }
  /// fraction in [0, 1] (clamped); redraws at most every 100 ms unless the stage changes.
  void update(double fraction, const std::string& stage);
  /// Clears the line (idempotent), so that what is printed next starts clean.
  void finish();

 private:
  bool enabled_ = false;
  bool drawn_ = false;
  std::mutex mutex_;
  std::string stage_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace qsmcore::cli
