// `qsm pipeline BIDS_DIR --out DERIV`: a BIDS dataset the tests assemble from `qsm phantom --raw
// --layout bids` (sub-1 at 40³, sub-2 in ses-1 at 48³ with other noise) and three broken
// subjects (an echo without its phase, a missing sidecar, magnitude and phase disagreeing on an
// echo time). Oracles: the derivative names and sidecars BIDS-Derivatives and `qsm batch`'s
// reader ask for; a file-mode run of the same scan (the maps must be the same voxels); the
// phantom's truth (total field, brain mask); the refusal's own least budget; and npm's
// bids-validator on the raw dataset the phantom writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <tuple>

#include "batch/bids.h"
#include "cli/cli_test_util.h"
#include "io/nifti.h"
#include "qsmcore/metrics.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using qsmtest::QsmResult;
using qsmtest::read_text;
using qsmtest::run_qsm;
using qsmtest::ScratchDir;

json read_json(const fs::path& p) {
  return json::parse(read_text(p.string()));
}

void write_json(const fs::path& p, const json& j) {
  std::ofstream(p) << j.dump(2);
}

// Copies sub-<from>'s raw files to sub-<to> (names renamed), as a base for a broken subject.
void copy_subject(const fs::path& ds, const std::string& from, const std::string& to) {
  const fs::path dst = ds / ("sub-" + to) / "anat";
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(ds / ("sub-" + from) / "anat")) {
    std::string name = e.path().filename().string();
    name.replace(0, ("sub-" + from).size(), "sub-" + to);
    fs::copy_file(e.path(), dst / name);
  }
}

// The phantom written as sub-<sub> and moved into ds as sub-<sub>/ses-<ses>.
void add_session_subject(const fs::path& scratch, const fs::path& ds, const std::vector<std::string>& phantom_args,
                         const std::string& sub, const std::string& ses) {
  const fs::path tmp = scratch / ("phantom-" + sub);
  std::vector<std::string> args{"phantom", "--raw", "--layout", "bids", "--subject", sub, "--out", tmp.string()};
  args.insert(args.end(), phantom_args.begin(), phantom_args.end());
  const QsmResult r = run_qsm(args, {}, scratch);
  ASSERT_EQ(r.status, 0) << r.err;
  const fs::path dst = ds / ("sub-" + sub) / ("ses-" + ses) / "anat";
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(tmp / ("sub-" + sub) / "anat")) {
    std::string name = e.path().filename().string();
    name.insert(("sub-" + sub + "_").size(), "ses-" + ses + "_");
    fs::rename(e.path(), dst / name);
  }
}

const char* const kTe = "0.004,0.012,0.020";

void make_dataset(const fs::path& scratch, const fs::path& ds) {
  const QsmResult one = run_qsm(
      {"phantom", "--raw", "--layout", "bids", "--subject", "1", "--size", "40", "--te", kTe, "--out", ds.string()}, {},
      scratch);
  ASSERT_EQ(one.status, 0) << one.err;
  add_session_subject(scratch, ds, {"--size", "48", "--te", kTe, "--seed", "1"}, "2", "1");
  const fs::path anat3 = ds / "sub-3" / "anat", anat4 = ds / "sub-4" / "anat", anat5 = ds / "sub-5" / "anat";
  copy_subject(ds, "1", "3");  // echo 2 has no phase
  fs::remove(anat3 / "sub-3_echo-2_part-phase_MEGRE.nii.gz");
  fs::remove(anat3 / "sub-3_echo-2_part-phase_MEGRE.json");
  copy_subject(ds, "1", "4");  // a sidecar is missing
  fs::remove(anat4 / "sub-4_echo-3_part-mag_MEGRE.json");
  copy_subject(ds, "1", "5");  // complete, but echo 2's magnitude and phase disagree on its echo time
  json side = read_json(anat5 / "sub-5_echo-2_part-mag_MEGRE.json");
  side["EchoTime"] = 0.013;
  write_json(anat5 / "sub-5_echo-2_part-mag_MEGRE.json", side);
}

