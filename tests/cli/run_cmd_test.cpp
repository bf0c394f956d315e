// `qsm run`: the command end to end on a small simulated head, with the reduced architecture
// twins (QSM_TWINS_DIR) standing in for the published weights. Checks that a run writes its
// outputs on the input's grid and affine, a report with the promised fields and a preview that
// decodes; and that every kind of bad input is refused with a message naming the file and what
// is wrong, leaving the output folder exactly as it was (no output, no temporary).
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>

#include "cli/cli_test_util.h"
#include "io/nifti.h"
#include "qsmcore/models.h"
#include "qsmcore/phantom.h"
#include "support/test_data.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;
using qsmtest::listing;
using qsmtest::run_qsm;

// Voxel → scanner affine: voxel sizes, then a rotation about x (tilts B0 off the third voxel
// axis: an oblique slab) and about z (in-plane: B0 stays along the third axis), then an origin.
Geometry placed(const Vec3& voxel, double about_z_deg, double about_x_deg, const Vec3& origin) {
  const double cz = std::cos(about_z_deg * std::numbers::pi / 180), sz = std::sin(about_z_deg * std::numbers::pi / 180);
  const double cx = std::cos(about_x_deg * std::numbers::pi / 180), sx = std::sin(about_x_deg * std::numbers::pi / 180);
  const double rz[3][3] = {{cz, -sz, 0}, {sz, cz, 0}, {0, 0, 1}};
  const double rx[3][3] = {{1, 0, 0}, {0, cx, -sx}, {0, sx, cx}};
  Geometry g;
  g.voxel_mm = voxel;
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) {
      double v = 0;
      for (int k = 0; k < 3; ++k) v += rx[r][k] * rz[k][c];
      g.affine.m[r][c] = v * voxel[c];
    }
    g.affine.m[r][3] = origin[r];
  }
  g.affine.m[3] = {0, 0, 0, 1};
  g.xform_code = 1;
  return g;
}

// One small head, simulated once for all tests (32³: xQSM pads to /8, iQSM to /16).
const Phantom& head() {
  static const Phantom p = [] {
    PhantomOptions o;
    o.dims = {32, 32, 32};
    o.te_s = {0.01};
    o.background = false;
    return make_head_phantom(o);
  }();
  return p;
}

Volume on(const Volume& v, const Geometry& g) {
  Volume c = v.clone();
  c.set_geometry(g);
  return c;
}

class QsmRun : public ::testing::Test {
 protected:
  void SetUp() override {
    twins_ = qsmtest::data_dir("QSM_TWINS_DIR");
    geometry_ = placed({1.0, 1.0, 1.2}, 12.0, 0.0, {-15.5, 20.25, -7.0});
    fs::create_directories(work_.path() / "cache");
    // Weights only from the twins folder; no cache or QSM.rs folder of the machine is looked at,
    // and a download (which no test should reach) fails at once.
    env_ = {"HOME=" + work_.file("home"),
            "XDG_CACHE_HOME=" + work_.file("xdg"),
            "QSM_MODEL_CACHE=" + work_.file("cache"),
            "QSM_MODEL_BASE_URL=http://127.0.0.1:9/",
            "QSM_MODEL_DIR_XQSM=" + twins_,
            "QSM_MODEL_DIR_IQSM=" + twins_};
    write("field.nii.gz", on(head().local_field, geometry_));
    io::NiftiWriteOptions u8;
    u8.store = io::NiftiStore::U8;
    io::write_nifti(work_.file("mask.nii.gz"), on(head().mask, geometry_), u8);
    write("phase.nii.gz", on(head().phase, geometry_));
  }

  void write(const std::string& name, const Volume& v) { io::write_nifti(work_.file(name), v); }
  std::string file(const std::string& name) const { return work_.file(name); }

  qsmtest::QsmResult qsm(std::vector<std::string> args) { return run_qsm(args, env_, work_.path()); }

