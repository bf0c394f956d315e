// Progress on a stream that is not a terminal (a batch job's log): whole lines, one per 10 %
// step or stage, never a bar's carriage returns; nothing when quiet.
#include "cli/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace qsmcore::cli {
namespace {

// Everything `use` writes through a ProgressBar on a temporary file, as lines.
template <class F>
std::vector<std::string> lines_written(bool quiet, F&& use) {
  std::FILE* f = std::tmpfile();
  EXPECT_NE(f, nullptr);
  {
    ProgressBar bar(quiet, f);
    use(bar);
  }
  std::rewind(f);
  std::string text;
  for (int c; (c = std::fgetc(f)) != EOF;) text += static_cast<char>(c);
  std::fclose(f);
  EXPECT_EQ(text.find('\r'), std::string::npos) << "a bar's redraw in a log: " << text;
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(Progress, LogGetsOneLinePerTenPercent) {
  const auto lines = lines_written(false, [](ProgressBar& bar) {
    EXPECT_TRUE(bar.enabled());
    for (int i = 0; i <= 1000; ++i) bar.update(i / 1000.0, "tiles");
  });
  ASSERT_EQ(lines.size(), 11u);
  EXPECT_EQ(lines.front(), "qsm: progress 0% tiles");
  EXPECT_EQ(lines[4], "qsm: progress 40% tiles");
  EXPECT_EQ(lines.back(), "qsm: progress 100% tiles");
}

TEST(Progress, StageChangeIsALineAndRepeatsAreNot) {
  const auto lines = lines_written(false, [](ProgressBar& bar) {
    bar.update(0.05, "load");
    bar.update(0.06, "load");  // same step, same stage: nothing
    bar.update(0.0, "plan");
    bar.update(1.0, "done");
    bar.update(1.0, "done");
    bar.update(7.0, "done");  // clamped: still 100 %
  });
  const std::vector<std::string> want{"qsm: progress 0% load", "qsm: progress 0% plan", "qsm: progress 100% done"};
  EXPECT_EQ(lines, want);
}

TEST(Progress, QuietPrintsNothing) {
  const auto lines = lines_written(true, [](ProgressBar& bar) {
    EXPECT_FALSE(bar.enabled());
    bar.update(0.5, "tiles");
    bar.finish();
  });
  EXPECT_TRUE(lines.empty());
}

}  // namespace
}  // namespace qsmcore::cli
