// Every registry network end to end through the `qsm run` command (issue #7): for each id of
// all_models(), the inputs its wrapper needs (network_needs) are written as NIfTI files from a
// small simulated head, the qsm binary runs it with the network's reduced twin (QSM_TWINS_DIR)
// as weights, and every output named in the report must exist, lie on the input grid (dims,
// voxel size and affine) and be finite. tests/networks/run_network_test.cpp runs the same
// networks through the library call; this one adds what the command does around it: option
// parsing, reading and checking the files, resolving weights through QSM_MODEL_DIR_<ID>,
// writing each output and the report.
//
// Sizes: a 16³ head for every network but AutoQSM, which gets 32³. 16³ is the smallest input
// the twins are generated and checked on (build/testdata/twins/manifest.json), and every
// recipe takes it: the generic-tiler and whole-volume networks pad it to their multiple (8 or
// 16; NeXtQSM's 64), the sliding-window ones (χ-sepnet, R2PRIMEnet, SUSEP-Net, HD-BET, SynthSeg,
// RS2-Net) end-pad a volume smaller than their window, and QSMGAN's fixed-patch tiles overhang
// any volume. AutoQSM's tiles are its graph's fixed output patch (32³ in the twin), and it
// refuses a dimension below that. All at B0 = 3 T, which keeps R2PRIMEnet inside its trained
// domain (3 ± 0.3 T; it refuses other B0 without --ignore-domain); 1 mm isotropic voxels (what
// QSMnet, MoDL-QSM, HD-BET and SynthSeg expect) except RS2-Net's rodent 0.16×0.2×0.25 mm: with
// those no network warns, and the test asks for a run without warnings. The phase networks get
// two echoes (one --te each), the segmentation networks one magnitude volume.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <set>

#include "cli/cli_test_util.h"
#include "io/nifti.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"
#include "support/test_data.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;
using qsmtest::run_qsm;

constexpr double kB0 = 3.0;
const std::vector<double> kTes{0.004, 0.012};

// The grid each network runs on: the smallest cube its recipe takes with its twin, 1 mm
// isotropic except where the network was trained on other voxels (see the top of the file).
struct GridSetup {
  std::int64_t edge = 16;
  Vec3 voxel_mm{1.0, 1.0, 1.0};
};

GridSetup setup_for(const std::string& id) {
  // AutoQSM tiles with its graph's fixed output patch (32³ in the twin) and refuses a smaller
  // dimension.
  if (id == "autoqsm") return {32, {1.0, 1.0, 1.0}};
  // RS2-Net segments rodent brains at 0.16×0.2×0.25 mm (it warns on other voxels).
  if (id == "rs2-net") return {16, {0.16, 0.2, 0.25}};
  return {16, {1.0, 1.0, 1.0}};
}

// Voxels of `voxel_mm`, rotated 10° in plane (B0 stays along the third voxel axis) and moved
// off the origin: the outputs must carry this affine, not a default one.
Geometry grid(const Vec3& voxel_mm) {
  const double c = std::cos(10.0 * std::numbers::pi / 180), s = std::sin(10.0 * std::numbers::pi / 180);
  const double rot[3][3] = {{c, -s, 0}, {s, c, 0}, {0, 0, 1}};
  const Vec3 origin{-12.5, 18.0, -9.75};
  Geometry g;
  g.voxel_mm = voxel_mm;
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 3; ++k) g.affine.m[r][k] = rot[r][k] * voxel_mm[k];
    g.affine.m[r][3] = origin[r];
  }
  g.affine.m[3] = {0, 0, 0, 1};
  g.xform_code = 1;
  return g;
}

// The input files of one setup, written once into a folder shared by the networks that use
// it (removed at exit).
struct Inputs {
  qsmtest::ScratchDir dir;
  std::string file(const std::string& name) const { return dir.file(name); }
};