// The dataset, and one run of the whole of it, shared by the tests (made once).
struct Cohort {
  fs::path ds, deriv;
  QsmResult run;
};

const Cohort& cohort() {
  static ScratchDir dir;
  static const Cohort c = [] {
    Cohort k;
    k.ds = dir.path() / "ds";
    k.deriv = dir.path() / "deriv";
    make_dataset(dir.path(), k.ds);
    k.run = run_qsm({"pipeline", k.ds.string(), "--out", k.deriv.string(), "--inversion", "tkd", "--threads", "2"}, {},
                    dir.path());
    return k;
  }();
  return c;
}

std::vector<std::string> tree(const fs::path& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    names.push_back(e.path().lexically_relative(dir).string());
  std::sort(names.begin(), names.end());
  return names;
}

// The summary line of one run: "  ok      NAME …" or "  failed  NAME reason".
std::string summary_line(const std::string& out, const std::string& name) {
  std::istringstream s(out);
  for (std::string line; std::getline(s, line);) {
    std::istringstream w(line);
    std::string status, n;
    w >> status >> n;
    if ((status == "ok" || status == "failed") && n == name) return line;
  }
  return "";
}

// Largest |a − b| over the voxels; +inf for grids that differ or a non-finite value.
double max_difference(const Volume& a, const Volume& b) {
  if (a.dims() != b.dims() || a.frames() != b.frames()) return std::numeric_limits<double>::infinity();
  double m = 0.0;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a.data()[i] - b.data()[i]);
    if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

