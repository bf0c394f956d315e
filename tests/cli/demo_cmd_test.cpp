// `qsm demo` end to end at small sizes, against the phantoms' ground truth.
// Part 1: the atlas head's raw scan through run_field_pipeline (default chain, the shipped
// network as the inversion, TKD): every number finite, χ that correlates with the true χ beyond
// what the measured failures reach, the default chain ahead of TKD, the demo's own scores checked
// by recomputing them from the files it wrote, memory measured ≤ predicted, figures that decode at
// the promised size with the window stated. Part 2 (the simulated local field, what the network
// was trained for): the shipped network must beat TKD's best threshold. With an architecture twin
// (random weights) the demo must say its metrics mean nothing; TKD on the simulated field is a
// check of the whole physics chain (phantom, forward model, kernel conventions, metrics).
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "io/nifti.h"
#include "support/test_data.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double num(const json& j, const char* key) {
  const json& v = j.at(key);
  EXPECT_TRUE(v.is_number()) << key << " is not a number: " << v.dump();  // NaN and Inf are written as null
  return v.is_number() ? v.get<double>() : std::nan("");
}

// Width and height of a PNG decoded fully with libpng ({0, 0} if it does not decode), and its
// file's bytes (for the tEXt chunks, which are stored uncompressed).
struct PngInfo {
  int width = 0, height = 0;
  std::string bytes;
};
PngInfo decode_png(const std::string& path) {
  PngInfo p;
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path.c_str())) return p;
  img.format = PNG_FORMAT_GRAY;
  std::vector<unsigned char> px(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, px.data(), 0, nullptr)) return p;
  p.width = static_cast<int>(img.width);
  p.height = static_cast<int>(img.height);
  p.bytes = qsmtest::read_text(path);
  return p;
}

// QSM-CI's demeaned NRMSE (methods.md §8) and the least-squares slope of χ on the truth over the
// mask, from the written files: the oracle for the figures the demo prints.
struct Recomputed {
  double nrmse = 0.0, slope = 0.0;
};
Recomputed recompute(const std::string& chi_file, const std::string& truth_file, const std::string& mask_file) {
  const Volume chi = io::read_nifti(chi_file), t = io::read_nifti(truth_file), m = io::read_nifti(mask_file);
  double n = 0, sc = 0, st = 0;
  for (std::int64_t i = 0; i < m.voxels(); ++i)
    if (m.data()[i] > 0.5) n += 1, sc += chi.data()[i], st += t.data()[i];
  const double mc = sc / n, mt = st / n;
  double e2 = 0, t2 = 0, tc = 0;
  for (std::int64_t i = 0; i < m.voxels(); ++i)
    if (m.data()[i] > 0.5) {
      const double dc = chi.data()[i] - mc, dt = t.data()[i] - mt;
      e2 += (dc - dt) * (dc - dt);
      t2 += dt * dt;
      tc += dt * dc;
    }
  return {100.0 * std::sqrt(e2 / t2), tc / t2};
}

// Part 1's chains, by key.
const json& chain(const json& j, const std::string& key) {
  for (const json& c : j.at("raw_scan").at("chains"))
    if (c.at("key") == key) return c;
  ADD_FAILURE() << "no chain " << key;
  static const json none = json::object();
  return none;
}

// The figures: χ in four rows (truth and three chains) of three panels at 2 pixels per voxel
// (128 + 154 + 128 pixels across for 64 × 77 × 64 voxels, rows at least 154 high), the window and
// orientation stated; the others decode at 2 pixels per voxel too.
void expect_figures(const std::string& out) {
  const PngInfo chi_png = decode_png(out + "/chi.png");
  EXPECT_GT(chi_png.width, 2 * (64 + 77 + 64));
  EXPECT_GT(chi_png.height, 4 * 2 * 77);
  EXPECT_NE(chi_png.bytes.find("window -0.15 to 0.15 ppm"), std::string::npos);
  EXPECT_NE(chi_png.bytes.find("radiological"), std::string::npos);
  for (const char* f : {"local_field.png", "phase.png", "simulated/chi.png"}) {
    const PngInfo p = decode_png(out + "/" + f);
    EXPECT_GT(p.width, 2 * (64 + 64)) << f;
    EXPECT_GT(p.height, 2 * 64) << f;
  }
}

