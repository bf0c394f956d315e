// `qsm onnx plan --live-at STEP`: the values a step holds. Checked against the same command's
// own step listing (every value listed is made at or before the step and read at or after it)
// and against the plan's live column at the busiest step (the values account for all of it but
// that step's scratch); a step beyond the plan is refused naming the plan's length.
#include <gtest/gtest.h>

#include <sstream>

#include "cli/cli_test_util.h"
#include "support/test_data.h"

namespace {

using qsmtest::run_qsm;

struct Row {
  std::size_t bytes = 0;
  int made = -1, last = -1;
};

// Rows of the --live-at listing: "  NAME SHAPE BYTES MADE LAST".
std::vector<Row> live_rows(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream in(out);
  std::string line;
  bool on = false;
  while (std::getline(in, line)) {
    if (line.rfind("  value ", 0) == 0) {
      on = true;
      continue;
    }
    if (!on || line.rfind("  ", 0) != 0) {
      on = false;
      continue;
    }
    std::istringstream f(line);
    std::string name, shape;
    Row r;
    f >> name >> shape >> r.bytes >> r.made >> r.last;
    if (f) rows.push_back(r);
  }
  return rows;
}

TEST(OnnxPlanCmd, LiveAtListsWhatTheBusiestStepHolds) {
  const std::string twins = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(twins, "QSM_TWINS_DIR");
  qsmtest::ScratchDir scratch;
  const std::string model = twins + "/xqsm.onnx";
  const std::vector<std::string> base{"onnx", "plan", model, "--shape", "field=1x1x32x32x32"};
  auto args = base;
  args.push_back("--steps");
  const auto steps = run_qsm(args, {}, scratch.path());
  ASSERT_EQ(steps.status, 0) << steps.err;
  // The busiest step by the live column (bytes) of --steps, and its scratch.
  std::istringstream in(steps.out);
  std::string line;
  int busiest = -1;
  double most = -1, scratch_mib = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    int i;
    std::string op, kernel, shape, live, mib1, scratch_s, mib2;
    std::size_t bytes;
    if (!(f >> i >> op >> kernel >> shape >> bytes >> live >> mib1 >> scratch_s >> mib2)) continue;
    if (std::stod(live) > most) most = std::stod(live), busiest = i, scratch_mib = std::stod(scratch_s);
  }
  ASSERT_GE(busiest, 0) << steps.out;
  args = base;
  args.insert(args.end(), {"--live-at", std::to_string(busiest)});
  const auto r = run_qsm(args, {}, scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = live_rows(r.out);
  ASSERT_FALSE(rows.empty()) << r.out;
  double listed = 0;
  for (const auto& row : rows) {
    EXPECT_LE(row.made, busiest);
    EXPECT_GE(std::max(row.last, row.made), busiest);
    listed += static_cast<double>(row.bytes) / (1 << 20);
  }
  // The live column is rounded to 0.1 MiB.
  EXPECT_NEAR(listed + scratch_mib, most, 0.11) << r.out;

  args = base;
  args.insert(args.end(), {"--live-at", "100000"});
  const auto bad = run_qsm(args, {}, scratch.path());
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--live-at 100000"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("steps"), std::string::npos) << bad.err;
}

// --least: the all-spilled layout. Its held column (resident values, staging blocks, scratch)
// peaks at the busiest step, whose listing accounts for exactly that many bytes, no more than
// the least arena; the held bytes never exceed the unspilled live bytes of the same step.
TEST(OnnxPlanCmd, LeastListsWhatTheSmallestArenasBusiestStepHolds) {
  const std::string twins = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(twins, "QSM_TWINS_DIR");
  qsmtest::ScratchDir scratch;
  const std::string model = twins + "/xqsm.onnx";
  std::vector<std::string> args{"onnx", "plan", model, "--shape", "field=1x1x48x32x32", "--steps"};
  const auto whole = run_qsm(args, {}, scratch.path());
  ASSERT_EQ(whole.status, 0) << whole.err;
  args.push_back("--least");
  const auto least = run_qsm(args, {}, scratch.path());
  ASSERT_EQ(least.status, 0) << least.err;
  auto column = [](const std::string& out) {
    std::vector<double> live;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      int i;
      std::string op, kernel, shape, mib1;
      std::size_t bytes;
      double v;
      if (f >> i >> op >> kernel >> shape >> bytes >> v >> mib1 && mib1 == "MiB") live.push_back(v);
    }
    return live;
  };
  const auto live = column(whole.out), held = column(least.out);
  ASSERT_EQ(live.size(), held.size());
  ASSERT_FALSE(held.empty()) << least.out;
  for (std::size_t s = 0; s < held.size(); ++s) EXPECT_LE(held[s], live[s] + 0.11) << "step " << s;
  const auto busiest = std::max_element(held.begin(), held.end());
  const std::string tag = "its busiest step is " + std::to_string(busiest - held.begin());
  ASSERT_NE(least.out.find(tag), std::string::npos) << least.out;
  const auto at = least.out.find("least arena ");
  ASSERT_NE(at, std::string::npos) << least.out;
  const double arena = std::stod(least.out.substr(at + 12));
  // Rows after the header: "  NAME SHAPE BYTES STEPS".
  std::istringstream in(least.out.substr(least.out.find("  value ", at)));
  std::string line;
  std::getline(in, line);
  double listed = 0;
  int rows = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string name, shape;
    std::size_t bytes;
    if (!(f >> name >> shape >> bytes)) break;
    listed += static_cast<double>(bytes) / (1 << 20), ++rows;
  }
  ASSERT_GT(rows, 0) << least.out;
  // The column is rounded to 0.1 MiB; held blocks are counted on 64-byte boundaries.
  EXPECT_NEAR(listed, *busiest, 0.11) << least.out;
  EXPECT_LE(*busiest, arena + 0.11) << least.out;
}

// --arena-limit: a spilled layout within a limit, and where it moves its bytes. The traffic
// table's totals (streamed + synchronous + overlapped) are the layout's written and read bytes.
TEST(OnnxPlanCmd, ArenaLimitAccountsForEveryByteTheLayoutMoves) {
  const std::string twins = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(twins, "QSM_TWINS_DIR");
  qsmtest::ScratchDir scratch;
  const auto r =
      run_qsm({"onnx", "plan", twins + "/xqsm.onnx", "--shape", "field=1x1x48x32x32", "--arena-limit", "600KiB"}, {},
              scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto head = r.out.find("layout within --arena-limit 600KiB: arena ");
  ASSERT_NE(head, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("does not fit"), std::string::npos) << r.out;
  auto after = [&](const std::string& key) { return std::stod(r.out.substr(r.out.find(key, head) + key.size())); };
  const double arena = after(": arena "), written = after("written "), read = after("read ");
  EXPECT_LE(arena, 600.0 / 1024 + 0.05);
  EXPECT_GT(written, 0.0) << "600 KiB should make the reduced xQSM at 48x32x32 spill";
  std::istringstream in(r.out.substr(r.out.find("\n  all", head) + 1));
  std::string all;
  std::vector<double> v(6);
  std::string unit;
  in >> all;
  for (auto& x : v) in >> x >> unit;
  ASSERT_TRUE(in) << r.out;
  // stream r, stream w, sync r, sync w, overlap r, overlap w; each rounded to 0.1 MiB.
  EXPECT_NEAR(v[0] + v[2] + v[4], read, 0.16) << r.out;
  EXPECT_NEAR(v[1] + v[3] + v[5], written, 0.16) << r.out;
}

}  // namespace