  // A refused run: non-zero exit, stderr has every piece of `expect`, and the folder holds
  // exactly what it held before (no output, no temporary).
  void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& expect) {
    const auto before = listing(work_.path());
    const auto r = qsm(args);
    EXPECT_NE(r.status, 0) << r.out << r.err;
    for (const auto& e : expect) EXPECT_NE(r.err.find(e), std::string::npos) << "missing '" << e << "' in: " << r.err;
    EXPECT_EQ(listing(work_.path()), before) << r.err;
  }

  std::vector<std::string> xqsm_args(const std::string& in, const std::string& mask) {
    return {"run", "xqsm", "--in", in, "--mask", mask, "--out", file("chi.nii.gz"), "--no-verify", "--threads", "2"};
  }

  qsmtest::ScratchDir work_;
  std::string twins_;
  Geometry geometry_;
  std::vector<std::string> env_;
};

// Decodes a PNG fully with libpng; returns {width, height} ({0, 0} if it does not decode).
std::pair<int, int> decode_png(const std::string& path) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path.c_str())) return {0, 0};
  img.format = PNG_FORMAT_GRAY;
  std::vector<unsigned char> px(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, px.data(), 0, nullptr)) return {0, 0};
  return {static_cast<int>(img.width), static_cast<int>(img.height)};
}

TEST_F(QsmRun, XqsmTwinWritesChiOnTheInputGridWithReportAndPreview) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  auto args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  for (const char* a : {"--preview", "p.png", "--report", "r.json"}) args.push_back(a);
  args[args.size() - 3] = file("p.png");
  args[args.size() - 1] = file("r.json");
  const auto r = qsm(args);
  ASSERT_EQ(r.status, 0) << r.out << r.err;

  const Volume field = io::read_nifti(file("field.nii.gz"));
  const Volume chi = io::read_nifti(file("chi.nii.gz"));
  EXPECT_EQ(chi.dims(), field.dims());
  EXPECT_EQ(chi.frames(), 1);
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(chi.voxel_mm()[a], geometry_.voxel_mm[a], 1e-6);
  for (int row = 0; row < 3; ++row)
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(chi.affine().m[row][c], geometry_.affine.m[row][c], 1e-4) << row << c;
  // xQSM masks its output; inside, a random-weight twin still gives finite, non-constant values.
  const Volume& mask = head().mask;
  double lo = INFINITY, hi = -INFINITY;
  for (std::int64_t i = 0; i < chi.voxels(); ++i) {
    ASSERT_TRUE(std::isfinite(chi.data()[i]));
    if (mask.data()[i] == 0.0)
      ASSERT_EQ(chi.data()[i], 0.0) << "voxel " << i << " outside the mask";
    else {
      lo = std::min(lo, chi.data()[i]);
      hi = std::max(hi, chi.data()[i]);
    }
  }
  EXPECT_LT(lo, hi);

  const auto [w, h] = decode_png(file("p.png"));
  EXPECT_EQ(w, 32 + 32 + 32);  // axial nx + coronal nx + sagittal ny
  EXPECT_EQ(h, 32);

  const auto j = nlohmann::json::parse(qsmtest::read_text(file("r.json")));
  EXPECT_EQ(j.at("model").at("id"), "xqsm");
  const auto& f0 = j.at("model").at("files").at(0);
  EXPECT_EQ(f0.at("path"), (fs::path(twins_) / "xqsm.onnx").string());
  EXPECT_EQ(f0.at("sha256"), weight_file_sha256(fs::path(twins_) / "xqsm.onnx"));
  EXPECT_EQ(f0.at("matches_registry"), false);  // a twin, not the published file
  EXPECT_EQ(j.at("inputs").at("field").at("path"), file("field.nii.gz"));
  EXPECT_EQ(j.at("inputs").at("field").at("dims"), nlohmann::json({32, 32, 32}));
  EXPECT_NEAR(j.at("inputs").at("field").at("voxel_mm").at(2).get<double>(), 1.2, 1e-6);
  EXPECT_EQ(j.at("inputs").at("mask").at("path"), file("mask.nii.gz"));
  EXPECT_EQ(j.at("options").at("threads"), 2);
  EXPECT_EQ(j.at("options").at("verify_weights"), false);
  EXPECT_GT(j.at("memory").at("predicted_peak_bytes").get<std::int64_t>(), 0);
  EXPECT_GT(j.at("memory").at("measured_peak_bytes").get<std::int64_t>(), 0);
  EXPECT_FALSE(j.at("stages").empty());
  EXPECT_GE(j.at("tiles").get<std::int64_t>(), 1);
  EXPECT_TRUE(j.at("warnings").is_array());
  EXPECT_EQ(j.at("outputs").at(0).at("path"), file("chi.nii.gz"));
  EXPECT_EQ(j.at("outputs").at(0).at("name"), "chi");
  EXPECT_EQ(j.at("preview"), file("p.png"));

  // Nothing else was left in the folder: no temporary of any of the three outputs.
  for (const auto& name : listing(work_.path())) EXPECT_NE(name[0], '.') << name;
}

