// ModelOptions' process defaults. threads reaches the kernels whichever thread plans and runs
// them: OpenMP's thread count belongs to each thread, so a tile worker (a fresh std::thread)
// must get the model's count, not OpenMP's default, and the caller's own setting must come back
// unchanged. The default memory budget is what the process may use (here a SLURM allocation).
#include <gtest/gtest.h>
#include <omp.h>
#include <stdlib.h>

#include <thread>

#include "onnx/onnx_writer.h"
#include "qsmcore/error.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/process_limits.h"
#include "support/test_data.h"

namespace {

using namespace qsmtest::onnxw;

// One 3×3×3 convolution, 8 -> 8 channels: a oneDNN primitive made at planning.
Proto conv_model() {
  GraphParts p;
  std::vector<float> w(8 * 8 * 27, 0.01f);
  p.initializers.push_back(float_tensor("w", {8, 8, 3, 3, 3}, w));
  p.nodes.push_back(node("Conv", {"x", "w"}, {"y"}, "conv",
                         {attr_ints("kernel_shape", {3, 3, 3}), attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
  p.inputs.push_back(value_info("x", 1, {1, 8, 16, 16, 16}));
  p.outputs.push_back(value_info("y", 1, {1, 8, 16, 16, 16}));
  return model(graph(p));
}

qsmcore::KernelThreads run_on_fresh_thread(int threads) {
  qsmcore::ModelOptions o;
  o.threads = threads;
  const Proto m = conv_model();
  qsmcore::KernelThreads seen;
  std::thread t([&] {  // a tile worker: starts with OpenMP's process default
    qsmcore::OnnxModel model = qsmcore::OnnxModel::load(m.bytes, o, "conv.onnx");
    model.run(std::vector<qsmcore::Tensor>{qsmtest::random_tensor({1, 8, 16, 16, 16}, 1)});
    seen = model.kernel_threads();
  });
  t.join();
  return seen;
}

TEST(Threads, OneThreadOnAFreshThreadFromPlanningOn) {
  const qsmcore::KernelThreads k = run_on_fresh_thread(1);
  EXPECT_EQ(k.created, 1);
  EXPECT_EQ(k.run, 1);
}

TEST(Threads, TwoThreadsOnAFreshThread) {
  const qsmcore::KernelThreads k = run_on_fresh_thread(2);
  EXPECT_EQ(k.created, 2);
  EXPECT_EQ(k.run, 2);
}

TEST(Threads, DefaultIsTheUsableCpusAndTheCallersSettingComesBack) {
  omp_set_num_threads(3);
  qsmcore::OnnxModel model = qsmcore::OnnxModel::load(conv_model().bytes, {}, "conv.onnx");
  EXPECT_EQ(model.options().threads, qsmcore::usable_cpus());
  model.run(std::vector<qsmcore::Tensor>{qsmtest::random_tensor({1, 8, 16, 16, 16}, 1)});
  EXPECT_EQ(model.kernel_threads().run, qsmcore::usable_cpus());
  EXPECT_EQ(omp_get_max_threads(), 3) << "the engine changed its caller's OpenMP setting";
}

TEST(DefaultBudget, ModelOptionsDefaultIsTheProcessLimit) {
  ::setenv("SLURM_MEM_PER_NODE", "8", 1);  // 8 MiB: less than the reserve, so nothing fits
  qsmcore::OnnxModel model = qsmcore::OnnxModel::load(conv_model().bytes, {}, "conv.onnx");
  qsmcore::ModelOptions off;
  off.mem_budget = 0;
  qsmcore::OnnxModel unbudgeted = qsmcore::OnnxModel::load(conv_model().bytes, off, "conv.onnx");
  ::unsetenv("SLURM_MEM_PER_NODE");
  EXPECT_EQ(model.options().mem_budget, 1);
  EXPECT_NE(model.options().mem_budget_source.find("SLURM_MEM_PER_NODE"), std::string::npos);
  const qsmcore::Tensor x = qsmtest::random_tensor({1, 8, 16, 16, 16}, 1);
  try {
    model.run(std::vector<qsmcore::Tensor>{x});
    FAIL() << "a run over the automatic budget must be refused";
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("from SLURM_MEM_PER_NODE"), std::string::npos) << msg;
    EXPECT_NE(msg.find("would fit"), std::string::npos) << msg;
  }
  EXPECT_EQ(unbudgeted.options().mem_budget, 0);
  EXPECT_NO_THROW(unbudgeted.run(std::vector<qsmcore::Tensor>{x}));
}

}  // namespace
