// read_scan on small scans written here (io::write_nifti, sidecar text, hand-built int16 files):
// values against what was written (float-exact values, so reading must return them exactly),
// echo times and field strength against the sidecar text or the overrides, the B0 direction
// against the rotation's third row, and every kind of bad input refused naming the right file.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "io/nifti.h"
#include "onnx/test_util.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/scan.h"
#include "scan/scan_test_util.h"

namespace qsmcore {
namespace {

using qsmtest::error_of;
using qsmtest::scan::filled;
using qsmtest::scan::frame_of;
using qsmtest::scan::write_text;
constexpr double pi = std::numbers::pi;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const Dims3 kDims{8, 7, 6};

// Values exact in f32, so a file stores them without rounding: magnitude 100..116, phase in
// radians −3.125..3.125 (a range wide enough to be taken as radians).
Volume magnitude(std::int64_t echoes, const Geometry& g = Geometry::isotropic(1.0), const Dims3& d = kDims) {
  return filled(d, g, echoes,
                [](std::int64_t i, std::int64_t t) { return 100.0 + static_cast<double>((i + 5 * t) % 17); });
}
Volume phase(std::int64_t echoes, const Geometry& g = Geometry::isotropic(1.0), const Dims3& d = kDims) {
  return filled(d, g, echoes,
                [](std::int64_t i, std::int64_t t) { return 0.125 * static_cast<double>((i * 7 + t * 3) % 51 - 25); });
}

std::string sidecar(const std::string& te, const std::string& extra = "") {
  return R"({"EchoTime": )" + te + R"(, "MagneticFieldStrength": 3)" + extra + "}";
}

struct ScanDir {
  qsmtest::TempDir dir;