TEST(PipelineBids, GoodRunsWriteEveryDerivativeAndBrokenOnesFailNamingTheFile) {
  const Cohort& c = cohort();
  EXPECT_EQ(c.run.status, 2) << c.run.out << c.run.err;  // some runs failed
  EXPECT_NE(c.run.out.find("5 run(s): ok 2, failed 3"), std::string::npos) << c.run.out;
  EXPECT_NE(summary_line(c.run.out, "sub-1").find("ok"), std::string::npos) << c.run.out;
  EXPECT_NE(summary_line(c.run.out, "sub-2_ses-1").find("ok"), std::string::npos) << c.run.out;
  const std::vector<std::pair<std::string, std::string>> failures = {
      {"sub-3", "sub-3_echo-2_part-phase_MEGRE.nii.gz is missing"},
      {"sub-4", "sub-4_echo-3_part-mag_MEGRE.json is missing"},
      {"sub-5", "sub-5_echo-2_part-phase_MEGRE.json: the phase's EchoTime"},
  };
  for (const auto& [name, says] : failures) {
    const std::string line = summary_line(c.run.out, name);
    EXPECT_TRUE(line.starts_with("  failed")) << name << ": " << c.run.out;
    EXPECT_NE(line.find(says), std::string::npos) << line;
    EXPECT_NE(c.run.err.find(name + " failed: "), std::string::npos) << c.run.err;
    EXPECT_FALSE(fs::exists(c.deriv / name)) << name << " left files";
  }
  EXPECT_NE(c.run.err.find("3 of 5 run(s) failed: sub-3, sub-4, sub-5"), std::string::npos) << c.run.err;

  // R2* comes by default with the 3 echoes.
  const std::vector<std::string> maps = {"totalfield", "localfield", "mask", "desc-brain_mask", "Chimap", "R2starmap"};
  std::vector<std::string> expected = {".bidsignore", "dataset_description.json"};
  for (const char* dir : {"sub-1", "sub-1/anat", "sub-2", "sub-2/ses-1", "sub-2/ses-1/anat"}) expected.push_back(dir);
  for (const auto& [anat, run] : {std::pair{"sub-1/anat/", "sub-1"}, std::pair{"sub-2/ses-1/anat/", "sub-2_ses-1"}}) {
    for (const std::string& m : maps)
      for (const char* ext : {".json", ".nii.gz"}) expected.push_back(anat + (run + ("_" + m)) + ext);
    expected.push_back(anat + std::string(run) + "_report.json");
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(tree(c.deriv), expected);  // nothing else: no temporaries, nothing of the failed runs
}

TEST(PipelineBids, DatasetDescriptionSidecarsAndReportsSayWhatBidsAsks) {
  const Cohort& c = cohort();
  const json d = read_json(c.deriv / "dataset_description.json");
  EXPECT_EQ(d["DatasetType"], "derivative");
  EXPECT_FALSE(d["BIDSVersion"].get<std::string>().empty());
  ASSERT_EQ(d["GeneratedBy"].size(), 1u);
  EXPECT_EQ(d["GeneratedBy"][0]["Name"], "qsmcore");
  const QsmResult version = run_qsm({"--version"}, {}, c.deriv.parent_path());
  EXPECT_NE(version.out.find(d["GeneratedBy"][0]["Version"].get<std::string>()), std::string::npos) << version.out;
  EXPECT_EQ(d["SourceDatasets"][0]["URL"], "file://" + fs::absolute(c.ds).lexically_normal().string());

  const fs::path anat = c.deriv / "sub-2" / "ses-1" / "anat";
  const std::vector<std::pair<std::string, std::string>> units = {
      {"Chimap", "ppm"}, {"localfield", "ppm"}, {"totalfield", "Hz"}, {"R2starmap", "Hz"}};
  for (const auto& [suffix, unit] : units) {
    const json s = read_json(anat / ("sub-2_ses-1_" + suffix + ".json"));
    EXPECT_EQ(s["Units"], unit) << suffix;
    ASSERT_EQ(s["Sources"].size(), 6u) << suffix;  // 3 echoes × magnitude and phase
    for (const auto& src : s["Sources"]) {
      const std::string uri = src.get<std::string>();
      ASSERT_TRUE(uri.starts_with("bids:raw:")) << uri;
      EXPECT_TRUE(fs::exists(c.ds / uri.substr(9))) << uri;  // each names a file of the raw dataset
    }
    EXPECT_EQ(s["qsmcore"]["Options"]["inversion"], "tkd");
    ASSERT_EQ(s["qsmcore"]["Steps"].size(), 5u);  // mask, R2*, field map, background removal, inversion
    EXPECT_EQ(s["qsmcore"]["Steps"][1]["Name"], "R2*");
    EXPECT_EQ(s["qsmcore"]["Steps"][4]["Name"], "inversion");
  }
  EXPECT_EQ(read_json(anat / "sub-2_ses-1_mask.json")["Type"], "Brain");

  const json r = read_json(anat / "sub-2_ses-1_report.json");
  const auto predicted = r["predicted_peak_bytes"].get<std::int64_t>(),
             measured = r["measured_peak_bytes"].get<std::int64_t>();
  EXPECT_GT(measured, 48 * 48 * 48 * 3 * 2 * 8);  // at least the scan's echoes as f64
  EXPECT_GE(predicted, measured);
  EXPECT_GT(r["process_peak_rss_bytes"].get<std::int64_t>(), measured);
  ASSERT_EQ(r["stages"].size(), 5u);
  for (const auto& st : r["stages"]) {
    EXPECT_GT(st["seconds"].get<double>(), 0.0) << st;
    EXPECT_GE(st["predicted_peak_bytes"].get<std::int64_t>(), st["measured_peak_bytes"].get<std::int64_t>()) << st;
  }
  EXPECT_EQ(r["bids"]["run"], "sub-2_ses-1");
  EXPECT_EQ(r["scan"]["dims"], json({48, 48, 48}));
  EXPECT_EQ(r["scan"]["te_from"], "sidecar");
}

// The BIDS run of sub-2 and a file-mode run of the same six files give the same maps, and the
// maps are the phantom's (its truth as `qsm phantom` wrote it).
TEST(PipelineBids, MapsEqualAFileModeRunOfTheSameScanAndFollowTheTruth) {
  const Cohort& c = cohort();
  ScratchDir out;
  std::string mags, phases;
  for (int e = 1; e <= 3; ++e) {
    const std::string stem = (c.ds / "sub-2/ses-1/anat/sub-2_ses-1_echo-").string() + std::to_string(e);
    mags += (e > 1 ? "," : "") + stem + "_part-mag_MEGRE.nii.gz";
    phases += (e > 1 ? "," : "") + stem + "_part-phase_MEGRE.nii.gz";
  }
  const QsmResult f = run_qsm({"pipeline", "--mag", mags, "--phase", phases, "--inversion", "tkd", "--threads", "2",
                               "--out", out.file("run"), "--quiet", "--no-preview"},
                              {}, out.path());
  ASSERT_EQ(f.status, 0) << f.err;
  const fs::path anat = c.deriv / "sub-2/ses-1/anat";
  const std::vector<std::pair<std::string, std::string>> pairs = {{"total_field", "totalfield"},
                                                                  {"local_field", "localfield"},
                                                                  {"mask", "mask"},
                                                                  {"brain_mask", "desc-brain_mask"},
                                                                  {"chi", "Chimap"},
                                                                  {"r2star", "R2starmap"}};
  for (const auto& [file, suffix] : pairs) {
    const Volume a = io::read_nifti(out.file("run/" + file + ".nii.gz"));
    const Volume b = io::read_nifti((anat / ("sub-2_ses-1_" + suffix + ".nii.gz")).string());
    EXPECT_LE(max_difference(a, b), 1e-6) << file;
    EXPECT_EQ(a.affine().m, b.affine().m) << file;
  }
  // Against the truth (sub-1's, which the dataset keeps under derivatives/qsm-phantom): the brain
  // mask overlaps the true one, and the total field (Hz) is the true one (ppm at 7 T) up to a
  // constant inside both.
  const fs::path truth1 = c.ds / "derivatives/qsm-phantom/sub-1/anat";
  const Volume true_mask = io::read_nifti((truth1 / "sub-1_desc-brain_mask.nii.gz").string());
  const Volume ours = io::read_nifti((c.deriv / "sub-1/anat/sub-1_desc-brain_mask.nii.gz").string());
  Volume both = Volume::zeros_like(true_mask);
  double n_true = 0, n_ours = 0, n_both = 0;
  for (std::int64_t i = 0; i < both.size(); ++i) {
    const bool t = true_mask.data()[i] > 0.5, o = ours.data()[i] > 0.5;
    n_true += t;
    n_ours += o;
    n_both += t && o;
    both.data()[i] = t && o ? 1.0 : 0.0;
  }
  EXPECT_GE(2.0 * n_both / (n_true + n_ours), 0.85);  // Dice
  Volume field = io::read_nifti((truth1 / "sub-1_desc-total_fieldmap.nii.gz").string());
  for (double& x : field.values()) x *= 42.577 * 7.0;
  const Volume total = io::read_nifti((c.deriv / "sub-1/anat/sub-1_totalfield.nii.gz").string());
  EXPECT_LE(demeaned_nrmse(total, field, both), 25.0);
}

// `qsm batch`'s BIDS reader (what `qsm batch plan DERIV --model …` reads) finds the local field,
// its mask, the total field and χ of every run written, and no row for the runs that failed.
TEST(PipelineBids, QsmBatchReadsTheDerivatives) {
  const Cohort& c = cohort();
  NetworkNeeds local;
  local.field = true;
  local.field_kind = "local field";
  local.mask = true;
  const auto rows = batch::read_bids(c.deriv.string(), local);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& [row, run, anat] :
       {std::tuple{&rows[0], "sub-1", "sub-1/anat/"}, std::tuple{&rows[1], "sub-2_ses-1", "sub-2/ses-1/anat/"}}) {
    EXPECT_EQ(row->id, run);
    EXPECT_EQ(row->error, "") << run;
    EXPECT_EQ(row->values.at("in"), (c.deriv / (anat + std::string(run) + "_localfield.nii.gz")).string());
    EXPECT_EQ(row->values.at("unit"), "ppm");
    EXPECT_EQ(row->values.at("mask"), (c.deriv / (anat + std::string(run) + "_mask.nii.gz")).string());
  }
  NetworkNeeds total;
  total.field = true;
  total.field_kind = "total field";
  total.qsm = true;
  const auto trows = batch::read_bids(c.deriv.string(), total);
  ASSERT_EQ(trows.size(), 2u);
  EXPECT_TRUE(trows[0].values.at("in").ends_with("sub-1_totalfield.nii.gz"));
  EXPECT_EQ(trows[0].values.at("unit"), "hz");
  EXPECT_TRUE(trows[0].values.at("qsm").ends_with("sub-1_Chimap.nii.gz"));
}

