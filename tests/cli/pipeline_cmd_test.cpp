// `qsm pipeline`: the command end to end on the head phantom's raw scan as `qsm phantom` writes it
// (3-D echo files with sidecars, or 4-D files with --te/--b0), its outputs, report and notes; and
// bad input refused with a message naming the file, with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "io/nifti.h"
#include "qsmcore/metrics.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;
using qsmtest::run_qsm;
using qsmtest::ScratchDir;

std::string joined(const fs::path& dir, const char* stem, int echoes) {
  std::string s;
  for (int e = 1; e <= echoes; ++e)
    s += (e > 1 ? "," : "") + (dir / (std::string(stem) + "_e" + std::to_string(e) + ".nii.gz")).string();
  return s;
}

// One raw scan for every test: 56³, 4 echoes, per-echo files with sidecars, Siemens phase.
const fs::path& scan_dir() {
  static ScratchDir dir;
  static const bool made = [] {
    const auto r = run_qsm({"phantom", "--raw", "--size", "56", "--layout", "echoes", "--phase-format", "siemens",
                            "--out", dir.file("scan")},
                           {}, dir.path());
    EXPECT_EQ(r.status, 0) << r.err;
    return true;
  }();
  (void)made;
  static const fs::path p = dir.path() / "scan";
  return p;
}

TEST(PipelineCommand, WritesTheFieldsMasksAndAReportFromEchoFilesAndSidecars) {
  ScratchDir out;
  const fs::path& s = scan_dir();
  const auto r =
      run_qsm({"pipeline", "--mag", joined(s, "magnitude", 4), "--phase", joined(s, "phase", 4), "--mask",
               (s / "mask.nii.gz").string(), "--inversion", "tkd", "--out", out.file("run"), "--threads", "2"},
              {}, out.path());
  ASSERT_EQ(r.status, 0) << r.err;
  // The Siemens integers were recognised and said so.
  EXPECT_NE(r.err.find("Siemens"), std::string::npos) << r.err;
  for (const char* f : {"total_field.nii.gz", "local_field.nii.gz", "mask.nii.gz", "brain_mask.nii.gz", "chi.nii.gz",
                        "r2star.nii.gz", "total_field.png", "local_field.png", "chi.png", "report.json"})
    EXPECT_TRUE(fs::exists(out.path() / "run" / f)) << f;
  const auto j = nlohmann::json::parse(qsmtest::read_text(out.file("run/report.json")));
  EXPECT_EQ(j["scan"]["te_from"], "sidecar");
  EXPECT_EQ(j["scan"]["b0_from"], "sidecar");
  ASSERT_EQ(j["scan"]["te_s"].size(), 4u);
  EXPECT_DOUBLE_EQ(j["scan"]["te_s"][3].get<double>(), 0.028);
  ASSERT_EQ(j["stages"].size(), 5u);  // mask, R2* (4 echoes), field map, background removal, inversion
  EXPECT_EQ(j["stages"][1]["stage"], "R2*");
  for (const auto& st : j["stages"]) {
    EXPECT_GT(st["seconds"].get<double>(), 0.0);
    EXPECT_GE(st["predicted_peak_bytes"].get<std::int64_t>(), st["measured_peak_bytes"].get<std::int64_t>()) << st;
  }
  const auto predicted = j["predicted_peak_bytes"].get<std::int64_t>(),
             measured = j["measured_peak_bytes"].get<std::int64_t>();
  EXPECT_GE(predicted, measured);
  EXPECT_GT(j["process_peak_rss_bytes"].get<std::int64_t>(), measured);
  // The total field in Hz: the phantom's truth (ppm at 7 T) up to a constant and the field map's error.
  Volume truth = io::read_nifti((s / "total_field.nii.gz").string());
  for (double& x : truth.values()) x *= 42.58 * 7.0;
  const Volume ours = io::read_nifti(out.file("run/total_field.nii.gz"));
  const Volume mask = io::read_nifti((s / "mask.nii.gz").string());
  EXPECT_LE(demeaned_nrmse(ours, truth, mask), 25.0);
}

