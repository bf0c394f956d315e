// Plan builds that stage their weight copies (memory/staging.h, on by default in wasm32 only,
// turned on here natively): on every reduced twin the outputs are the unstaged run's bits, copies
// were staged wherever the model has weights read at plan time, every node's copies fit the room
// the plan computed (none went to the heap), and no staged copy outlives the build (no block is
// kept alive by one). The reference backend keeps
// the raw weights it reads at run time, so there the plan's copy-out of staged constants runs.
#include <gtest/gtest.h>

#include "memory/staging.h"
#include "onnx/reader.h"
#include "qsmcore/onnx_model.h"
#include "support/test_data.h"
#include "support/twin_cases.h"

namespace {

using qsmcore::memory::staging_blocks_alive;
using qsmcore::memory::staging_counters;

class StagedPlanBuild : public testing::TestWithParam<qsmtest::TwinCase> {
 protected:
  void TearDown() override { qsmcore::memory::set_stage_plan_builds_for_testing(false); }
};

std::vector<qsmcore::Tensor> run(const std::string& path, qsmcore::Backend backend, bool staged,
                                 const std::vector<qsmcore::Tensor>& in) {
  qsmcore::memory::set_stage_plan_builds_for_testing(staged);
  qsmcore::ModelOptions o;
  o.backend = backend;
  o.threads = 2;
  qsmcore::OnnxModel m = qsmcore::OnnxModel::load(path, o);
  return m.run(in);
}

// Returns whether the build staged anything (a twin whose weights are all below the size a
// residency policy defers is read whole at load, and its builds have nothing to stage).
bool expect_staged_build_is_exact(const std::string& path, qsmcore::Backend backend,
                                  const std::vector<qsmcore::Tensor>& in) {
  const auto plain = run(path, backend, false, in);
  const int alive = staging_blocks_alive();
  const auto before = staging_counters();
  const auto staged = run(path, backend, true, in);
  const auto after = staging_counters();
  qsmtest::expect_bitwise(staged, plain, path + " staged vs not");
  if (after.blocks > before.blocks) {
    EXPECT_GT(after.staged, before.staged) << "a block, but no copy staged in it";
  }
  EXPECT_EQ(after.overflowed, before.overflowed) << "a node's copies did not fit the plan's staging room";
  EXPECT_EQ(staging_blocks_alive(), alive) << "a staged copy outlived the plan build";
  return after.staged > before.staged;
}

TEST_P(StagedPlanBuild, OutputsAreTheUnstagedBitsAndNoCopyOutlivesTheBuild) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const std::string path = dir + "/" + GetParam().file;
  const bool staged = expect_staged_build_is_exact(path, qsmcore::Backend::OneDnn, qsmtest::twin_inputs(GetParam(), 7));
  // Weights a plan reads from the file (onnx_model.cpp defers float initializers of 4 KiB and
  // more): a model with one stages its copies.
  bool any_deferred = false;
  for (const auto& init : qsmcore::onnx::read_model(path).graph.initializers)
    any_deferred = any_deferred || (init.dtype == qsmcore::DType::F32 && init.nbytes() >= 4096);
  EXPECT_EQ(staged, any_deferred) << "copies staged, against the model having weights read at plan time";
}

INSTANTIATE_TEST_SUITE_P(Twins, StagedPlanBuild, testing::ValuesIn(qsmtest::twin_cases()), qsmtest::twin_case_name);

TEST(StagedPlanBuild, TheReferenceBackendsKeptWeightsLeaveTheBlock) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  qsmtest::TwinCase xqsm;
  for (const auto& c : qsmtest::twin_cases())
    if (c.file == "xqsm.onnx") xqsm = c;
  ASSERT_FALSE(xqsm.file.empty()) << "no xqsm.onnx in " << dir;
  EXPECT_TRUE(
      expect_staged_build_is_exact(dir + "/xqsm.onnx", qsmcore::Backend::Reference, qsmtest::twin_inputs(xqsm, 7)))
      << "nothing was staged";
  qsmcore::memory::set_stage_plan_builds_for_testing(false);
}

}  // namespace