TEST_F(QsmRun, ObliqueInputIsRunWithAWarning) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  const Geometry oblique = placed({1.0, 1.0, 1.0}, 0.0, 25.0, {0, 0, 0});
  write("field_obl.nii.gz", on(head().local_field, oblique));
  io::NiftiWriteOptions u8;
  u8.store = io::NiftiStore::U8;
  io::write_nifti(file("mask_obl.nii.gz"), on(head().mask, oblique), u8);
  const auto r = qsm(xqsm_args(file("field_obl.nii.gz"), file("mask_obl.nii.gz")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("axial"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(file("chi.nii.gz")));
}

TEST_F(QsmRun, PublishedHashIsCheckedUnlessNoVerify) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  auto args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args.erase(std::find(args.begin(), args.end(), "--no-verify"));
  expect_refused(args, {"checksum mismatch", "xqsm.onnx", "QSM_MODEL_DIR_XQSM"});
}

TEST_F(QsmRun, TruncatedNiftiIsRefusedNamingTheFile) {
  // Uncompressed: cut inside the voxel data; compressed: cut the gzip stream.
  write("whole.nii", head().local_field);
  for (const char* name : {"cut.nii", "cut.nii.gz"}) {
    const std::string src = std::string(name) == "cut.nii" ? file("whole.nii") : file("field.nii.gz");
    const std::string bytes = qsmtest::read_text(src);
    std::ofstream(file(name), std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
    expect_refused(xqsm_args(file(name), file("mask.nii.gz")), {file(name), "truncated"});
  }
  const std::string header_only = qsmtest::read_text(file("whole.nii")).substr(0, 100);
  std::ofstream(file("stub.nii"), std::ios::binary).write(header_only.data(), 100);
  expect_refused(xqsm_args(file("stub.nii"), file("mask.nii.gz")), {file("stub.nii"), "truncated inside its header"});
}

TEST_F(QsmRun, FourDimensionalFieldIsRefused) {
  Volume two = Volume::zeros({32, 32, 32}, geometry_, 2);
  for (std::int64_t i = 0; i < two.size(); ++i) two.data()[i] = 0.01 * std::sin(0.1 * static_cast<double>(i));
  write("field4d.nii.gz", two);
  expect_refused(xqsm_args(file("field4d.nii.gz"), file("mask.nii.gz")),
                 {file("field4d.nii.gz"), "2 frames", "single 3-D volume"});
}

TEST_F(QsmRun, NonFiniteVoxelsAreCountedAndTheFirstNamed) {
  Volume f = on(head().local_field, geometry_);
  f.at(3, 4, 5) = std::nan("");
  f.at(7, 4, 5) = INFINITY;
  f.at(1, 20, 30) = std::nan("");
  write("nan.nii.gz", f);
  expect_refused(xqsm_args(file("nan.nii.gz"), file("mask.nii.gz")),
                 {file("nan.nii.gz"), "3 voxel value(s) are NaN or infinite", "first at voxel (3,4,5)"});
}

TEST_F(QsmRun, MaskOnAnotherGridIsRefusedDescribingBothGrids) {
  Volume small = Volume::zeros({32, 32, 30}, geometry_);
  for (double& x : small.values()) x = 1.0;
  write("mask30.nii.gz", small);
  expect_refused(xqsm_args(file("field.nii.gz"), file("mask30.nii.gz")),
                 {file("mask30.nii.gz"), "32×32×30 at 1×1×1.2 mm", "32×32×32 at 1×1×1.2 mm", file("field.nii.gz")});
  // Same dimensions and voxel size, shifted origin.
  write("mask_shift.nii.gz", on(head().mask, placed({1.0, 1.0, 1.2}, 12.0, 0.0, {-15.5, 20.25, -2.0})));
  expect_refused(xqsm_args(file("field.nii.gz"), file("mask_shift.nii.gz")),
                 {file("mask_shift.nii.gz"), "affine", "origin"});
}

TEST_F(QsmRun, EmptyMaskIsRefused) {
  write("empty.nii.gz", Volume::zeros({32, 32, 32}, geometry_));
  expect_refused(xqsm_args(file("field.nii.gz"), file("empty.nii.gz")), {file("empty.nii.gz"), "mask is empty"});
}

// Masks are binarised as the networks' authors do, at > 0.5 (#19): a probability map whose every
// value is at most one half holds no brain, and is refused as empty, not run on every voxel.
TEST_F(QsmRun, MaskWithNoValueAboveOneHalfIsRefused) {
  Volume low = Volume::zeros({32, 32, 32}, geometry_);
  for (double& x : low.values()) x = 0.5;
  write("half.nii.gz", low);
  expect_refused(xqsm_args(file("field.nii.gz"), file("half.nii.gz")),
                 {file("half.nii.gz"), "mask is empty", "above 0.5"});
}

TEST_F(QsmRun, PhaseNetworkWithoutTeOrB0IsRefusedBeforeAnything) {
  const std::vector<std::string> base = {
      "run",        "iqsm", "--in", file("phase.nii.gz"), "--mask", file("mask.nii.gz"), "--out", file("chi.nii.gz"),
      "--no-verify"};
  auto no_te = base;
  no_te.insert(no_te.end(), {"--b0", "7"});
  expect_refused(no_te, {"iqsm", "needs", "--te"});
  auto no_b0 = base;
  no_b0.insert(no_b0.end(), {"--te", "0.01"});
  expect_refused(no_b0, {"iqsm", "needs", "--b0"});
  auto no_mask = std::vector<std::string>{"run",  "iqsm", "--in",  file("phase.nii.gz"), "--te", "0.01",
                                          "--b0", "7",    "--out", file("chi.nii.gz")};
  expect_refused(no_mask, {"iqsm", "needs", "--mask"});
  auto two_tes = base;
  two_tes.insert(two_tes.end(), {"--te", "0.01,0.02", "--b0", "7"});
  expect_refused(two_tes, {"--te", "single-echo phase"});
  auto hz = base;
  hz.insert(hz.end(), {"--te", "0.01", "--b0", "7", "--unit", "hz"});
  expect_refused(hz, {"iqsm", "wrapped phase in radians"});
}

TEST_F(QsmRun, FieldInHzOrRadNeedsB0AndTe) {
  auto args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args.insert(args.end(), {"--unit", "hz"});
  expect_refused(args, {"--unit hz", "B0", "give --b0"});
  args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args.insert(args.end(), {"--unit", "rad", "--b0", "3"});
  expect_refused(args, {"--unit rad", "TE", "give --b0 and --te"});
}

TEST_F(QsmRun, BadOptionsAreRefusedBeforeReadingInputs) {
  auto args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args[args.size() - 4] = file("chi.img");  // --out
  expect_refused(args, {"chi.img", ".nii.gz"});
  args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args.insert(args.end(), {"--tile", "64,x"});
  expect_refused(args, {"--tile", "halo"});
  args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args.insert(args.end(), {"--mem-budget", "lots"});
  expect_refused(args, {"--mem-budget", "lots"});
  args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args.insert(args.end(), {"--preview", file("field.nii.gz/p.png")});  // a missing folder is made; a file is no folder
  expect_refused(args, {"field.nii.gz", "is not a folder"});
  args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args[args.size() - 4] = file("field.nii.gz");  // --out over the input
  expect_refused(args, {"overwrite the input"});
  expect_refused({"run", "no-such-net", "--in", file("field.nii.gz"), "--out", file("chi.nii.gz")},
                 {"'no-such-net' not in model registry"});
}

TEST_F(QsmRun, MissingInputFileIsNamed) {
  expect_refused(xqsm_args(file("nope.nii.gz"), file("mask.nii.gz")), {file("nope.nii.gz"), "no such file"});
}

TEST_F(QsmRun, BudgetTooSmallIsRefusedAndWritesNothing) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  // 49.5 MiB, of which 48 MiB are left to the process outside the engine: 1.5 MiB hold the
  // twin's weights, plans and wrapper buffers (1.0–1.1 MB predicted, by CPU) but not one run on
  // 32³ beside them (another 1.0 MB). Spilled, that run fits even there (its convolutions and
  // up-samplings stream their operands), so spilling is off. The whole volume is asked for
  // (--tile 0): otherwise qsm runs the largest tiles that fit. (At 50 MiB the margin was 42 kB
  // on AVX-512 and the run fit on AVX2, whose plans are smaller.)
  auto args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args.insert(args.end(), {"--mem-budget", "51904512", "--no-spill", "--tile", "0", "--report", file("r.json"),
                           "--preview", file("p.png")});
  expect_refused(args, {"xqsm", "predicted peak", "the process outside the engine 50331648",
                        "above the budget of 51904512 bytes"});
}

