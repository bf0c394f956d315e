// `qsm phantom`'s raw-scan files: --layout echoes (one 3-D file per echo and part, each with
// its sidecar), --layout bids (a BIDS MEGRE dataset with the truth as a derivative dataset),
// --phase-format siemens (int16 with Siemens' scaling, checked against the radians of the same
// run), --raw's options and default noise as phantom.json records them, and bad options that
// leave nothing behind. Each layout's volumes are compared with the 4-D layout of the same
// options, the format today's readers of `qsm phantom` use.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numbers>

#include "cli/cli_test_util.h"
#include "io/nifti.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<double> kTe{0.003, 0.0075, 0.0125};
const std::string kTeText = "0.003,0.0075,0.0125";

// `qsm phantom` at 24³ with three echoes and the given options; the status must be 0.
void phantom(const qsmtest::ScratchDir& work, const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> args = {"phantom", "--out", out, "--size", "24", "--te", kTeText};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = qsmtest::run_qsm(args, {}, work.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
}

json read_json(const fs::path& p) {
  return json::parse(qsmtest::read_text(p.string()));
}

Volume read4d(const fs::path& p) {
  return io::read_nifti(p.string(), io::NiftiReadOptions{true, false});
}

// Frame e of a 4-D volume equals a 3-D volume, value for value (both were float32 on disk).
void expect_frame(const Volume& four_d, std::int64_t e, const Volume& three_d, const std::string& what) {
  ASSERT_EQ(three_d.frames(), 1) << what;
  ASSERT_EQ(three_d.voxels(), four_d.voxels()) << what;
  for (std::int64_t i = 0; i < three_d.voxels(); ++i)
    ASSERT_EQ(three_d.data()[i], four_d.frame(e)[i]) << what << " " << i;
}

void expect_echo_sidecar(const json& j, std::size_t e, const char* units, const std::string& what) {
  EXPECT_EQ(j.at("EchoTime").get<double>(), kTe[e]) << what;  // seconds, as --te gave them
  EXPECT_EQ(j.at("EchoNumber").get<int>(), int(e) + 1) << what;
  EXPECT_EQ(j.at("MagneticFieldStrength").get<double>(), 7.0) << what;
  EXPECT_EQ(j.at("B0_dir").get<std::vector<double>>(), (std::vector<double>{0, 0, 1})) << what;
  if (units != nullptr) {
    EXPECT_EQ(j.at("Units"), units) << what;
  } else {
    EXPECT_FALSE(j.contains("Units")) << what;
  }
}

void expect_no_temporaries(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".qsm-"), std::string::npos) << e.path();
}

TEST(PhantomLayouts, EchoesLayoutWritesOneFileAndSidecarPerEcho) {
  qsmtest::ScratchDir work;
  const fs::path four = work.file("four"), echoes = work.file("echoes");
  phantom(work, four.string(), {"--raw", "--seed", "5"});
  phantom(work, echoes.string(), {"--raw", "--seed", "5", "--layout", "echoes"});
  const Volume mag = read4d(four / "magnitude.nii.gz"), phase = read4d(four / "phase.nii.gz");
  for (std::size_t e = 0; e < kTe.size(); ++e) {
    const std::string n = std::to_string(e + 1);
    expect_frame(mag, std::int64_t(e), io::read_nifti((echoes / ("magnitude_e" + n + ".nii.gz")).string()), "mag " + n);
    expect_frame(phase, std::int64_t(e), io::read_nifti((echoes / ("phase_e" + n + ".nii.gz")).string()), "phase " + n);
    expect_echo_sidecar(read_json(echoes / ("magnitude_e" + n + ".json")), e, nullptr, "magnitude_e" + n);
    expect_echo_sidecar(read_json(echoes / ("phase_e" + n + ".json")), e, "rad", "phase_e" + n);
  }
  // The truth beside the scan, as in the 4-D layout.
  for (const char* f : {"chi.nii.gz", "total_field.nii.gz", "local_field.nii.gz", "mask.nii.gz"})
    EXPECT_EQ(qsmtest::read_text((echoes / f).string()), qsmtest::read_text((four / f).string())) << f;
  const json rec = read_json(echoes / "phantom.json");
  EXPECT_EQ(rec.at("Layout"), "echoes");
  EXPECT_EQ(qsmtest::listing(echoes).size(), 4u * kTe.size() + 5u);  // nothing else
  expect_no_temporaries(echoes);
}