  // NAME.nii.gz (frames = echoes) and, unless json is empty, NAME.json.
  std::string put(const std::string& name, const Volume& v, const std::string& json) {
    const std::string path = dir.file(name + ".nii.gz");
    io::write_nifti(path, v);
    if (!json.empty()) write_text(dir.file(name + ".json"), json);
    return path;
  }
  // NAME_e1.nii … one 3-D file per echo, with jsons[e] beside echo e ("" for none).
  std::vector<std::string> put_echoes(const std::string& name, const Volume& v, const std::vector<std::string>& jsons) {
    std::vector<std::string> paths;
    for (std::int64_t t = 0; t < v.frames(); ++t) {
      const std::string stem = name + "_e" + std::to_string(t + 1);
      paths.push_back(dir.file(stem + ".nii"));
      io::write_nifti(paths.back(), frame_of(v, t));
      const std::string& json = jsons[static_cast<std::size_t>(t)];
      if (!json.empty()) write_text(dir.file(stem + ".json"), json);
    }
    return paths;
  }
  // A 3-echo scan, one 3-D file per echo, sidecars with scalar TEs 4, 8, 12 ms.
  ScanFiles per_echo(const std::string& tag = "") {
    const std::vector<std::string> j = {sidecar("0.004"), sidecar("0.008"), sidecar("0.012")};
    return {put_echoes("mag" + tag, magnitude(3), j), put_echoes("ph" + tag, phase(3), j)};
  }
  std::string json_of(const std::string& nifti) const { return sidecar_path_for(nifti); }
};

void expect_same_values(const Volume& a, const Volume& b) {
  ASSERT_EQ(a.dims(), b.dims());
  ASSERT_EQ(a.frames(), b.frames());
  for (std::int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << "value " << i;
}

std::string scan_error(const ScanFiles& f, const ScanOverrides& o = {}) {
  return error_of([&] { (void)read_scan(f, o); }, ErrorKind::InvalidInput);
}

TEST(ReadScan, FourDAndPerEchoFilesGiveTheSameScan) {
  ScanDir d;
  const std::string list = sidecar("[0.004, 0.008, 0.012]");
  const Scan four = read_scan({{d.put("mag", magnitude(3), list)}, {d.put("ph", phase(3), list)}});
  const Scan each = read_scan(d.per_echo());
  for (const Scan* s : {&four, &each}) {
    expect_same_values(s->magnitude, magnitude(3));
    expect_same_values(s->phase, phase(3));  // radians in (−π, π] already: unchanged
    EXPECT_EQ(s->te_s, (std::vector<double>{0.004, 0.008, 0.012}));
    EXPECT_EQ(s->te_source, "sidecar");
    EXPECT_EQ(s->b0_t, 3.0);
    EXPECT_EQ(s->b0_source, "sidecar");
    EXPECT_EQ(s->b0_dir, (Vec3{0.0, 0.0, 1.0}));
    EXPECT_EQ(s->b0_dir_source, "affine");
    EXPECT_EQ(s->echoes(), 3);
    EXPECT_EQ(s->phase_scaling.factor, 1.0);
    ASSERT_FALSE(s->notes.empty());
    EXPECT_EQ(s->notes[0], "phase values in [-3.125, 3.125]: taken as radians");
  }
  EXPECT_EQ(each.files.phase.size(), 3u);
}

TEST(ReadScan, EchoTimesFromEitherSidecarOrTheOverride) {
  ScanDir d;
  // The phase has no sidecars: the magnitude's give the echo times.
  const std::vector<std::string> j = {sidecar("0.004"), sidecar("0.0085")};
  const ScanFiles f{d.put_echoes("mag", magnitude(2), j), d.put_echoes("ph", phase(2), {"", ""})};
  const Scan s = read_scan(f);
  EXPECT_EQ(s.te_s, (std::vector<double>{0.004, 0.0085}));
  ScanOverrides o;
  o.te_s = {0.005, 0.01};
  const Scan t = read_scan(f, o);
  EXPECT_EQ(t.te_s, o.te_s);
  EXPECT_EQ(t.te_source, "--te");
  // --te also stands in for sidecars that are missing altogether.
  const ScanFiles bare{d.put_echoes("m2", magnitude(2), {"", ""}), d.put_echoes("p2", phase(2), {"", ""})};
  o.b0_t = 7.0;
  const Scan u = read_scan(bare, o);
  EXPECT_EQ(u.te_s, o.te_s);
  EXPECT_EQ(u.b0_t, 7.0);
  EXPECT_EQ(u.b0_source, "--b0");
}

TEST(ReadScan, MissingEchoTimeNamesTheSidecar) {
  ScanDir d;
  const ScanFiles f{d.put_echoes("mag", magnitude(2), {sidecar("0.004"), ""}),
                    d.put_echoes("ph", phase(2), {sidecar("0.004"), R"({"MagneticFieldStrength": 3})"})};
  const std::string e = scan_error(f);
  EXPECT_TRUE(has(e, "echo 2 has no echo time") && has(e, d.dir.file("ph_e2.json") + " has no EchoTime") &&
              has(e, "no sidecar " + d.dir.file("mag_e2.json")) && has(e, "--te"))
      << e;
}

TEST(ReadScan, EchoTimesMustIncreaseAndMatchTheEchoes) {
  ScanDir d;
  const std::vector<std::string> j = {sidecar("0.008"), sidecar("0.004")};
  const std::string e = scan_error({d.put_echoes("mag", magnitude(2), j), d.put_echoes("ph", phase(2), j)});
  EXPECT_TRUE(has(e, d.dir.file("ph_e2.json")) && has(e, "increase strictly")) << e;
  // A 4-D file whose sidecar lists 2 times for 3 echoes.
  const std::string two = sidecar("[0.004, 0.008]");
  const ScanFiles four{{d.put("m4", magnitude(3), two)}, {d.put("p4", phase(3), two)}};
  const std::string c = scan_error(four);
  EXPECT_TRUE(has(c, d.dir.file("p4.json")) && has(c, "2 echo time(s)") && has(c, "3 echo(es)")) << c;
  ScanOverrides o;
  o.te_s = {0.004, 0.008};
  EXPECT_TRUE(has(scan_error(four, o), "2 echo time(s) for 3 echoes"));
  o.te_s = {4, 8, 12};
  EXPECT_TRUE(has(scan_error(four, o), "not ms"));
}

TEST(ReadScan, EchoTimeInMillisecondsIsRefused) {
  ScanDir d;
  const std::vector<std::string> j = {sidecar("5")};
  const std::string e =
      scan_error({d.put_echoes("mag", magnitude(1), {sidecar("0.005")}), d.put_echoes("ph", phase(1), j)});
  EXPECT_TRUE(has(e, d.dir.file("ph_e1.json")) && has(e, "EchoTime") && has(e, "milliseconds")) << e;
}

TEST(ReadScan, MagnitudeAndPhaseSidecarsMustAgree) {
  ScanDir d;
  const std::string e = scan_error(
      {d.put_echoes("mag", magnitude(1), {sidecar("0.005")}), d.put_echoes("ph", phase(1), {sidecar("0.006")})});
  EXPECT_TRUE(has(e, d.dir.file("ph_e1.json")) && has(e, d.dir.file("mag_e1.json")) && has(e, "disagrees")) << e;
  const std::string b =
      scan_error({d.put_echoes("m2", magnitude(1), {sidecar("0.005")}),
                  d.put_echoes("p2", phase(1), {R"({"EchoTime": 0.005, "MagneticFieldStrength": 7})"})});
  EXPECT_TRUE(has(b, d.dir.file("m2_e1.json")) && has(b, "MagneticFieldStrength")) << b;
}

TEST(ReadScan, EchoFilesOnDifferentGridsNameTheFile) {
  ScanDir d;
  ScanFiles f = d.per_echo();
  // Phase echo 2 with one slice fewer.
  io::write_nifti(f.phase[1], frame_of(phase(1, Geometry::isotropic(1.0), {8, 7, 5}), 0));
  std::string e = scan_error(f);
  EXPECT_TRUE(has(e, f.phase[1]) && has(e, "phase echo 2") && has(e, "dimensions") && has(e, f.phase[0])) << e;
  // Magnitude echo 3 shifted by 2 mm: the affines differ.
  f = d.per_echo("b");
  Geometry shifted = Geometry::isotropic(1.0);
  shifted.affine.m[0][3] = 2.0;
  io::write_nifti(f.magnitude[2], frame_of(magnitude(1, shifted), 0));
  e = scan_error(f);
  EXPECT_TRUE(has(e, f.magnitude[2]) && has(e, "magnitude echo 3") && has(e, "affine")) << e;
}

TEST(ReadScan, MagnitudeAndPhaseMustMatch) {
  ScanDir d;
  ScanFiles f = d.per_echo();
  f.phase.pop_back();
  std::string e = scan_error(f);
  EXPECT_TRUE(has(e, "magnitude has 3 echo(es)") && has(e, "phase has 2 echo(es)") && has(e, f.phase[0])) << e;
  // A 4-D phase with other voxel sizes than the 4-D magnitude.
  const std::string list = sidecar("[0.004, 0.008]");
  const ScanFiles g{{d.put("m", magnitude(2), list)}, {d.put("p", phase(2, Geometry::isotropic(1.5)), list)}};
  e = scan_error(g);
  EXPECT_TRUE(has(e, g.phase[0] + ": the phase") && has(e, "magnitude " + g.magnitude[0]) && has(e, "voxel size")) << e;
  EXPECT_TRUE(has(scan_error({{}, g.phase}), "no magnitude file"));
}

TEST(ReadScan, NanVoxelNamesTheFile) {
  ScanDir d;
  ScanFiles f = d.per_echo();
  Volume bad = frame_of(phase(3), 1);
  bad.at(2, 3, 4) = std::numeric_limits<double>::quiet_NaN();
  io::write_nifti(f.phase[1], bad);
  const std::string e = scan_error(f);
  EXPECT_TRUE(has(e, f.phase[1]) && has(e, "NaN") && has(e, "(2,3,4)")) << e;
}

TEST(ReadScan, PhaseThatIsNotAnAngleIsRefused) {
  ScanDir d;
  const std::string list = sidecar("[0.004, 0.008]");
  const Volume raw = filled(kDims, Geometry::isotropic(1.0), 2,
                            [](std::int64_t i, std::int64_t t) { return static_cast<double>((i * 3 + t) % 1001); });
  const ScanFiles f{{d.put("m", magnitude(2), list)}, {d.put("p", raw, list)}};
  const std::string e = scan_error(f);
  EXPECT_TRUE(has(e, f.phase[0]) && has(e, "[0, 1000] (integers)") && has(e, "--phase-scale")) << e;
}

TEST(ReadScan, UnitsRadWithAnIntegerRangeIsRefused) {
  ScanDir d;
  // Siemens-style integers, which would be taken as × π/4096, but the sidecar claims radians.
  const Volume raw = filled(kDims, Geometry::isotropic(1.0), 1, [](std::int64_t i, std::int64_t) {
    return static_cast<double>(-4096 + 2 * (i * 29 % 4096));
  });
  const ScanFiles f{{d.put("m", magnitude(1), sidecar("0.004"))},
                    {d.put("p", raw, sidecar("0.004", R"(, "Units": "rad")"))}};
  const std::string e = scan_error(f);
  EXPECT_TRUE(has(e, d.dir.file("p.json")) && has(e, "\"Units\": \"rad\"") && has(e, "not radians")) << e;
}

// Siemens phase as dcm2niix writes it: stored 0..4095, scl_slope 2, scl_inter −4096.
TEST(ReadScan, SiemensScaledIntegersBecomeRadiansExactly) {
  ScanDir d;
  const std::int64_t n = kDims[0] * kDims[1] * kDims[2];
  std::vector<std::int16_t> stored(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    stored[static_cast<std::size_t>(i)] = static_cast<std::int16_t>(i * 4095 / (n - 1));
  const std::string p = d.dir.file("p.nii");
  qsmtest::scan::write_int16_nifti(p, kDims, stored, 2.0f, -4096.0f);
  write_text(d.dir.file("p.json"), sidecar("0.004", R"(, "Units": "arbitrary")"));
  const Scan s = read_scan({{d.put("m", magnitude(1), sidecar("0.004"))}, {p}});
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = 2.0 * stored[static_cast<std::size_t>(i)] - 4096.0;
    ASSERT_EQ(s.phase.data()[i], v == -4096.0 ? pi : v * pi / 4096.0)
        << "stored " << stored[static_cast<std::size_t>(i)];
  }
  EXPECT_EQ(s.notes[0], "phase values in [-4096, 4094] (integers): taken as Siemens' scaled 12-bit phase, × π/4096");
}

TEST(ReadScan, UnscaledTwelveBitBecomesRadiansExactly) {
  ScanDir d;
  const Volume raw = filled(kDims, Geometry::isotropic(1.0), 1,
                            [](std::int64_t i, std::int64_t) { return static_cast<double>(i * 4095 / 335); });
  const Scan s = read_scan({{d.put("m", magnitude(1), sidecar("0.004"))}, {d.put("p", raw, sidecar("0.004"))}});
  for (std::int64_t i = 0; i < raw.size(); ++i) {
    const double v = raw.data()[i];
    ASSERT_EQ(s.phase.data()[i], v == 0 ? pi : (v - 2048.0) * pi / 2048.0) << v;
  }
}

TEST(ReadScan, B0DirectionFromAffineSidecarOrOverride) {
  ScanDir d;
  const double deg = 30.0, t = deg * pi / 180.0;
  const Geometry g = qsmtest::scan::rotated_about_x(deg);
  const ScanFiles f{{d.put("m", magnitude(1, g), sidecar("0.004"))}, {d.put("p", phase(1, g), sidecar("0.004"))}};
  const Scan a = read_scan(f);
  EXPECT_EQ(a.b0_dir_source, "affine");
  EXPECT_NEAR(a.b0_dir[0], 0.0, 1e-6);  // f32 affine in the file
  EXPECT_NEAR(a.b0_dir[1], std::sin(t), 1e-6);
  EXPECT_NEAR(a.b0_dir[2], std::cos(t), 1e-6);
  write_text(d.dir.file("p.json"), sidecar("0.004", R"(, "B0_dir": [0, 0, 1])"));
  const Scan b = read_scan(f);
  EXPECT_EQ(b.b0_dir_source, "sidecar");
  EXPECT_EQ(b.b0_dir, (Vec3{0.0, 0.0, 1.0}));
  ScanOverrides o;
  o.b0_dir = Vec3{1.0, 0.0, 1.0};
  const Scan c = read_scan(f, o);
  EXPECT_EQ(c.b0_dir_source, "--b0-dir");
  EXPECT_NEAR(c.b0_dir[0], std::sqrt(0.5), 1e-15);
  EXPECT_NEAR(c.b0_dir[2], std::sqrt(0.5), 1e-15);
  write_text(d.dir.file("m.json"), sidecar("0.004", R"(, "B0_dir": [0, 1, 0])"));
  EXPECT_TRUE(has(scan_error(f), "B0_dir disagrees"));
}

TEST(ReadScan, FieldStrengthAndImagingFrequency) {
  ScanDir d;
  // 123.222513 MHz / 42.58 MHz/T = 2.894 T: 3.5 % below the nominal 3 T (methods.md §1.3).
  const std::string siemens = sidecar("0.004", R"(, "ImagingFrequency": 123.222513)");
  const ScanFiles f{{d.put("m", magnitude(1), siemens)}, {d.put("p", phase(1), siemens)}};
  const Scan s = read_scan(f);
  EXPECT_EQ(s.b0_t, 3.0);
  bool noted = false;
  for (const std::string& n : s.notes) noted = noted || (has(n, "2.89") && has(n, "--b0") && has(n, "below"));
  EXPECT_TRUE(noted);
  // 127.74 MHz is 3.0003 T: no note.
  const std::string exact = sidecar("0.004", R"(, "ImagingFrequency": 127.74)");
  const ScanFiles g{{d.put("m2", magnitude(1), exact)}, {d.put("p2", phase(1), exact)}};
  EXPECT_EQ(read_scan(g).notes.size(), 1u);  // the phase scaling's line only
  const std::string none = R"({"EchoTime": 0.004})";
  const ScanFiles h{{d.put("m3", magnitude(1), none)}, {d.put("p3", phase(1), none)}};
  EXPECT_TRUE(has(scan_error(h), "MagneticFieldStrength"));
}

// Per-echo files are read straight into the result: the peak holds the result plus one echo file
// (its f64 volume and f32 bytes), never a second copy of every echo. A 4-D file becomes the
// result itself (its f64 volume plus its f32 bytes while reading).
TEST(ReadScan, HoldsAtMostOneEchoBesideTheResult) {
  ScanDir d;
  const Dims3 dims{32, 32, 24};
  const std::int64_t echoes = 4, vox = dims[0] * dims[1] * dims[2];
  std::vector<std::string> js;
  for (int e = 1; e <= echoes; ++e) js.push_back(sidecar("0.00" + std::to_string(2 * e)));
  const Geometry g = Geometry::isotropic(1.0);
  const ScanFiles each{d.put_echoes("m", magnitude(echoes, g, dims), js),
                       d.put_echoes("p", phase(echoes, g, dims), js)};
  const std::string list = sidecar("[0.002, 0.004, 0.006, 0.008]");
  const ScanFiles four{{d.put("m4", magnitude(echoes, g, dims), list)}, {d.put("p4", phase(echoes, g, dims), list)}};
  for (const ScanFiles* f : {&each, &four}) {
    reset_memory_peak();
    const std::int64_t base = memory_current();
    const Scan s = read_scan(*f);
    const double per_voxel = static_cast<double>(memory_peak() - base) / static_cast<double>(vox);
    const double bound = f == &each ? 16.0 * echoes + 12.0 : 20.0 * echoes;
    std::printf("read_scan %s: peak %.1f B/voxel (bound %.0f)\n", f == &each ? "per-echo" : "4-D", per_voxel, bound);
    EXPECT_LE(per_voxel, bound + 0.5);
    EXPECT_EQ(s.echoes(), echoes);
  }
}

}  // namespace
}  // namespace qsmcore
