// What the operating system sees matches what the engine accounts (issue #13): a weight-heavy
// network — most of its 120 MB are weights of 0.1 to 28 MB per layer, as in a real 3-D U-Net's
// deeper levels — run by `qsm onnx run` under every weight-residency policy, with the child's
// peak RSS (its VmHWM, the kernel's count, in the run report) at most the report's accounted peak
// + 64 MiB (code, libraries, oneDNN's own state). Before the accounting layer mapped its large
// blocks itself, glibc kept freed weight buffers in its heap and the streamed runs of such a
// network reached several times their accounted peak.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/child_run.h"
#include "cli/cli_test_util.h"
#include "io/npy.h"
#include "onnx/onnx_writer.h"

namespace qsmcore {
namespace {

namespace w = qsmtest::onnxw;

constexpr double kBoundMiB = 64.0;

// 3×3×3 convolutions + ReLU through the widths below at a small D³: weights dominate the run.
void write_weight_heavy_chain(const std::string& path, const std::vector<std::int64_t>& widths, std::int64_t d) {
  w::GraphParts g;
  std::mt19937 rng(11);
  std::string x = "x";
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const std::int64_t ci = widths[l], co = widths[l + 1];
    std::normal_distribution<float> nd(0.0f, std::sqrt(2.0f / static_cast<float>(27 * ci)));
    const std::string n = std::to_string(l), wn = "w" + n, conv = "c" + n, y = "y" + n;
    std::vector<float> weights(static_cast<std::size_t>(co * ci * 27));
    for (float& v : weights) v = nd(rng);
    g.initializers.push_back(w::float_tensor(wn, {co, ci, 3, 3, 3}, weights));
    g.nodes.push_back(w::node("Conv", {x, wn}, {conv}, conv,
                              {w::attr_ints("kernel_shape", {3, 3, 3}), w::attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
    g.nodes.push_back(w::node("Relu", {conv}, {y}, "r" + n));
    x = y;
  }
  g.inputs.push_back(w::value_info("x", 1, {1, widths.front(), d, d, d}));
  g.outputs.push_back(w::value_info(x, 1, {1, widths.back(), d, d, d}));
  w::write_file(path, w::model(w::graph(g)).bytes);
}

class RssTracksAccounting : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    work_ = new qsmtest::ScratchDir();
    write_weight_heavy_chain(work_->file("heavy.onnx"), {16, 64, 128, 256, 512, 512, 512, 512, 256, 128, 64, 16}, 6);
    Tensor x = Tensor::empty(DType::F32, {1, 16, 6, 6, 6});
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& v : x.span<float>()) v = nd(rng);
    io::write_npy(work_->file("x.npy"), x);
  }
  static void TearDownTestSuite() {
    delete work_;
    work_ = nullptr;
  }
  static qsmtest::ScratchDir* work_;
};
qsmtest::ScratchDir* RssTracksAccounting::work_ = nullptr;

TEST_P(RssTracksAccounting, PeakRssIsTheAccountedPeakPlusAtMost64MiB) {
#if defined(__SANITIZE_ADDRESS__) || defined(QSM_TESTS_UNDER_ASAN)
  GTEST_SKIP() << "ASan's shadow memory and quarantine are part of the RSS under the sanitizers";
#endif
  const std::string policy = GetParam();
  const std::string out = work_->file("out"), report = work_->file("report.json");
  const qsmtest::ChildRun r =
      qsmtest::spawn_qsm({"onnx", "run", work_->file("heavy.onnx"), "--in", "x=" + work_->file("x.npy"), "--out", out,
                          "--threads", "2", "--residency", policy, "--mem-budget", "none", "--report", report},
                         {}, work_->path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto rep = nlohmann::json::parse(qsmtest::read_text(report));
  const double accounted_mib = rep.at("measured_peak_bytes").get<double>() / 1048576.0;
  const double weights_mib = rep.at("weights_peak_bytes").get<double>() / 1048576.0;
  const double rss_mib = rep.at("process_peak_rss_bytes").get<double>() / 1048576.0;
  std::printf("%-18s accounted %.0f MiB (weights %.0f MiB), peak RSS %.0f MiB, difference %.0f MiB\n", policy.c_str(),
              accounted_mib, weights_mib, rss_mib, rss_mib - accounted_mib);
  ASSERT_GT(accounted_mib, 0.0);
  EXPECT_LE(rss_mib, accounted_mib + kBoundMiB) << policy;
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, RssTracksAccounting,
                         ::testing::Values("full", "layerwise", "stream:host=0", "stream:host=64MiB"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace qsmcore