// A chain of part 1 that ran, with finite scores that a right inversion reaches, its memory as
// predicted, and the local field the chains that invert the background removal's field share
// (`removal`: the network's chain; TV's writes the field of its χ instead).
void expect_sound_chain(const json& c, const json& removal, std::int64_t voxels) {
  ASSERT_TRUE(c.at("ran").get<bool>()) << c.dump();
  const json& m = c.at("metrics");
  for (const char* k : {"nrmse_demeaned_percent", "xsim", "hfen", "cc", "slope", "intercept_ppm"})
    EXPECT_TRUE(std::isfinite(num(m, k))) << c.at("key") << " " << k;
  // Measured failures of the same scan at this size (TKD on the pipeline's own local field):
  // the kernel along x or y instead of z gives CC −0.16 / −0.07, the local field passed through
  // as χ 0.08, χ of the wrong sign −0.36; the right TKD 0.36, the other chains 0.40–0.43. The
  // bound of 0.25 fails each failure with room for changes to the stages. (At 1 mm the default
  // chain reaches 0.87: these 2.8 mm voxels blur the cortex the local field lives in.)
  EXPECT_GT(num(m, "cc"), 0.25) << c.at("key");
  // χ on the truth: positive (the right sign and axis), below 1.5 (no runaway amplification).
  EXPECT_GT(num(m, "slope"), 0.1) << c.at("key");
  EXPECT_LT(num(m, "slope"), 1.5) << c.at("key");
  EXPECT_GT(num(c, "seconds"), 0.0);
  // The scan the pipeline holds: magnitude and phase, 4 echoes of f64.
  EXPECT_EQ(c.at("scan_bytes").get<std::int64_t>(), 2 * 4 * voxels * 8);
  const auto predicted = c.at("predicted_peak_bytes").get<std::int64_t>();
  const auto measured = c.at("measured_peak_bytes").get<std::int64_t>();
  EXPECT_LE(measured, predicted) << c.at("key");  // the issue's +5 % / −0 %
  EXPECT_LE(static_cast<double>(predicted), 1.05 * static_cast<double>(measured)) << c.at("key");
  // Every chain runs the same stages before its inversion, deterministically; TV's then writes
  // the field of its χ, nearer the truth (methods.md §5.2; measured 78.0 against 100.1 % here).
  if (c.at("key") == "tv")
    EXPECT_LT(num(c, "local_field_nrmse_demeaned_percent"), num(removal, "local_field_nrmse_demeaned_percent") - 5.0);
  else
    EXPECT_EQ(num(c, "local_field_nrmse_demeaned_percent"), num(removal, "local_field_nrmse_demeaned_percent"));
}