TEST(PipelineBids, ParticipantAndSessionFiltersChooseTheRuns) {
  const Cohort& c = cohort();
  ScratchDir out;
  struct Case {
    std::vector<std::string> args;
    int status;
    std::vector<std::string> written;  // the subject folders written
  };
  const std::vector<Case> cases = {
      {{"--participant-label", "sub-2", "--session", "1"}, 0, {"sub-2"}},
      {{"--participant-label", "1"}, 0, {"sub-1"}},
      {{"--session", "ses-1"}, 0, {"sub-2"}},          // subjects without that session are left out
      {{"--participant-label", "1,3"}, 2, {"sub-1"}},  // sub-3 is broken
      {{"--participant-label", "1", "4"}, 2, {"sub-1"}},
  };
  int k = 0;
  for (const Case& cs : cases) {
    const fs::path d = out.path() / ("d" + std::to_string(k++));
    std::vector<std::string> a{"pipeline", c.ds.string(), "--out", d.string(), "--inversion", "none", "--quiet"};
    a.insert(a.end(), cs.args.begin(), cs.args.end());
    const QsmResult r = run_qsm(a, {}, out.path());
    EXPECT_EQ(r.status, cs.status) << cs.args[0] << " " << cs.args[1] << ": " << r.err;
    std::vector<std::string> subjects;
    for (const std::string& n : qsmtest::listing(d))
      if (n.starts_with("sub-")) subjects.push_back(n);
    EXPECT_EQ(subjects, cs.written) << cs.args[0] << " " << cs.args[1];
  }
  // Filters that name nothing are refused before anything runs.
  for (const auto& [args, says] : {std::pair{std::vector<std::string>{"--participant-label", "9"}, "no sub-9 folder"},
                                   std::pair{std::vector<std::string>{"--session", "2"}, "no sub-*/ses-2"},
                                   std::pair{std::vector<std::string>{"--participant-label", "sub_1"}, "letters"}}) {
    std::vector<std::string> a{"pipeline", c.ds.string(), "--out", out.file("none"), "--quiet"};
    a.insert(a.end(), args.begin(), args.end());
    const QsmResult r = run_qsm(a, {}, out.path());
    EXPECT_EQ(r.status, 2) << says;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out.path() / "none")) << says;
  }
}