TEST_F(QsmRun, ABudgetThatCannotHoldTheProcessIsRefusedAtOnce) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  auto args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args.insert(args.end(), {"--mem-budget", "2MiB", "--report", file("r.json")});
  expect_refused(args, {"--mem-budget 2MiB", "leaves nothing to the engine"});
}

TEST_F(QsmRun, DefaultBudgetComesFromSlurmAndRefusesBeforeWriting) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  // No --mem-budget: the budget is the job's allocation, here 8 MiB (below the reserve).
  env_.push_back("SLURM_MEM_PER_NODE=8");
  auto args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args[args.size() - 4] = file("new/chi.nii.gz");  // a folder that a refused run must not leave behind
  args.insert(args.end(), {"--report", file("r.json")});
  expect_refused(args, {"xqsm", "budget", "from SLURM_MEM_PER_NODE"});
  EXPECT_FALSE(fs::exists(file("new/chi.nii.gz")));
}

TEST_F(QsmRun, OutputsGoIntoMissingFoldersWithProgressAsPlainLines) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  auto args = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  args[args.size() - 4] = file("made/here/chi.nii.gz");
  args.insert(args.end(), {"--report", file("reports/r.json")});
  const auto r = qsm(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(file("made/here/chi.nii.gz")));
  EXPECT_TRUE(fs::exists(file("reports/r.json")));
  // stderr is a file here, not a terminal: progress comes as whole lines, without a bar's \r.
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("qsm: progress 100%"), std::string::npos) << r.err;
}

