// Progress of long commands on stderr. On a terminal: a one-line bar redrawn in place. In a
// log file or a pipe (batch jobs, CI): plain lines, "qsm: progress 40% tiles", one per 10 %
// step or change of stage, so a log stays readable and small. Nothing when asked to be quiet.
// Safe to call from several threads (tile workers report progress).
#pragma once
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace qsmcore::cli {

class ProgressBar {
 public:
  /// Enabled unless `quiet`; a bar when `out` is a terminal, lines otherwise.
  explicit ProgressBar(bool quiet, std::FILE* out = stderr);
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return enabled_; }
  /// fraction in [0, 1] (clamped). The bar redraws at most every 100 ms unless the stage
  /// changes; lines are printed when the stage changes or a new 10 % step is reached.
  void update(double fraction, const std::string& stage);
  /// Clears the bar's line (idempotent), so that what is printed next starts clean.
  void finish();

 private:
  void draw_bar(double f, const std::string& stage);
  void print_line(double f, const std::string& stage);

  std::FILE* out_;
  bool enabled_ = false;
  bool tty_ = false;
  bool drawn_ = false;
  int last_step_ = -1;  // lines: the last 10 % step printed
  std::mutex mutex_;
  std::string stage_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace qsmcore::cli