const Inputs& inputs(const GridSetup& su) {
  static std::map<std::string, std::unique_ptr<Inputs>> made;
  const std::string key = nlohmann::json({su.edge, su.voxel_mm}).dump();
  auto& slot = made[key];
  if (slot) return *slot;
  slot = std::make_unique<Inputs>();
  const Inputs& in = *slot;
  PhantomOptions o;
  o.dims = {su.edge, su.edge, su.edge};
  o.voxel_mm = su.voxel_mm;
  o.b0_t = kB0;
  o.te_s = kTes;
  const Phantom ph = make_head_phantom(o);
  const Geometry g = grid(su.voxel_mm);
  auto write = [&](const std::string& name, const Volume& v, io::NiftiWriteOptions w = {}) {
    Volume c = v.clone();
    c.set_geometry(g);
    io::write_nifti(in.file(name), c, w);
  };
  write("total_field.nii.gz", ph.total_field);
  write("local_field.nii.gz", ph.local_field);
  write("phase.nii.gz", ph.phase);  // two echoes, one frame each
  write("chi.nii.gz", ph.chi);
  // The segmentation networks take one magnitude volume: the first echo.
  Volume mag = Volume::zeros(o.dims, ph.mask.geometry());
  const auto first = ph.magnitude.frame(0);
  std::copy(first.begin(), first.end(), mag.values().begin());
  write("magnitude.nii.gz", mag);
  // R2* and R2' in Hz, inside the brain only, in plausible 3 T ranges.
  Volume r2star = Volume::zeros_like(ph.mask), r2prime = Volume::zeros_like(ph.mask);
  for (std::int64_t i = 0; i < ph.mask.voxels(); ++i) {
    const double m = ph.mask.data()[i], chi = std::abs(ph.chi.data()[i]);
    r2star.data()[i] = m * (20.0 + 100.0 * chi);
    r2prime.data()[i] = m * (5.0 + 60.0 * chi);
  }
  write("r2star.nii.gz", r2star);
  write("r2prime.nii.gz", r2prime);
  io::NiftiWriteOptions u8;
  u8.store = io::NiftiStore::U8;
  write("mask.nii.gz", ph.mask, u8);
  return in;
}

// $QSM_MODEL_DIR_<ID>, spelled here independently of the library: upper case, every
// character but A-Z and 0-9 (here '-' and '.') as '_'.
std::string model_dir_var(const std::string& id) {
  std::string v = "QSM_MODEL_DIR_";
  for (char c : id) v += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  return v;
}

std::string join(const std::vector<double>& xs) {
  std::string s;
  for (double x : xs) s += (s.empty() ? "" : ",") + nlohmann::json(x).dump();
  return s;
}

// The `qsm run` arguments for `spec`: one input option per volume network_needs asks for, TE
// and B0 where needed. Returns the options after the id (without --out and the rest).
std::vector<std::string> input_args(const ModelSpec& spec, const GridSetup& su) {
  const Inputs& in = inputs(su);
  const NetworkNeeds n = network_needs(spec);
  std::vector<std::string> a;
  // --in names the primary input: the field (or phase), else the magnitude, else R2*.
  if (n.field_kind == "total field")
    a.insert(a.end(), {"--in", in.file("total_field.nii.gz")});
  else if (n.field_kind == "local field")
    a.insert(a.end(), {"--in", in.file("local_field.nii.gz")});
  else if (n.field_kind == "wrapped phase")
    a.insert(a.end(), {"--in", in.file("phase.nii.gz")});
  else if (n.magnitude)
    a.insert(a.end(), {"--in", in.file("magnitude.nii.gz")});
  else if (n.r2star)
    a.insert(a.end(), {"--in", in.file("r2star.nii.gz")});
  if (n.field && n.magnitude) a.insert(a.end(), {"--magnitude", in.file("magnitude.nii.gz")});
  if (n.r2star && (n.field || n.magnitude)) a.insert(a.end(), {"--r2star", in.file("r2star.nii.gz")});
  if (n.r2prime) a.insert(a.end(), {"--r2prime", in.file("r2prime.nii.gz")});
  if (n.qsm) a.insert(a.end(), {"--qsm", in.file("chi.nii.gz")});
  if (n.mask) a.insert(a.end(), {"--mask", in.file("mask.nii.gz")});
  if (n.te) a.insert(a.end(), {"--te", n.field_kind == "wrapped phase" ? join(kTes) : join({kTes[0]})});
  if (n.b0) a.insert(a.end(), {"--b0", nlohmann::json(kB0).dump()});
  return a;
}

