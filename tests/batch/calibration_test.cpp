// `qsm batch plan`'s calibration run (issue #51) times the network under the budget its tasks
// will have: its subject's --mem less the reserve (plan.h: task_budget_bytes, the oracle the
// request is checked against in batch_test.cpp). Unbudgeted, a login node's run took another
// path than the task (the whole volume where the task runs fewer tiles at once, or spills) and
// timed that. The oracle for "another path" is the engine's own accounted peak: the same run
// unbudgeted holds more than the task's budget; the calibration run held no more than it.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "batch/plan.h"
#include "io/nifti.h"
#include "onnx/test_util.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"

namespace {

using namespace qsmcore;
using namespace qsmcore::batch;
constexpr std::int64_t kMiB = std::int64_t{1} << 20;

TEST(Calibration, RunsUnderTheTasksBudgetAndKeepsToIt) {
  const qsmtest::TempDir s;
  const std::string field = (s.path() / "field.nii.gz").string(), mask = (s.path() / "mask.nii.gz").string();
  const std::string tsv = (s.path() / "cohort.tsv").string();
  std::ofstream(tsv) << "id\tin\tmask\nsmall\t" << field << "\t" << mask << "\n";
  NetworkOptions net;
  net.model.threads = 2;
  std::int64_t whole_peak = 0, inputs = 0;
  {  // the phantom is gone before the plan: the calibration's budget counts what is held
    PhantomOptions po;
    po.dims = {64, 64, 64};
    const Phantom ph = make_head_phantom(po);
    io::write_nifti(field, ph.local_field);
    io::write_nifti(mask, ph.mask);
    // The run unbudgeted, as the calibration ran before: its peak above the inputs it was given.
    const ModelSpec& spec = require_model("qsmcore-invnet");
    std::vector<std::string> files;
    for (const ResolvedWeight& w : resolve_weights(spec)) files.push_back(w.path.string());
    NetworkOptions unbudgeted = net;
    unbudgeted.model.mem_budget = 0;
    NetworkInputs in;
    in.field = &ph.local_field;
    in.mask = &ph.mask;
    whole_peak = run_network(spec, files, in, unbudgeted).measured_peak_bytes;
    inputs = 2 * ph.mask.voxels() * 8;
  }

  PlanOptions o;
  o.model_id = "qsmcore-invnet";
  o.manifest = tsv;
  o.out_dir = (s.path() / "batch").string();
  o.net = net;
  // A node whose memory holds the inputs and half of that run: the plan must fit it by running
  // fewer tiles at once (or spilling), which is what the task then does.
  o.max_mem = inputs + whole_peak / 2 + 64 * kMiB + (inputs + whole_peak) / 20;
  const BatchPlan p = make_plan(o);
  ASSERT_EQ(p.subjects.size(), 1u);
  const SubjectPlan& sub = p.subjects[0];
  ASSERT_TRUE(sub.error.empty()) << sub.error;
  const std::int64_t task_budget = task_budget_bytes(sub.mem_mib * kMiB);
  ASSERT_GT(inputs + whole_peak, task_budget) << "the unbudgeted run fits the task's budget: nothing to tell apart";
  EXPECT_EQ(p.calibration_budget_bytes, task_budget) << p.time_source;
  EXPECT_GT(p.calibration_peak_bytes, 0);
  EXPECT_LE(sub.input_bytes + p.calibration_peak_bytes, task_budget)
      << "the calibration run held more than the task may: it did not run the task's way (" << p.time_source << ")";
  EXPECT_EQ(p.calibration_tiles, sub.tiles) << "the calibration ran as other tiles than the plan predicts for the task";
  EXPECT_GT(p.seconds_per_voxel, 0.0);
  std::printf(
      "[ calibration ] unbudgeted: inputs + peak %lld B; task budget %lld B; calibration: %lld + %lld B, %lld tiles\n",
      static_cast<long long>(inputs + whole_peak), static_cast<long long>(task_budget),
      static_cast<long long>(sub.input_bytes), static_cast<long long>(p.calibration_peak_bytes),
      static_cast<long long>(p.calibration_tiles));
}

}  // namespace