TEST_F(QsmRun, TileOptionReachesTheNetwork) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  // Relative paths this time, from the scratch folder: the report still gives absolute ones.
  auto args = xqsm_args("field.nii.gz", "mask.nii.gz");
  args[args.size() - 4] = "chi.nii.gz";
  args.insert(args.end(), {"--tile", "16,4", "--report", "r.json"});
  const auto r = run_qsm(args, env_, work_.path(), work_.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(qsmtest::read_text(file("r.json")));
  EXPECT_EQ(j.at("inputs").at("field").at("path"), file("field.nii.gz"));
  EXPECT_EQ(j.at("outputs").at(0).at("path"), file("chi.nii.gz"));
  EXPECT_EQ(j.at("options").at("tile").at("core"), nlohmann::json({16, 16, 16}));
  EXPECT_EQ(j.at("options").at("tile").at("halo"), 4);
  EXPECT_EQ(j.at("tiles"), 8);  // 32³ in 16³ cores
  EXPECT_EQ(io::read_nifti(file("chi.nii.gz")).dims(), (Dims3{32, 32, 32}));
}

TEST_F(QsmRun, StreamedWeightsGiveTheSameChiAndAResidencyReport) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  // Tiled so the streamed run goes through layer-major tile batches.
  auto full = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  full[full.size() - 4] = file("full.nii.gz");
  full.insert(full.end(), {"--tile", "16,4"});
  ASSERT_EQ(qsm(full).status, 0);
  auto streamed = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  streamed[streamed.size() - 4] = file("streamed.nii.gz");
  streamed.insert(streamed.end(), {"--tile", "16,4", "--residency", "stream:host=0", "--report", file("r.json")});
  const auto r = qsm(streamed);
  ASSERT_EQ(r.status, 0) << r.err;
  const Volume a = io::read_nifti(file("full.nii.gz"));
  const Volume b = io::read_nifti(file("streamed.nii.gz"));
  ASSERT_EQ(a.size(), b.size());
  for (std::int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << "voxel " << i;
  const auto j = nlohmann::json::parse(qsmtest::read_text(file("r.json")));
  EXPECT_EQ(j.at("options").at("residency").get<std::string>().rfind("stream:", 0), 0u);
  EXPECT_EQ(j.at("residency").at(0).at("execution_residency"), "dense_disk_stream");
  // A policy that cannot be built is refused with the rule it breaks, writing nothing.
  auto bad = xqsm_args(file("field.nii.gz"), file("mask.nii.gz"));
  bad[bad.size() - 4] = file("bad.nii.gz");
  bad.insert(bad.end(), {"--residency", "stream:host=1GiB,lookahead=0"});
  expect_refused(bad, {"lookahead"});
}

