#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace qsmcore::cli {

ProgressBar::ProgressBar(bool quiet, std::FILE* out)
    : out_(out), enabled_(!quiet && out != nullptr), tty_(out != nullptr && isatty(fileno(out)) == 1) {}

void ProgressBar::update(double fraction, const std::string& stage) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const double f = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
  if (tty_)
    draw_bar(f, stage);
  else
    print_line(f, stage);
}

void ProgressBar::draw_bar(double f, const std::string& stage) {
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && stage == stage_ && now - last_ < std::chrono::milliseconds(100) && f < 1.0) return;
  last_ = now;
  stage_ = stage;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(std::lround(f * kWidth));
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(kWidth - filled), '.');
  std::fprintf(out_, "\r\033[K%3d%% [%s] %s", static_cast<int>(std::lround(f * 100.0)), bar.c_str(),
               stage.substr(0, 40).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::print_line(double f, const std::string& stage) {
  // Steps of 10 %, by count not by time: a log's length then does not depend on the speed.
  const int step = static_cast<int>(std::floor(f * 10.0 + 1e-9));
  if (stage == stage_ && step <= last_step_) return;
  stage_ = stage;
  last_step_ = step;
  std::fprintf(out_, "qsm: progress %d%% %s\n", step * 10, stage.c_str());
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (!enabled_ || !tty_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!drawn_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace qsmcore::cli