TEST(PhantomLayouts, RawTurnsOnTheHeadAirAndNoiseAndRecordsThem) {
  qsmtest::ScratchDir work;
  const auto record = [&](const std::string& name, std::vector<std::string> extra) {
    phantom(work, work.file(name), extra);
    return read_json(fs::path(work.file(name)) / "phantom.json");
  };
  const json plain = record("plain", {});
  EXPECT_EQ(plain.at("Extracerebral"), false);
  EXPECT_EQ(plain.at("AirOutside"), false);
  EXPECT_EQ(plain.at("PeakSNR"), "inf");
  const json raw = record("raw", {"--raw"});
  EXPECT_EQ(raw.at("Extracerebral"), true);
  EXPECT_EQ(raw.at("AirOutside"), true);
  EXPECT_EQ(raw.at("PhaseOffset"), true);
  EXPECT_EQ(raw.at("PeakSNR"), 100.0);
  EXPECT_EQ(record("raw30", {"--raw", "--snr", "30"}).at("PeakSNR"), 30.0);
  EXPECT_EQ(record("raw0", {"--raw", "--snr", "0"}).at("PeakSNR"), "inf");
  // With the head around the brain, signal (and noise) reach beyond the brain mask.
  const Volume mask = io::read_nifti(work.file("raw0") + "/mask.nii.gz");
  const Volume mag = read4d(fs::path(work.file("raw0")) / "magnitude.nii.gz");
  std::int64_t outside = 0;
  for (std::int64_t i = 0; i < mask.voxels(); ++i) outside += mask.data()[i] == 0.0 && mag.data()[i] > 0.0;
  EXPECT_GT(outside, 500);
}