// --inversion qsmcore-invnet: χ is what `qsm run qsmcore-invnet` makes of the command's own local
// field and mask (unreferenced here: --reference none, and without the data-consistency step:
// --no-consistency; the stages on the given mask alone: --field-in-mask-only), up to the f32 the files hold; --swi adds
// SWI and its mIP, --no-r2star drops R2*.
TEST(PipelineCommand, InvertsWithANetworkAsQsmRunDoes) {
  ScratchDir out;
  const fs::path& s = scan_dir();
  const auto r = run_qsm({"pipeline",
                          "--mag",
                          joined(s, "magnitude", 4),
                          "--phase",
                          joined(s, "phase", 4),
                          "--mask",
                          (s / "mask.nii.gz").string(),
                          "--field-in-mask-only",
                          "--inversion",
                          "qsmcore-invnet",
                          "--reference",
                          "none",
                          "--swi",
                          "--no-consistency",
                          "--no-r2star",
                          "--out",
                          out.file("run"),
                          "--threads",
                          "2",
                          "--quiet"},
                         {}, out.path());
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* f : {"chi.nii.gz", "swi.nii.gz", "swi_mip.nii.gz", "local_field.nii.gz"})
    EXPECT_TRUE(fs::exists(out.path() / "run" / f)) << f;
  EXPECT_FALSE(fs::exists(out.path() / "run" / "r2star.nii.gz"));
  const auto j = nlohmann::json::parse(qsmtest::read_text(out.file("run/report.json")));
  EXPECT_EQ(j["stages"].back()["method"], "qsmcore-invnet");
  EXPECT_EQ(j["options"]["reference"], "none");
  EXPECT_EQ(j["options"]["consistency_after_network"], false);
  const auto direct =
      run_qsm({"run", "qsmcore-invnet", "--in", out.file("run/local_field.nii.gz"), "--mask",
               out.file("run/mask.nii.gz"), "--out", out.file("direct.nii.gz"), "--threads", "2", "--quiet"},
              {}, out.path());
  ASSERT_EQ(direct.status, 0) << direct.err;
  const Volume ours = io::read_nifti(out.file("run/chi.nii.gz"));
  const Volume want = io::read_nifti(out.file("direct.nii.gz"));
  const Volume mask = io::read_nifti(out.file("run/mask.nii.gz"));
  double worst = 0.0, range = 0.0;
  for (std::int64_t i = 0; i < ours.voxels(); ++i) {
    const double w = mask.data()[i] > 0.5 ? want.data()[i] : 0.0;
    worst = std::max(worst, std::abs(ours.data()[i] - w));
    range = std::max(range, std::abs(w));
    ASSERT_TRUE(std::isfinite(ours.data()[i])) << i;
  }
  ASSERT_GT(range, 0.0);
  EXPECT_LE(worst, 1e-4 * range) << "largest difference " << worst << " ppm of a range of " << range;
}

// --mask-net hd-bet finds HD-BET's files as `qsm run` does ($QSM_MODEL_DIR_HD_BET; its reduced twin
// here, hence --no-verify) and the pipeline runs on its mask, or says the network found no brain.
TEST(PipelineCommand, FindsHdBetsFilesForItsMask) {
  const char* twins = std::getenv("QSM_TWINS_DIR");
  if (twins == nullptr) GTEST_SKIP() << "QSM_TWINS_DIR is not set";
  ScratchDir out;
  const fs::path& s = scan_dir();
  const auto r =
      run_qsm({"pipeline", "--mag", joined(s, "magnitude", 4), "--phase", joined(s, "phase", 4), "--mask-net", "hd-bet",
               "--no-verify", "--inversion", "none", "--out", out.file("run"), "--quiet"},
              {std::string("QSM_MODEL_DIR_HD_BET=") + twins}, out.path());
  if (r.status != 0) {  // a twin's random weights may find no brain: then it must say so
    EXPECT_NE(r.err.find("mask is empty"), std::string::npos) << r.err;
    return;
  }
  const auto j = nlohmann::json::parse(qsmtest::read_text(out.file("run/report.json")));
  EXPECT_EQ(j["stages"][0]["method"].get<std::string>().rfind("HD-BET", 0), 0u) << j["stages"][0]["method"];
}

TEST(PipelineCommand, FourDFilesNeedTheirEchoTimesAndFieldStrength) {
  ScratchDir out;
  const auto made = run_qsm({"phantom", "--size", "48", "--out", out.file("scan")}, {}, out.path());
  ASSERT_EQ(made.status, 0) << made.err;
  const std::vector<std::string> files{"--mag", out.file("scan/magnitude.nii.gz"), "--phase",
                                       out.file("scan/phase.nii.gz")};
  auto args = files;
  args.insert(args.end(), {"--out", out.file("run"), "--quiet"});
  const auto missing = run_qsm(
      [&] {
        auto a = args;
        a.insert(a.begin(), "pipeline");
        return a;
      }(),
      {}, out.path());
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("no echo time"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("phase.json"), std::string::npos) << missing.err;  // the sidecar it looked for
  EXPECT_FALSE(fs::exists(out.path() / "run"));
  auto ok = args;
  ok.insert(ok.begin(), "pipeline");
  ok.insert(ok.end(), {"--te", "0.004,0.012,0.020,0.028", "--b0", "7", "--mask", out.file("scan/mask.nii.gz")});
  const auto r = run_qsm(ok, {}, out.path());
  EXPECT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(qsmtest::read_text(out.file("run/report.json")));
  EXPECT_EQ(j["scan"]["te_from"], "--te");
}

