// qsmcore-invnet, the network qsmcore trains itself (tools/train) and ships in models/, through
// `qsm run` on heads its training never saw: the analytic head phantom (physics.md §4.3, written
// by `qsm phantom`), which shares no geometry with the synthetic training heads, on a grid of
// another shape than the demo's, with B0 tilted off the voxel z axis (expressed in the affine, as
// a scanner writes it), with and without noise. The ground truth is the phantom's χ, scored with
// QSM-CI's metrics; TKD at its best threshold (chosen with the ground truth) is the baseline.
//
// Because the weights are trained, these tests can tell a right recipe from a wrong one: the
// same field given in Hz with the wrong field strength, or a field in ppm declared as Hz, must
// make the metrics clearly worse — a wrapper or CLI that mixes up units fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "io/nifti.h"
#include "qsmcore/metrics.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;

struct Head {
  std::string dir;
  Volume chi, mask, field;
  Vec3 b0_dir{0, 0, 1};
};

// A held-out head through `qsm phantom`: the grid shape, B0 direction and noise are the test's.
Head make_head(const qsmtest::ScratchDir& work, const std::string& name, const std::vector<std::string>& extra) {
  Head h;
  h.dir = work.file(name);
  std::vector<std::string> args = {"phantom", "--out", h.dir, "--no-background"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = qsmtest::run_qsm(args, {}, work.path());
  if (r.status != 0) throw std::runtime_error("qsm phantom failed: " + r.err);
  h.chi = io::read_nifti(h.dir + "/chi.nii.gz");
  h.mask = io::read_nifti(h.dir + "/mask.nii.gz");
  h.field = io::read_nifti(h.dir + "/local_field.nii.gz");
  const auto j = nlohmann::json::parse(qsmtest::read_text(h.dir + "/phantom.json"));
  const auto b = j.at("B0_dir").get<std::vector<double>>();
  h.b0_dir = {b.at(0), b.at(1), b.at(2)};
  return h;
}

// `qsm run qsmcore-invnet` with no weight variable set: the shipped file is found by itself.
Volume run_invnet(const qsmtest::ScratchDir& work, const Head& h, const std::string& field_path,
                  const std::vector<std::string>& extra, const std::string& out_name) {
  const std::string out = work.file(out_name + ".nii.gz");
  std::vector<std::string> args = {
      "run", "qsmcore-invnet", "--in", field_path, "--mask", h.dir + "/mask.nii.gz", "--out",
      out,   "--threads",      "2",    "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = qsmtest::run_qsm(args, {"HOME=" + work.file("home")}, work.path());
  if (r.status != 0) throw std::runtime_error("qsm run failed: " + r.out + r.err);
  return io::read_nifti(out);
}

QsmMetrics best_tkd(const Head& h, double* threshold) {
  QsmMetrics best;
  best.nrmse = INFINITY;
  for (double t : {0.05, 0.08, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.4}) {
    TkdOptions o;
    o.threshold = t;
    const QsmMetrics m = compute_metrics(tkd(h.field, h.mask, h.b0_dir, o), h.chi, &h.mask);
    if (m.nrmse < best.nrmse) {
      best = m;
      *threshold = t;
    }
  }
  return best;
}

// A field volume written in another unit: ppm × factor.
std::string write_scaled(const qsmtest::ScratchDir& work, const Head& h, double factor, const std::string& name) {
  Volume v = h.field.clone();
  for (std::int64_t i = 0; i < v.voxels(); ++i) v.data()[i] *= factor;
  const std::string path = work.file(name + ".nii.gz");
  io::write_nifti(path, v, {});
  return path;
}

void expect_beats_tkd(const Head& h, const Volume& chi, const char* what) {
  SCOPED_TRACE(what);
  double t = 0;
  const QsmMetrics tkd_m = best_tkd(h, &t);
  const QsmMetrics net = compute_metrics(chi, h.chi, &h.mask);
  ASSERT_TRUE(std::isfinite(net.nrmse) && std::isfinite(net.xsim) && std::isfinite(net.hfen));
  std::printf("[%s] invnet NRMSE %.1f %% XSIM %.3f HFEN %.3f | TKD (best t = %.3g) NRMSE %.1f %% XSIM %.3f HFEN %.3f\n",
              what, net.nrmse, net.xsim, net.hfen, t, tkd_m.nrmse, tkd_m.xsim, tkd_m.hfen);
  EXPECT_LT(net.nrmse, tkd_m.nrmse);
  EXPECT_GT(net.xsim, tkd_m.xsim);
  // Stated bounds (models/qsmcore-invnet.md: 27.8–29.2 % and 0.690–0.713 on these heads), with
  // room for a retrained network of the same quality; TKD's best is 33.7–37.3 % / 0.641–0.672.
  EXPECT_LT(net.nrmse, 33.0);
  EXPECT_GT(net.xsim, 0.67);
}

class TrainedNetwork : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = new qsmtest::ScratchDir;
    // Not the demo's cube: 72×88×64 voxels stretch the head differently on each axis, and B0 is
    // 15° off z (an oblique acquisition), found by `qsm run` from the affine.
    tilted_ = new Head(make_head(*work_, "tilted", {"--size", "72,88,64", "--b0-dir", "0.2,-0.17,0.965"}));
  }
  static void TearDownTestSuite() {
    delete tilted_;
    delete work_;
  }
  static qsmtest::ScratchDir* work_;
  static Head* tilted_;
};
qsmtest::ScratchDir* TrainedNetwork::work_ = nullptr;
Head* TrainedNetwork::tilted_ = nullptr;

