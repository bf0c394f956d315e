// `qsm batch plan --pipeline` from headers alone, against what it must guarantee: each file of a
// per-echo list made absolute; a scan's echoes counted over its files; the bytes a run holds
// before its stages (the scan's echoes as f64, magnitude and phase, and a given mask: counted
// here from the grid) and the request that admits them with the stages' predicted peak within
// the task's own default budget (process_limits' reserve as the oracle); every broken scan
// refused with the file that is broken named, the others planned; the plan read back as a
// pipeline plan, and a plan written before pipelines existed read as a network's.
#include "batch/pipeline_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "batch/manifest.h"
#include "batch/plan.h"
#include "io/nifti.h"
#include "qsmcore/error.h"
#include "system/process_limits.h"

namespace {

namespace fs = std::filesystem;
using namespace qsmcore;
using namespace qsmcore::batch;
constexpr std::int64_t kMiB = std::int64_t{1} << 20;

struct Folder {
  fs::path dir;
  Folder() {
    std::string t = (fs::temp_directory_path() / "qsm-pipeline-plan-test-XXXXXX").string();
    dir = ::mkdtemp(t.data());
  }
  ~Folder() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  std::string text(const std::string& name, const std::string& body) const {
    fs::create_directories((dir / name).parent_path());
    std::ofstream(dir / name) << body;
    return path(name);
  }
  // A NIfTI of `dims` with `frames` frames (values do not matter: the plan reads headers).
  std::string nifti(const std::string& name, const Dims3& dims, std::int64_t frames = 1) const {
    fs::create_directories((dir / name).parent_path());
    io::write_nifti(path(name), Volume::zeros(dims, Geometry::isotropic(1.0), frames));
    return path(name);
  }
  // An echo's image with its sidecar (EchoTime in s, MagneticFieldStrength in T).
  std::string echo(const std::string& name, const Dims3& dims, double te) const {
    text(name + ".json", "{\"EchoTime\": " + std::to_string(te) + ", \"MagneticFieldStrength\": 3}");
    return nifti(name + ".nii", dims);
  }
};

PlanOptions pipeline_options(const Folder& f, const std::string& manifest) {
  PlanOptions o;
  o.pipeline = true;
  o.manifest = manifest;
  o.out_dir = f.path("batch");
  o.qsm = "/usr/bin/qsm";
  o.seconds_per_voxel = 1e-6;  // no calibration run: these scans are headers only
  o.max_array_size = 100;      // no scontrol
  o.pipeline_opts.invert = true;
  o.pipeline_opts.engine.threads = 1;
  o.pipeline_opts.engine.mem_budget = 0;
  o.run_args = {"--inversion", "tv", "--threads", "1"};
  return o;
}

const SubjectPlan& subject(const BatchPlan& p, const std::string& id) {
  const SubjectPlan* s = p.find(id);
  if (s == nullptr) throw std::runtime_error("no subject " + id);
  return *s;
}

TEST(PipelineManifest, PerEchoListsBecomeAbsoluteFileByFile) {
  Folder f;
  const std::string m = f.text("cohort/m.tsv",
                               "id\tmagnitude\tphase\tmask\tte\tb0\n"
                               "a\tm1.nii,/abs/m2.nii\tp1.nii,../p2.nii\tmask.nii\t0.004,0.008\t3\n"
                               "b\tmag4d.nii\t\t\t\t\n");
  const auto rows = read_pipeline_manifest(m);
  ASSERT_EQ(rows.size(), 2u);
  const fs::path c = f.dir / "cohort";
  EXPECT_EQ(rows[0].values.at("magnitude"), (c / "m1.nii").string() + ",/abs/m2.nii");
  EXPECT_EQ(rows[0].values.at("phase"), (c / "p1.nii").string() + "," + (f.dir / "p2.nii").string());
  EXPECT_EQ(rows[0].values.at("mask"), (c / "mask.nii").string());
  EXPECT_EQ(rows[0].values.at("te"), "0.004,0.008");  // not a path
  EXPECT_TRUE(rows[0].error.empty());
  EXPECT_NE(rows[1].error.find("names no phase"), std::string::npos) << rows[1].error;
}

TEST(PipelineManifest, RefusesANetworkManifestNamingTheFile) {
  Folder f;
  for (const std::string& text : {std::string("id\tin\tmask\nx\ty\tz\n"), std::string("id\tmagnitude\nx\ty\n")}) {
    const std::string m = f.text("m.tsv", text);
    try {
      read_pipeline_manifest(m);
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what();
    }
  }
}

// Five scans on 12x10x8: per-echo files with sidecars, a 4-D pair with te and b0 columns and a
// mask, and four broken ones.
struct Cohort {
  Folder f;
  std::string manifest, missing_echo, other_grid_mag, bad_mask;
  Cohort() {
    const Dims3 d{12, 10, 8};
    std::string mag, phase;
    for (int e = 1; e <= 3; ++e) {
      mag += (e > 1 ? "," : "") + f.echo("echoes/mag_e" + std::to_string(e), d, 0.004 * e);
      phase += (e > 1 ? "," : "") + f.echo("echoes/phase_e" + std::to_string(e), d, 0.004 * e);
    }
    const std::string mag4 = f.nifti("four/mag.nii", d, 4), phase4 = f.nifti("four/phase.nii", d, 4);
    const std::string mask = f.nifti("four/mask.nii", d);
    missing_echo = f.path("echoes/phase_e9.nii");
    other_grid_mag = f.nifti("other/mag.nii", {12, 10, 9}, 4);
    bad_mask = f.nifti("other/mask.nii", {12, 10, 9});
    const std::string nosidecar = f.nifti("other/phase_nocar.nii", d, 4);
    manifest = f.text("cohort.tsv",
                      "id\tmagnitude\tphase\tmask\tte\tb0\n"
                      "echoes\t" +
                          mag + "\t" + phase +
                          "\t\t\t\n"
                          "four\t" +
                          mag4 + "\t" + phase4 + "\t" + mask +
                          "\t0.004,0.008,0.012,0.016\t3\n"
                          "missing\t" +
                          mag + "\t" + phase.substr(0, phase.rfind(',')) + "," + missing_echo +
                          "\t\t\t\n"
                          "grid\t" +
                          other_grid_mag + "\t" + phase4 +
                          "\t\t0.004,0.008,0.012,0.016\t3\n"
                          "mask\t" +
                          mag4 + "\t" + phase4 + "\t" + bad_mask +
                          "\t0.004,0.008,0.012,0.016\t3\n"
                          "te\t" +
                          mag4 + "\t" + phase4 +
                          "\t\t0.004,0.008\t3\n"
                          "nocar\t" +
                          mag4 + "\t" + nosidecar + "\t\t\t3\n");
  }
};

TEST(PipelinePlan, GoodScansGetARequestTheirTaskBudgetAdmits) {
  Cohort c;
  const BatchPlan p = make_plan(pipeline_options(c.f, c.manifest));
  EXPECT_EQ(p.kind, "pipeline");
  const std::int64_t n = 12 * 10 * 8;
  const SubjectPlan& e = subject(p, "echoes");
  const SubjectPlan& four = subject(p, "four");
  ASSERT_EQ(e.error, "");
  ASSERT_EQ(four.error, "");
  EXPECT_EQ(e.frames, 3);  // three files, one echo each
  EXPECT_EQ(four.frames, 4);
  EXPECT_EQ(e.input_bytes, 2 * n * 3 * 8);             // magnitude and phase as f64
  EXPECT_EQ(four.input_bytes, 2 * n * 4 * 8 + n * 8);  // and the given mask
  for (const SubjectPlan* s : {&e, &four}) {
    EXPECT_GT(s->predicted_bytes, 0);
    const auto limit = static_cast<std::uint64_t>(s->mem_mib * kMiB);
    EXPECT_GE(static_cast<std::int64_t>(limit - system::memory_reserve(limit)), s->input_bytes + s->predicted_bytes);
    EXPECT_GE(s->time_min, 5);
    EXPECT_FALSE(s->bucket.empty());
    EXPECT_EQ(s->report, (fs::path(s->out) / "report.json").string());
  }
  // The task's arguments name every echo's file, in order, and the row's own te, b0 and mask.
  const std::vector<std::string>& a = four.args;
  auto after = [&](const std::vector<std::string>& args, const std::string& opt) {
    const auto it = std::find(args.begin(), args.end(), opt);
    return it == args.end() || it + 1 == args.end() ? std::string("(absent)") : *(it + 1);
  };
  EXPECT_EQ(after(e.args, "--phase"), c.f.path("echoes/phase_e1.nii") + "," + c.f.path("echoes/phase_e2.nii") + "," +
                                          c.f.path("echoes/phase_e3.nii"));
  EXPECT_EQ(after(e.args, "--te"), "(absent)");  // the sidecars give them
  EXPECT_EQ(after(a, "--te"), "0.004,0.008,0.012,0.016");
  EXPECT_EQ(after(a, "--b0"), "3");
  EXPECT_EQ(after(a, "--mask"), c.f.path("four/mask.nii"));
}

TEST(PipelinePlan, EachBrokenScanIsRefusedNamingItsFileAndTheOthersArePlanned) {
  Cohort c;
  const BatchPlan p = make_plan(pipeline_options(c.f, c.manifest));
  auto error = [&](const std::string& id) { return subject(p, id).error; };
  EXPECT_NE(error("missing").find(c.missing_echo), std::string::npos) << error("missing");
  EXPECT_NE(error("grid").find(c.other_grid_mag), std::string::npos) << error("grid");
  EXPECT_NE(error("mask").find(c.bad_mask), std::string::npos) << error("mask");
  EXPECT_NE(error("te").find("2 echo time(s) for 4 echoes"), std::string::npos) << error("te");
  EXPECT_NE(error("nocar").find("no echo time"), std::string::npos) << error("nocar");
  EXPECT_NE(error("nocar").find(c.f.path("other/phase_nocar.json")), std::string::npos) << error("nocar");
  std::size_t planned = 0;
  for (const Bucket& b : p.buckets) planned += b.subjects.size();
  EXPECT_EQ(planned, 2u);  // echoes and four
}

TEST(PipelinePlan, ARequestAboveMaxMemIsRefusedWithTheFigures) {
  Cohort c;
  PlanOptions o = pipeline_options(c.f, c.manifest);
  o.max_mem = 20 * kMiB;  // below the smallest rung that holds any run with the reserve
  const BatchPlan p = make_plan(o);
  const std::string& e = subject(p, "four").error;
  EXPECT_NE(e.find("--max-mem"), std::string::npos) << e;
  EXPECT_TRUE(p.buckets.empty());
}

TEST(PipelinePlan, RoundTripsThroughBatchJsonAndOldPlansReadAsNetworks) {
  Cohort c;
  const BatchPlan p = make_plan(pipeline_options(c.f, c.manifest));
  write_plan(p);
  const BatchPlan back = read_plan(p.out_dir);
  EXPECT_TRUE(back.is_pipeline());
  EXPECT_EQ(back.run_args, p.run_args);
  EXPECT_EQ(subject(back, "four").args, subject(p, "four").args);
  EXPECT_EQ(subject(back, "four").mem_mib, subject(p, "four").mem_mib);
  std::ifstream script(fs::path(p.out_dir) / "sbatch" / "b0.sbatch");
  const std::string text((std::istreambuf_iterator<char>(script)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--job-name=qsm-pipeline-b0"), std::string::npos) << text;

  nlohmann::json j = nlohmann::json::parse(std::ifstream(fs::path(p.out_dir) / "batch.json"));
  j.erase("kind");  // what `qsm batch plan` wrote before pipelines
  std::ofstream(fs::path(p.out_dir) / "batch.json") << j.dump();
  EXPECT_FALSE(read_plan(p.out_dir).is_pipeline());
}

TEST(PipelinePlan, BidsRunsAreSubjectsNamedByTheirRun) {
  Folder f;
  const Dims3 d{8, 8, 6};
  f.text("bids/dataset_description.json", R"({"Name": "t", "BIDSVersion": "1.9.0"})");
  for (const std::string sub : {"1", "2"})
    for (int e = 1; e <= 2; ++e)
      for (const std::string part : {"mag", "phase"})
        f.echo("bids/sub-" + sub + "/anat/sub-" + sub + "_echo-" + std::to_string(e) + "_part-" + part + "_MEGRE", d,
               0.005 * e);
  const std::string lost = f.path("bids/sub-2/anat/sub-2_echo-2_part-phase_MEGRE.json");
  fs::remove(lost);
  PlanOptions o = pipeline_options(f, f.path("bids"));
  const BatchPlan p = make_plan(o);
  ASSERT_EQ(p.subjects.size(), 2u);
  EXPECT_EQ(subject(p, "sub-1").error, "");
  EXPECT_EQ(subject(p, "sub-1").frames, 2);
  EXPECT_NE(subject(p, "sub-2").error.find("sub-2_echo-2_part-phase_MEGRE.json"), std::string::npos)
      << subject(p, "sub-2").error;

  o.bids_filter.participants = {"2"};
  EXPECT_EQ(make_plan(o).subjects.size(), 1u);
  o.manifest = f.text("m.tsv", "id\tmagnitude\tphase\nx\ty\tz\n");  // a filter means nothing to a TSV
  EXPECT_THROW(make_plan(o), Error);
}

}  // namespace