TEST(PipelineCommand, RefusesBadInputNamingTheFileAndWritesNothing) {
  ScratchDir out;
  const fs::path& s = scan_dir();
  const auto other = run_qsm({"phantom", "--size", "40", "--out", out.file("other")}, {}, out.path());
  ASSERT_EQ(other.status, 0) << other.err;
  const std::string mags = joined(s, "magnitude", 4), phases = joined(s, "phase", 4);
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Bad> cases = {
      {{"--mask", out.file("other/mask.nii.gz")}, "other/mask.nii.gz"},  // a mask on another grid
      {{"--phase", joined(s, "phase", 3)}, "echo"},                      // 3 phase echoes, 4 magnitudes
      {{"--te", "0.004,0.012,0.010,0.028"}, "increase strictly"},        // TEs out of order
      {{"--mem-budget", "64MiB"}, "nothing was read"},                   // refused from the headers
      {{"--bfr", "fourier"}, "fourier"},                                 // an unknown method
      {{"--mask", out.file("other/mask.nii.gz"), "--mask-net", "hd-bet"}, "--mask-net"},
      {{"--inversion", "tv", "--no-consistency"}, "network inversion"},  // the step follows networks only
      {{"--field-in-mask-only"}, "--mask or --mask-net"},                // no given mask to keep to
  };
  for (const Bad& b : cases) {
    std::vector<std::string> a{"pipeline", "--mag", mags, "--out", out.file("run"), "--quiet"};
    bool phase_given = false;
    for (const auto& x : b.args) phase_given = phase_given || x == "--phase";
    if (!phase_given) a.insert(a.end(), {"--phase", phases});
    a.insert(a.end(), b.args.begin(), b.args.end());
    const auto r = run_qsm(a, {}, out.path());
    EXPECT_EQ(r.status, 2) << b.says << ": " << r.err;
    EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out.path() / "run")) << b.says;
  }
}

// --dicom: Siemens-style DICOM series of the raw phantom (tools/testdata/make_dicom.py), converted
// by dcm2niix and run with a mask from the data; the report carries the conversion's notes.
TEST(PipelineCommand, RunsFromADicomFolder) {
  if (std::system("command -v dcm2niix >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "dcm2niix is not installed (Debian: dcm2niix)";
  if (std::system("/usr/bin/python3 -c 'import pydicom, nibabel' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "pydicom or nibabel is missing (Debian: python3-pydicom, python3-nibabel)";
  ScratchDir d;
  const auto made = run_qsm({"phantom", "--raw", "--size", "48", "--out", d.file("scan")}, {}, d.path());
  ASSERT_EQ(made.status, 0) << made.err;
  const std::string to_npy =
      "/usr/bin/python3 -c \"import nibabel as nib, numpy as np, sys; s = sys.argv[1]; "
      "m = nib.load(s + '/magnitude.nii.gz').get_fdata(); np.save(s + '/mag.npy', m * (4000 / m.max())); "
      "np.save(s + '/phase.npy', nib.load(s + '/phase.nii.gz').get_fdata()); "
      "print(','.join(str(v) for v in nib.load(s + '/phase.nii.gz').affine[:3].ravel()))\" " +
      qsmtest::shell_quote(d.file("scan")) + " > " + qsmtest::shell_quote(d.file("affine.txt"));
  ASSERT_EQ(std::system(to_npy.c_str()), 0);
  std::string affine = qsmtest::read_text(d.file("affine.txt"));
  affine.erase(affine.find_last_not_of("\n") + 1);
  const std::string make = "/usr/bin/python3 " + std::string(QSM_SOURCE_DIR) + "/tools/testdata/make_dicom.py --out " +
                           qsmtest::shell_quote(d.file("dicom")) + " --magnitude " +
                           qsmtest::shell_quote(d.file("scan/mag.npy")) + " --phase " +
                           qsmtest::shell_quote(d.file("scan/phase.npy")) +
                           " --te 0.004,0.012,0.020,0.028 --b0 7 --affine " + affine + " >/dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0);
  const auto r = run_qsm({"pipeline", "--dicom", d.file("dicom"), "--out", d.file("run"), "--quiet"}, {}, d.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(qsmtest::read_text(d.file("run/report.json")));
  EXPECT_EQ(j["scan"]["echoes"], 4);
  EXPECT_EQ(j["scan"]["te_from"], "sidecar");
  EXPECT_DOUBLE_EQ(j["scan"]["b0_t"].get<double>(), 7.0);
  EXPECT_NE(j["scan"]["phase_scaling"]["assumed"].get<std::string>().find("Siemens"), std::string::npos);
  bool said = false;
  for (const auto& n : j["notes"]) said = said || n.get<std::string>().find("dcm2niix") != std::string::npos;
  EXPECT_TRUE(said) << j["notes"];
  EXPECT_GT(j["mask_voxels"].get<std::int64_t>(), 1000);
}

}  // namespace
}  // namespace qsmcore