// The least budget a refused run needs, as its message says.
std::int64_t least_budget(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex("--mem-budget ([0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

// Each run is predicted and refused on its own: a budget between what sub-1 (40³) and sub-2
// (48³) need runs the first and refuses the second before reading it.
TEST(PipelineBids, EachRunIsRefusedOnItsOwnBudget) {
  const Cohort& c = cohort();
  ScratchDir out;
  std::int64_t need[2] = {0, 0};  // 50 MiB: above what the process holds outside the engine, below any run
  for (int s = 0; s < 2; ++s) {
    const QsmResult r = run_qsm({"pipeline", c.ds.string(), "--out", out.file("tiny"), "--mem-budget", "50MiB",
                                 "--participant-label", s == 0 ? "1" : "2", "--inversion", "none", "--quiet"},
                                {}, out.path());
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("nothing was read"), std::string::npos) << r.err;
    need[s] = least_budget(r.err);
  }
  EXPECT_FALSE(fs::exists(out.path() / "tiny"));
  ASSERT_GT(need[0], 0);
  ASSERT_GT(need[1], need[0]);
  const std::string mid = std::to_string((need[0] + need[1]) / 2);
  const QsmResult r = run_qsm({"pipeline", c.ds.string(), "--out", out.file("mid"), "--mem-budget", mid,
                               "--participant-label", "1,2", "--inversion", "none"},
                              {}, out.path());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(summary_line(r.out, "sub-1").starts_with("  ok")) << r.out;
  EXPECT_NE(summary_line(r.out, "sub-2_ses-1").find("nothing was read"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(out.path() / "mid/sub-1/anat/sub-1_localfield.nii.gz"));
  EXPECT_FALSE(fs::exists(out.path() / "mid/sub-2"));
}

TEST(PipelineBids, RefusesOptionsThatDoNotFitADataset) {
  const Cohort& c = cohort();
  ScratchDir out;
  fs::create_directories(out.path() / "plain");
  const std::string mag = (c.ds / "sub-1/anat/sub-1_echo-1_part-mag_MEGRE.nii.gz").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{c.ds.string(), "--mag", mag, "--phase", mag, "--out", out.file("o")}, "give one"},
      {{c.ds.string(), "--dicom", out.file("plain"), "--out", out.file("o")}, "give one"},
      {{c.ds.string(), "--report", out.file("r.json"), "--out", out.file("o")}, "--report"},
      {{c.ds.string(), "--out", c.ds.string()}, "the BIDS dataset itself"},
      {{out.file("plain"), "--out", out.file("o")}, "no dataset_description.json"},
      {{"--mag", mag, "--phase", mag, "--participant-label", "1", "--out", out.file("o")}, "give BIDS_DIR"},
  };
  for (const auto& [args, says] : cases) {
    std::vector<std::string> a{"pipeline", "--quiet"};
    a.insert(a.end(), args.begin(), args.end());
    const QsmResult r = run_qsm(a, {}, out.path());
    EXPECT_EQ(r.status, 2) << says << ": " << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out.path() / "o")) << says;
  }
}