TEST(PhantomLayouts, SiemensPhaseIsInt16IntegersThatAreTheRadiansOfTheSameRun) {
  qsmtest::ScratchDir work;
  const fs::path rad = work.file("rad"), siemens = work.file("siemens");
  phantom(work, rad.string(), {"--raw", "--seed", "3"});
  phantom(work, siemens.string(), {"--raw", "--seed", "3", "--phase-format", "siemens"});
  io::NiftiInfo info;
  const Volume s = io::read_nifti((siemens / "phase.nii.gz").string(), io::NiftiReadOptions{true, false}, &info);
  EXPECT_EQ(info.datatype_name, "INT16");
  EXPECT_EQ(info.scl_slope, 2.0);
  EXPECT_EQ(info.scl_inter, -4096.0);
  const Volume r = read4d(rad / "phase.nii.gz");
  ASSERT_EQ(s.size(), r.size());
  double lo = INFINITY, hi = -INFINITY;
  for (std::int64_t i = 0; i < s.size(); ++i) {
    const double v = s.data()[i];
    ASSERT_EQ(v, std::floor(v)) << i;
    ASSERT_EQ(std::fmod(v, 2.0), 0.0) << "Siemens' scaled values are even: " << v;
    ASSERT_TRUE(v >= -4096.0 && v <= 4094.0) << v;
    // Quantised to π/4096 (half a step of 2π/4096), plus float32's rounding of the radians.
    ASSERT_LE(std::abs(wrap_phase(v * std::numbers::pi / 4096.0 - r.data()[i])), std::numbers::pi / 4096.0 + 1e-6) << i;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_LT(lo, -4000.0);  // a wrapped phase fills the range
  EXPECT_GT(hi, 4000.0);
  EXPECT_EQ(read_json(siemens / "phantom.json").at("PhaseFormat"), "siemens");
  // Per-echo files carry the same integers and say their units are arbitrary.
  const fs::path echoes = work.file("echoes");
  phantom(work, echoes.string(), {"--raw", "--seed", "3", "--phase-format", "siemens", "--layout", "echoes"});
  expect_frame(s, 2, io::read_nifti((echoes / "phase_e3.nii.gz").string()), "siemens echo 3");
  expect_echo_sidecar(read_json(echoes / "phase_e3.json"), 2, "arbitrary", "phase_e3");
}

TEST(PhantomLayouts, BidsLayoutIsARawDatasetWithItsTruthAsADerivative) {
  qsmtest::ScratchDir work;
  const fs::path four = work.file("four"), bids = work.file("bids");
  phantom(work, four.string(), {"--raw"});
  phantom(work, bids.string(), {"--raw", "--layout", "bids", "--subject", "s01"});
  const json dd = read_json(bids / "dataset_description.json");
  EXPECT_EQ(dd.at("BIDSVersion"), "1.9.0");
  EXPECT_EQ(dd.at("DatasetType"), "raw");
  EXPECT_FALSE(dd.at("Name").get<std::string>().empty());
  EXPECT_TRUE(fs::exists(bids / "README"));
  EXPECT_EQ(qsmtest::read_text((bids / "participants.tsv").string()), "participant_id\nsub-s01\n");
  const fs::path anat = bids / "sub-s01" / "anat";
  const Volume mag = read4d(four / "magnitude.nii.gz"), phase = read4d(four / "phase.nii.gz");
  for (std::size_t e = 0; e < kTe.size(); ++e) {
    const std::string stem = "sub-s01_echo-" + std::to_string(e + 1);
    expect_frame(mag, std::int64_t(e), io::read_nifti((anat / (stem + "_part-mag_MEGRE.nii.gz")).string()), stem);
    expect_frame(phase, std::int64_t(e), io::read_nifti((anat / (stem + "_part-phase_MEGRE.nii.gz")).string()), stem);
    expect_echo_sidecar(read_json(anat / (stem + "_part-mag_MEGRE.json")), e, nullptr, stem);
    expect_echo_sidecar(read_json(anat / (stem + "_part-phase_MEGRE.json")), e, "rad", stem);
  }
  EXPECT_EQ(qsmtest::listing(anat).size(), 4u * kTe.size());
  const fs::path deriv = bids / "derivatives" / "qsm-phantom";
  const json ddd = read_json(deriv / "dataset_description.json");
  EXPECT_EQ(ddd.at("DatasetType"), "derivative");
  EXPECT_FALSE(ddd.at("GeneratedBy").at(0).at("Name").get<std::string>().empty());
  const fs::path truth = deriv / "sub-s01" / "anat";
  const std::pair<const char*, const char*> same[] = {{"sub-s01_Chimap.nii.gz", "chi.nii.gz"},
                                                      {"sub-s01_desc-brain_mask.nii.gz", "mask.nii.gz"},
                                                      {"sub-s01_desc-total_fieldmap.nii.gz", "total_field.nii.gz"},
                                                      {"sub-s01_desc-local_fieldmap.nii.gz", "local_field.nii.gz"}};
  for (const auto& [name, as] : same) {
    const Volume a = io::read_nifti((truth / name).string()), b = io::read_nifti((four / as).string());
    expect_frame(b, 0, a, name);
  }
  EXPECT_EQ(read_json(truth / "sub-s01_Chimap.json").at("Units"), "ppm");
  EXPECT_EQ(read_json(truth / "sub-s01_desc-total_fieldmap.json").at("Units"), "ppm");
  EXPECT_EQ(read_json(deriv / "phantom.json").at("Subject"), "s01");
  expect_no_temporaries(bids);
}

TEST(PhantomLayouts, BadOptionsAreRefusedAndLeaveNothingWritten) {
  qsmtest::ScratchDir work;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--layout", "nested"}, "--layout"},
      {{"--phase-format", "degrees"}, "--phase-format"},
      {{"--layout", "bids", "--subject", "s_01"}, "--subject"},
      {{"--subject", "s01"}, "--layout bids"},
      {{"--layout", "bids", "--preview"}, "--preview"},
      {{"--raw", "--te", "0.004,-0.01"}, "echo times"},
      {{"--raw", "--snr", "-5"}, "--snr"},
  };
  for (const auto& [extra, want] : cases) {
    const std::string out = work.file("out");
    std::vector<std::string> args = {"phantom", "--out", out, "--size", "24"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = qsmtest::run_qsm(args, {}, work.path());
    EXPECT_NE(r.status, 0) << want;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << want;
  }
}

}  // namespace
}  // namespace qsmcore
