// The qsm command keeps to the CPUs and the memory it is given. `--threads 1` is checked by
// what the operating system counted for the child process (user + system CPU time against wall
// time: one busy thread cannot use more CPU time than wall time), `--threads 2` by the thread
// counts the run's report says its kernels got. The default memory budget is checked by a run
// under a SLURM allocation far too small: refused, naming SLURM_MEM_PER_NODE, writing nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/child_run.h"
#include "cli/cli_test_util.h"
#include "io/npy.h"
#include "onnx/onnx_writer.h"
#include "qsmcore/process_limits.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;
namespace w = qsmtest::onnxw;
using qsmtest::ChildRun;
using qsmtest::spawn_qsm;

// A chain of 3×3×3 convolutions + ReLU, C channels at D³: enough arithmetic (≈ 6 GFLOP per
// layer at C = 32, D = 48) that the run is dominated by kernels, as a real network's is.
void write_conv_chain(const std::string& path, std::int64_t c, std::int64_t d, int layers) {
  w::GraphParts g;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, std::sqrt(2.0f / static_cast<float>(27 * c)));
  std::string x = "x";
  for (int l = 0; l < layers; ++l) {
    const std::string wn = "w" + std::to_string(l), conv = "c" + std::to_string(l), y = "y" + std::to_string(l);
    std::vector<float> weights(static_cast<std::size_t>(c * c * 27));
    for (float& v : weights) v = nd(rng);
    g.initializers.push_back(w::float_tensor(wn, {c, c, 3, 3, 3}, weights));
    g.nodes.push_back(w::node("Conv", {x, wn}, {conv}, conv,
                              {w::attr_ints("kernel_shape", {3, 3, 3}), w::attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
    g.nodes.push_back(w::node("Relu", {conv}, {y}, "r" + std::to_string(l)));
    x = y;
  }
  g.inputs.push_back(w::value_info("x", 1, {1, c, d, d, d}));
  g.outputs.push_back(w::value_info(x, 1, {1, c, d, d, d}));
  w::write_file(path, w::model(w::graph(g)).bytes);
}

class QsmLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    write_conv_chain(model(), 32, 48, 12);
    Tensor x = Tensor::empty(DType::F32, {1, 32, 48, 48, 48});
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& v : x.span<float>()) v = nd(rng);
    io::write_npy(work_.file("x.npy"), x);
  }
  std::string model() const { return work_.file("chain.onnx"); }
  std::vector<std::string> run_args(const std::string& threads, const std::string& out) const {
    return {"onnx",      "run",   model(),    "--in",       "x=" + work_.file("x.npy"), "--out", out,
            "--threads", threads, "--report", out + ".json"};
  }
  qsmtest::ScratchDir work_;
};

TEST_F(QsmLimits, OneThreadUsesAtMostOneCpu) {
  const ChildRun r = spawn_qsm(run_args("1", work_.file("t1")), {}, work_.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::printf("--threads 1: cpu %.2f s in %.2f s wall (ratio %.2f)\n", r.cpu_s, r.wall_s, r.cpu_s / r.wall_s);
  EXPECT_LE(r.cpu_s, 1.2 * r.wall_s) << "more than one core busy under --threads 1";
  const auto report = nlohmann::json::parse(qsmtest::read_text(work_.file("t1.json")));
  EXPECT_EQ(report.at("threads"), 1);
  EXPECT_EQ(report.at("kernel_threads").at("created"), 1);
  EXPECT_EQ(report.at("kernel_threads").at("run"), 1);
}

TEST_F(QsmLimits, TwoThreadsReachTheKernels) {
  const ChildRun r = spawn_qsm(run_args("2", work_.file("t2")), {}, work_.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::printf("--threads 2: cpu %.2f s in %.2f s wall (ratio %.2f; %d usable CPU(s))\n", r.cpu_s, r.wall_s,
              r.cpu_s / r.wall_s, usable_cpus());
  const auto report = nlohmann::json::parse(qsmtest::read_text(work_.file("t2.json")));
  EXPECT_EQ(report.at("threads"), 2);
  // OpenMP gives a team of 2 even on one CPU, so these hold on any machine; that the second
  // thread found a core of its own is a question of the machine's load, not of the engine.
  EXPECT_EQ(report.at("kernel_threads").at("created"), 2);
  EXPECT_EQ(report.at("kernel_threads").at("run"), 2);
}

TEST_F(QsmLimits, DefaultBudgetFollowsSlurmAndRefusesBeforeWriting) {
  const std::string out = work_.file("refused");
  const ChildRun r = spawn_qsm({"onnx", "run", model(), "--in", "x=" + work_.file("x.npy"), "--out", out},
                               {"SLURM_MEM_PER_NODE=8"}, work_.path());
  EXPECT_NE(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("SLURM_MEM_PER_NODE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("would fit"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fs::path(out) / "y11.npy"));
  // --mem-budget none turns the automatic budget off: the same run then succeeds.
  const ChildRun ok = spawn_qsm({"onnx", "run", model(), "--in", "x=" + work_.file("x.npy"), "--out", out,
                                 "--mem-budget", "none", "--threads", "2"},
                                {"SLURM_MEM_PER_NODE=8"}, work_.path());
  EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
  EXPECT_TRUE(fs::exists(fs::path(out) / "y11.npy"));
}

}  // namespace
}  // namespace qsmcore
