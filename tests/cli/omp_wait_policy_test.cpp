// The qsm command's OpenMP threads wait passively unless the user chose otherwise
// (src/cli/omp_wait_policy.cpp). The oracle is libgomp itself: with OMP_DISPLAY_ENV=verbose it
// prints, as it loads, the spin count it took from the environment (0 when passive, 300000 when
// no policy is set, 3·10^10 when active; its OMP_WAIT_POLICY line says PASSIVE for both of the
// first two).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "cli/child_run.h"
#include "cli/cli_test_util.h"

namespace {

using qsmtest::spawn_qsm;

// The spin count libgomp reports in a `qsm --version` started with `extra_env` and without the test
// process's own OMP_WAIT_POLICY (tools/test.sh sets it for the suite).
std::string spin_count_libgomp_reports(const std::vector<std::string>& extra_env) {
  qsmtest::ScratchDir work;
  const char* own = std::getenv("OMP_WAIT_POLICY");
  const std::optional<std::string> saved = own ? std::optional<std::string>(own) : std::nullopt;
  unsetenv("OMP_WAIT_POLICY");
  std::vector<std::string> env{"OMP_DISPLAY_ENV=verbose"};
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  const qsmtest::ChildRun r = spawn_qsm({"--version"}, env, work.path());
  if (saved) setenv("OMP_WAIT_POLICY", saved->c_str(), 1);
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string all = r.out + r.err;
  const auto at = all.rfind("GOMP_SPINCOUNT");  // the image that ran (qsm starts itself again)
  if (at == std::string::npos) return "(not displayed: " + all.substr(0, 400) + ")";
  const auto open = all.find('\'', at), close = all.find('\'', open + 1);
  if (open == std::string::npos || close == std::string::npos) return "(unreadable)";
  return all.substr(open + 1, close - open - 1);
}

TEST(OmpWaitPolicy, QsmWaitsPassivelyByDefault) {
  if (std::getenv("GOMP_SPINCOUNT") != nullptr) GTEST_SKIP() << "GOMP_SPINCOUNT is set: qsm leaves it alone";
  EXPECT_EQ(spin_count_libgomp_reports({}), "0");
}

TEST(OmpWaitPolicy, APolicyTheUserSetIsKept) {
  EXPECT_EQ(spin_count_libgomp_reports({"OMP_WAIT_POLICY=active"}), "30000000000");
}

}  // namespace