// npm's bids-validator (1.x, run offline) passes the raw dataset `qsm phantom --layout bids`
// writes, in both phase formats, and fails one with a misnamed file (so the check can fail).
TEST(PipelineBids, BidsValidatorPassesThePhantomsRawDataset) {
  const std::string validator = std::string(QSM_SOURCE_DIR) + "/node_modules/.bin/bids-validator";
  if (std::system("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (!fs::exists(validator))
    GTEST_SKIP() << "bids-validator is not in node_modules (npm install --ignore-scripts in " QSM_SOURCE_DIR ")";
  ScratchDir d;
  const auto validate = [&](const fs::path& ds, json& report) {
    const std::string cmd = qsmtest::shell_quote(validator) + " --json " + qsmtest::shell_quote(ds.string()) + " >" +
                            qsmtest::shell_quote(d.file("v.json")) + " 2>/dev/null";
    const int rc = std::system(cmd.c_str());
    report = json::parse(read_text(d.file("v.json")), nullptr, false);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  for (const char* format : {"rad", "siemens"}) {
    const fs::path ds = d.path() / format;
    const QsmResult made = run_qsm(
        {"phantom", "--raw", "--layout", "bids", "--size", "32", "--phase-format", format, "--out", ds.string()}, {},
        d.path());
    ASSERT_EQ(made.status, 0) << made.err;
    json report;
    EXPECT_EQ(validate(ds, report), 0) << format;
    ASSERT_FALSE(report.is_discarded()) << read_text(d.file("v.json"));
    EXPECT_EQ(report["issues"]["errors"], json::array()) << format << ": " << report["issues"]["errors"].dump(1);
  }
  const fs::path bad = d.path() / "rad";
  fs::rename(bad / "sub-phantom/anat/sub-phantom_echo-1_part-mag_MEGRE.nii.gz",
             bad / "sub-phantom/anat/sub-phantom_echo-1_part-magnitude_MEGRE.nii.gz");
  json report;
  EXPECT_NE(validate(bad, report), 0);
  EXPECT_FALSE(report["issues"]["errors"].empty());
}

}  // namespace
}  // namespace qsmcore
