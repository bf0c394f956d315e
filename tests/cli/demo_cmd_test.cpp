// `qsm demo` end to end at a small size: phantom -> local field -> a network (run_network) and
// TKD -> metrics. By default the network is qsmcore-invnet, trained by qsmcore and shipped: its
// χ must beat TKD's best threshold. With an architecture twin (random weights) the demo must say
// its metrics mean nothing. The TKD reconstruction is a real check of the whole physics chain
// (phantom, forward model, kernel conventions, metrics): see the bound below.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "io/nifti.h"
#include "support/test_data.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;

TEST(QsmDemo, TheShippedNetworkBeatsTkdOutOfTheBox) {
  qsmtest::ScratchDir work;
  const std::string out = work.file("demo");
  // No --model and no weight variable: the shipped network is found by itself.
  const auto r = qsmtest::run_qsm({"demo", "--out", out, "--size", "64", "--threads", "2"},
                                  {"HOME=" + work.file("home")}, work.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  for (const char* f : {"chi_true.nii.gz", "local_field.nii.gz", "mask.nii.gz", "chi_network.nii.gz", "chi_tkd.nii.gz",
                        "chi_true.png", "chi_network.png", "chi_tkd.png", "local_field.png", "demo.json"})
    EXPECT_TRUE(fs::exists(fs::path(out) / f)) << f;
  for (const auto& name : qsmtest::listing(out)) EXPECT_NE(name[0], '.') << "leftover temporary " << name;

  const auto j = nlohmann::json::parse(qsmtest::read_text(out + "/demo.json"));
  const auto& net = j.at("network");
  EXPECT_EQ(net.at("id"), "qsmcore-invnet");
  EXPECT_EQ(net.at("weights"), "shipped");
  EXPECT_EQ(net.at("trained_weights"), true);
  EXPECT_EQ(r.out.find("not meaningful"), std::string::npos) << r.out;
  const auto& m = net.at("metrics");
  const auto& best = j.at("tkd_best").at("metrics");
  ASSERT_TRUE(m.contains("nrmse_percent")) << m.dump();
  EXPECT_LT(m.at("nrmse_percent").get<double>(), best.at("nrmse_percent").get<double>());
  EXPECT_GT(m.at("xsim").get<double>(), best.at("xsim").get<double>());
  EXPECT_LE(best.at("nrmse_percent").get<double>(), j.at("tkd").at("metrics").at("nrmse_percent").get<double>());
  EXPECT_GT(net.at("predicted_peak_bytes").get<std::int64_t>(), 0);
  EXPECT_LE(net.at("measured_peak_bytes").get<std::int64_t>(), net.at("predicted_peak_bytes").get<std::int64_t>());
  EXPECT_NE(r.out.find("predicted peak"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TKD (best t"), std::string::npos) << r.out;
}

TEST(QsmDemo, ATwinIsLabelledUntrainedAndTkdRecoversTheGroundTruth) {
  const std::string twins = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(twins, "QSM_TWINS_DIR");
  qsmtest::ScratchDir work;
  const std::string out = work.file("demo");
  const auto r = qsmtest::run_qsm(
      {"demo", "--out", out, "--size", "48", "--threads", "2", "--model", (fs::path(twins) / "xqsm.onnx").string()},
      {"HOME=" + work.file("home")}, work.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;

  const auto j = nlohmann::json::parse(qsmtest::read_text(out + "/demo.json"));
  // The twin is not the published network (its recipe is found by its file name), and the demo
  // must say so.
  EXPECT_EQ(j.at("network").at("id"), "xqsm");
  EXPECT_EQ(j.at("network").at("trained_weights"), false);
  EXPECT_NE(r.out.find("random weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not meaningful"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("xQSM (twin)"), std::string::npos) << r.out;
  EXPECT_GT(j.at("network").at("predicted_peak_bytes").get<std::int64_t>(), 0);
  EXPECT_GT(j.at("network").at("measured_peak_bytes").get<std::int64_t>(), 0);

  // TKD against the ground truth. NRMSE = 100·‖e‖/‖χ‖ in the brain mask, so predicting 0
  // everywhere scores exactly 100 %. TKD cannot recover the in-mask mean of χ (1/D is 0 at
  // k = 0) and loses the cone where |D| < 0.19; QSM-CI reports 36.3 % for TKD on its 2019
  // in-silico head, and this phantom gives 39.1 / 37.5 / 36.4 % at 32³ / 48³ / 64³. Measured
  // failures on the same 48³ head: the kernel along x or y instead of z 175 % / 171 %, the
  // field passed through as χ 111 %. The bound of 60 % leaves room for changes to the phantom
  // and still fails each of those.
  const auto& tkd = j.at("tkd").at("metrics");
  ASSERT_TRUE(tkd.contains("nrmse_percent")) << tkd.dump();
  const double nrmse = tkd.at("nrmse_percent").get<double>();
  EXPECT_LT(nrmse, 60.0);
  EXPECT_GT(nrmse, 1.0);  // TKD is not exact: a tiny value would mean χ leaked into the result
  EXPECT_GT(tkd.at("xsim").get<double>(), 0.0);
  EXPECT_NE(r.out.find("TKD"), std::string::npos);
  EXPECT_NE(r.out.find("NRMSE"), std::string::npos);

  const Volume chi = io::read_nifti(out + "/chi_tkd.nii.gz");
  EXPECT_EQ(chi.dims(), (Dims3{48, 48, 48}));
}

TEST(QsmDemo, ARegistryIdRunsTheWeightsItsLookupFinds) {
  // `--model xqsm` looks the weights up as `qsm run xqsm` does (here through QSM_MODEL_DIR_XQSM,
  // never a download): with the published file that would be the real xQSM; the twin found
  // there is labelled by its hash.
  const std::string twins = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(twins, "QSM_TWINS_DIR");
  qsmtest::ScratchDir work;
  const std::string out = work.file("demo");
  const auto r = qsmtest::run_qsm({"demo", "--out", out, "--size", "32", "--threads", "2", "--model", "xqsm"},
                                  {"HOME=" + work.file("home"), "QSM_MODEL_DIR_XQSM=" + twins}, work.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(qsmtest::read_text(out + "/demo.json"));
  EXPECT_EQ(j.at("network").at("id"), "xqsm");
  EXPECT_EQ(j.at("network").at("weights"), "unverified");
  EXPECT_TRUE(fs::equivalent(j.at("network").at("model_path").get<std::string>(), fs::path(twins) / "xqsm.onnx"));
  // Without the variable nothing is found, and the message says how to get the weights.
  const auto missing = qsmtest::run_qsm({"demo", "--out", work.file("d2"), "--size", "32", "--model", "xqsm"},
                                        {"HOME=" + work.file("home")}, work.path());
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("qsm fetch xqsm"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(work.file("d2")));
}

TEST(QsmDemo, ARunOverTheProcesssLimitIsRefusedAndLeavesNothing) {
  // The default budget is what the process may use: under an 8 MiB SLURM allocation the demo is
  // refused before it allocates, naming the limit, and writes no folder.
  qsmtest::ScratchDir work;
  const auto r = qsmtest::run_qsm({"demo", "--out", work.file("d"), "--size", "32"},
                                  {"HOME=" + work.file("home"), "SLURM_MEM_PER_NODE=8"}, work.path());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("SLURM_MEM_PER_NODE"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work.file("d")));
}

TEST(QsmDemo, MissingModelFileIsNamed) {
  qsmtest::ScratchDir work;
  const auto r = qsmtest::run_qsm({"demo", "--out", work.file("d"), "--size", "32", "--model", work.file("no.onnx")},
                                  {}, work.path());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(work.file("no.onnx")), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work.file("d")));
}

}  // namespace
}  // namespace qsmcore