TEST_F(TrainedNetwork, BeatsTkdOnAHeldOutHeadWholeVolumeAndTiled) {
  const Head& h = *tilted_;
  const Volume whole = run_invnet(*work_, h, h.dir + "/local_field.nii.gz", {}, "whole");
  expect_beats_tkd(h, whole, "whole volume");
  // Tiles of 32³ cores with an 8-voxel halo: the TKD prior is global (made once on the whole
  // volume), the network's receptive field is wider than the halo, so tiles differ from the
  // whole-volume run near tile borders — but must still beat TKD.
  const Volume tiled = run_invnet(*work_, h, h.dir + "/local_field.nii.gz", {"--tile", "32,8"}, "tiled");
  expect_beats_tkd(h, tiled, "tiles 32,8");
  const QsmMetrics between = compute_metrics(tiled, whole, &h.mask);
  EXPECT_LT(between.nrmse, 15.0) << "tiled vs whole-volume χ";
}

TEST_F(TrainedNetwork, BeatsTkdOnANoisyHeadOfAnotherSeed) {
  const Head h = make_head(*work_, "noisy", {"--size", "80,72,72", "--snr", "100", "--seed", "9"});
  const Volume chi = run_invnet(*work_, h, h.dir + "/local_field.nii.gz", {}, "noisy");
  expect_beats_tkd(h, chi, "noisy");
}

// The same field in Hz at 3 T (127.74 Hz/ppm): right with --b0 3, clearly wrong with --b0 7.
TEST_F(TrainedNetwork, AWrongFieldStrengthMakesTheResultWorse) {
  const Head& h = *tilted_;
  const double hz_per_ppm = 42.577478518 * 3.0;
  const std::string hz = write_scaled(*work_, h, hz_per_ppm, "field_hz");
  const QsmMetrics right =
      compute_metrics(run_invnet(*work_, h, hz, {"--unit", "hz", "--b0", "3"}, "hz_right"), h.chi, &h.mask);
  const QsmMetrics wrong =
      compute_metrics(run_invnet(*work_, h, hz, {"--unit", "hz", "--b0", "7"}, "hz_wrong"), h.chi, &h.mask);
  std::printf("Hz at 3 T: --b0 3 NRMSE %.1f %% XSIM %.3f; --b0 7 NRMSE %.1f %% XSIM %.3f\n", right.nrmse, right.xsim,
              wrong.nrmse, wrong.xsim);
  double t = 0;
  EXPECT_LT(right.nrmse, best_tkd(h, &t).nrmse);
  EXPECT_GT(wrong.nrmse, right.nrmse + 15.0);
  EXPECT_LT(wrong.xsim, right.xsim);
}

// A field in ppm declared as Hz: 1/127.74 of the field reaches the network.
TEST_F(TrainedNetwork, AWrongUnitMakesTheResultWorse) {
  const Head& h = *tilted_;
  const QsmMetrics right = compute_metrics(
      run_invnet(*work_, h, h.dir + "/local_field.nii.gz", {"--unit", "ppm"}, "ppm_right"), h.chi, &h.mask);
  const QsmMetrics wrong = compute_metrics(
      run_invnet(*work_, h, h.dir + "/local_field.nii.gz", {"--unit", "hz", "--b0", "3"}, "ppm_as_hz"), h.chi, &h.mask);
  std::printf("ppm: NRMSE %.1f %%; ppm declared Hz: NRMSE %.1f %%\n", right.nrmse, wrong.nrmse);
  EXPECT_GT(wrong.nrmse, right.nrmse + 30.0);
  // Almost nothing of χ's structure is left (predicting 0 scores 100 %; measured 89.9 %, the
  // rest is the offset the network adds on its own).
  EXPECT_GT(wrong.nrmse, 80.0);
}

}  // namespace
}  // namespace qsmcore