class EveryNetworkThroughQsmRun : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryNetworkThroughQsmRun, RunsOnThePhantomWithItsTwin) {
  const std::string twins = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(twins, "QSM_TWINS_DIR");
  const std::string id = GetParam();
  const ModelSpec& spec = require_model(id);
  for (const auto& f : spec.files)
    ASSERT_TRUE(fs::exists(fs::path(twins) / std::string(f.name))) << "no twin " << f.name << " in " << twins;

  qsmtest::ScratchDir work;
  fs::create_directories(work.path() / "cache");
  // Weights only from the twins folder, through this network's own variable; no cache or
  // QSM.rs folder of the machine is looked at, and a download fails at once.
  const std::vector<std::string> env = {"HOME=" + work.file("home"), "XDG_CACHE_HOME=" + work.file("xdg"),
                                        "QSM_MODEL_CACHE=" + work.file("cache"),
                                        "QSM_MODEL_BASE_URL=http://127.0.0.1:9/", model_dir_var(id) + "=" + twins};
  std::vector<std::string> args = {"run", id};
  const GridSetup su = setup_for(id);
  const std::vector<std::string> ins = input_args(spec, su);
  args.insert(args.end(), ins.begin(), ins.end());
  args.insert(args.end(), {"--out", work.file("out.nii.gz"), "--no-verify", "--threads", "2", "--quiet", "--report",
                           work.file("r.json")});
  std::string cmdline = "qsm";
  for (const auto& x : args) cmdline += " " + x;
  SCOPED_TRACE(cmdline);

  const auto r = run_qsm(args, env, work.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "");  // --quiet
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;

  const auto j = nlohmann::json::parse(qsmtest::read_text(work.file("r.json")));
  EXPECT_EQ(j.at("model").at("id"), id);
  EXPECT_TRUE(j.at("warnings").empty()) << j.at("warnings").dump();
  ASSERT_EQ(j.at("model").at("files").size(), spec.files.size());
  for (const auto& f : j.at("model").at("files")) {
    EXPECT_TRUE(fs::equivalent(fs::path(f.at("path").get<std::string>()).parent_path(), twins)) << f.dump();
    EXPECT_EQ(f.at("source"), to_string(WeightSource::ModelDirForId)) << f.dump();
  }
  const Geometry g = grid(su.voxel_mm);
  const auto& outputs = j.at("outputs");
  ASSERT_FALSE(outputs.empty());
  std::set<std::string> names;
  for (const auto& o : outputs) {
    const std::string path = o.at("path").get<std::string>(), name = o.at("name").get<std::string>();
    SCOPED_TRACE(path);
    EXPECT_TRUE(names.insert(name).second) << "output '" << name << "' twice";
    ASSERT_TRUE(fs::exists(path)) << r.err;
    EXPECT_TRUE(fs::equivalent(fs::path(path).parent_path(), work.path()));
    const Volume v = io::read_nifti(path);
    EXPECT_EQ(v.dims(), (Dims3{su.edge, su.edge, su.edge}));
    EXPECT_EQ(v.frames(), 1);
    for (int a = 0; a < 3; ++a) EXPECT_NEAR(v.voxel_mm()[a], g.voxel_mm[a], 1e-6) << a;
    for (int row = 0; row < 3; ++row)
      for (int c = 0; c < 4; ++c) EXPECT_NEAR(v.affine().m[row][c], g.affine.m[row][c], 1e-4) << row << "," << c;
    std::int64_t bad = 0;
    for (double x : v.values()) bad += std::isfinite(x) ? 0 : 1;
    EXPECT_EQ(bad, 0) << "non-finite voxels in " << name;
  }
  // One output goes to --out itself; several get _NAME suffixes and --out is not written.
  EXPECT_EQ(fs::exists(work.file("out.nii.gz")), outputs.size() == 1);
}

std::vector<std::string> registry_ids() {
  std::vector<std::string> ids;
  for (const auto& s : all_models()) ids.emplace_back(s.id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryNetworkThroughQsmRun, ::testing::ValuesIn(registry_ids()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

}  // namespace
}  // namespace qsmcore