TEST_F(QsmRun, PhaseNetworkRunsWithTeAndB0) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  const auto r = qsm({"run", "iqsm", "--in", file("phase.nii.gz"), "--mask", file("mask.nii.gz"), "--te", "0.01",
                      "--b0", "7", "--out", file("chi.nii.gz"), "--no-verify", "--threads", "2", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "");  // --quiet
  const Volume chi = io::read_nifti(file("chi.nii.gz"));
  EXPECT_EQ(chi.dims(), (Dims3{32, 32, 32}));
  for (double x : chi.values()) ASSERT_TRUE(std::isfinite(x));
}

TEST_F(QsmRun, SeveralOutputsGetSuffixes) {
  QSM_REQUIRE_DATA(twins_, "QSM_TWINS_DIR");
  env_.push_back("QSM_MODEL_DIR_SUSEP_NET=" + twins_);
  write("chi_in.nii.gz", on(head().chi, geometry_));
  Volume r2p = on(head().mask, geometry_);
  for (double& x : r2p.values()) x *= 5.0;  // R2' of 5 Hz in the brain
  write("r2prime.nii.gz", r2p);
  const auto r = qsm({"run", "susep-net", "--in", file("field.nii.gz"), "--qsm", file("chi_in.nii.gz"), "--r2prime",
                      file("r2prime.nii.gz"), "--mask", file("mask.nii.gz"), "--out", file("sep.nii.gz"), "--preview",
                      file("sep.png"), "--no-verify", "--threads", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(file("sep.nii.gz")));
  for (const char* name : {"sep_chi_pos.nii.gz", "sep_chi_neg.nii.gz", "sep_chi_total.nii.gz"}) {
    ASSERT_TRUE(fs::exists(file(name))) << name << "\n" << r.out;
    EXPECT_EQ(io::read_nifti(file(name)).dims(), (Dims3{32, 32, 32})) << name;
  }
  EXPECT_GT(decode_png(file("sep.png")).first, 0);
  // SUSEP-Net without its χ and R2' inputs: named, nothing written.
  expect_refused({"run", "susep-net", "--in", file("field.nii.gz"), "--mask", file("mask.nii.gz"), "--out",
                  file("sep2.nii.gz"), "--no-verify"},
                 {"susep-net", "needs", "--qsm", "--r2prime"});
}

}  // namespace
}  // namespace qsmcore