TEST(QsmDemo, TheRawScanThroughThePipelineScoresAgainstTheTruth) {
  qsmtest::ScratchDir work;
  const std::string out = work.file("demo");
  // No --model and no weight variable: the shipped network is found by itself.
  const auto r = qsmtest::run_qsm({"demo", "--out", out, "--size", "64", "--threads", "2"},
                                  {"HOME=" + work.file("home")}, work.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  for (const char* f :
       {"chi_true.nii.gz", "mask_true.nii.gz", "local_field_true.nii.gz", "chi_tv.nii.gz", "chi_network.nii.gz",
        "chi_tkd.nii.gz", "local_field.nii.gz", "brain_mask.nii.gz", "chi.png", "local_field.png", "phase.png",
        "demo.json", "simulated/chi_true.nii.gz", "simulated/local_field.nii.gz", "simulated/mask.nii.gz",
        "simulated/chi_network.nii.gz", "simulated/chi_tkd.nii.gz", "simulated/chi.png"})
    EXPECT_TRUE(fs::exists(fs::path(out) / f)) << f;
  for (const auto& name : qsmtest::listing(out)) EXPECT_NE(name[0], '.') << "leftover temporary " << name;
  const json j = json::parse(qsmtest::read_text(out + "/demo.json"));

  // The scan: the atlas box on 64 voxels across, 181/64 mm each, 4 echoes.
  const json& scan = j.at("raw_scan").at("scan");
  EXPECT_EQ(scan.at("dims"), json::array({64, 77, 64}));
  EXPECT_DOUBLE_EQ(scan.at("voxel_mm").at(0).get<double>(), 181.0 / 64.0);
  ASSERT_EQ(scan.at("te_s").size(), 4u);

  const json& tv = chain(j, "tv");
  const json& net = chain(j, "network");
  const json& tk = chain(j, "tkd");
  for (const json* c : {&tv, &net, &tk}) expect_sound_chain(*c, net, 64 * 77 * 64);
  // The default chain (TV-ADMM) ahead of TKD: measured 102 against 112 % here, 72 against 92 % at
  // 128 voxels across, 49 against 68 % at 1 mm (docs/pipeline.md): TKD's truncated inverse keeps
  // the noise and streaks that TV's regularisation removes.
  EXPECT_LT(num(tv.at("metrics"), "nrmse_demeaned_percent"), num(tk.at("metrics"), "nrmse_demeaned_percent"));
  EXPECT_GT(num(tv.at("metrics"), "cc"), num(tk.at("metrics"), "cc"));

  // The printed figures are what they say: recomputed from the files (f32 on disk, hence the slack).
  for (const char* key : {"tv", "network", "tkd"}) {
    const Recomputed rc =
        recompute(out + "/chi_" + key + ".nii.gz", out + "/chi_true.nii.gz", out + "/mask_true.nii.gz");
    EXPECT_NEAR(rc.nrmse, num(chain(j, key).at("metrics"), "nrmse_demeaned_percent"), 0.01) << key;
    EXPECT_NEAR(rc.slope, num(chain(j, key).at("metrics"), "slope"), 1e-4) << key;
  }

  expect_figures(out);

  // Part 2: the shipped network on the simulated local field beats TKD at its best threshold.
  const json& sim = j.at("simulated_local_field");
  EXPECT_EQ(j.at("network").at("id"), "qsmcore-invnet");
  EXPECT_EQ(j.at("network").at("weights"), "shipped");
  EXPECT_EQ(r.out.find("not meaningful"), std::string::npos) << r.out;
  const json& m = sim.at("network").at("metrics");
  const json& best = sim.at("tkd_best").at("metrics");
  EXPECT_LT(num(m, "nrmse_percent"), num(best, "nrmse_percent"));
  EXPECT_GT(num(m, "xsim"), num(best, "xsim"));
  EXPECT_LE(num(best, "nrmse_demeaned_percent"), num(sim.at("tkd").at("metrics"), "nrmse_demeaned_percent"));
  EXPECT_LE(sim.at("network").at("measured_peak_bytes").get<std::int64_t>(),
            sim.at("network").at("predicted_peak_bytes").get<std::int64_t>());
  for (const char* text : {"part 1", "part 2", "peak memory", "TKD (best t", "default chain: TV-ADMM"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
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

  const json j = json::parse(qsmtest::read_text(out + "/demo.json"));
  // The twin is not the published network (its recipe is found by its file name), and the demo
  // must say so.
  EXPECT_EQ(j.at("network").at("id"), "xqsm");
  EXPECT_EQ(j.at("network").at("trained_weights"), false);
  EXPECT_NE(r.out.find("random weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not meaningful"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("xQSM (twin)"), std::string::npos) << r.out;
  const json& sim = j.at("simulated_local_field");
  EXPECT_GT(sim.at("network").at("predicted_peak_bytes").get<std::int64_t>(), 0);
  EXPECT_GT(sim.at("network").at("measured_peak_bytes").get<std::int64_t>(), 0);

  // TKD against the ground truth. NRMSE = 100·‖e‖/‖χ‖ in the brain mask (not demeaned), so
  // predicting 0 everywhere scores exactly 100 %. TKD cannot recover the in-mask mean of χ (1/D
  // is 0 at k = 0) and loses the cone where |D| < 0.19; QSM-CI reports 36.3 % for TKD on its 2019
  // in-silico head, and this phantom gives 39.1 / 37.5 / 36.4 % at 32³ / 48³ / 64³. Measured
  // failures on the same 48³ head: the kernel along x or y instead of z 175 % / 171 %, the
  // field passed through as χ 111 %. The bound of 60 % leaves room for changes to the phantom
  // and still fails each of those.
  const json& tkd = sim.at("tkd").at("metrics");
  ASSERT_TRUE(tkd.contains("nrmse_percent")) << tkd.dump();
  const double nrmse = num(tkd, "nrmse_percent");
  EXPECT_LT(nrmse, 60.0);
  EXPECT_GT(nrmse, 1.0);  // TKD is not exact: a tiny value would mean χ leaked into the result
  EXPECT_GT(num(tkd, "xsim"), 0.0);
  EXPECT_NE(r.out.find("NRMSE"), std::string::npos);

  const Volume chi = io::read_nifti(out + "/simulated/chi_tkd.nii.gz");
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
  const json j = json::parse(qsmtest::read_text(out + "/demo.json"));
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
  // refused before it simulates anything, naming the limit, and writes no folder.
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

TEST(QsmDemo, TooSmallASizeIsRefused) {
  qsmtest::ScratchDir work;
  const auto r = qsmtest::run_qsm({"demo", "--out", work.file("d"), "--size", "16"}, {}, work.path());
  EXPECT_NE(r.status, 0);
  EXPECT_NE((r.out + r.err).find("--size"), std::string::npos) << r.out << r.err;
  EXPECT_FALSE(fs::exists(work.file("d")));
}

}  // namespace
}  // namespace qsmcore
