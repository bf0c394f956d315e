// convert_dicom on DICOM series written here by tools/testdata/make_dicom.py (pydicom, as a
// Siemens scanner exports a multi-echo GRE: magnitude and phase as separate series, 12-bit phase
// with RescaleSlope 2 / RescaleIntercept −4096) from the head phantom's raw scan, then read_scan:
// the values against the phantom's own magnitude and phase (matched voxel by voxel through the
// two affines), the echo times and field strength against what was written, the B0 direction
// against the phantom's, and each refusal naming the folder. Skipped, saying why, when dcm2niix
// or pydicom is missing (tools/setup.sh installs both).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <numbers>

#include "io/npy.h"
#include "onnx/test_util.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/phantom.h"
#include "qsmcore/scan.h"
#include "qsmcore/tensor.h"
#include "scan/scan_test_util.h"
#include "system/spawn.h"

namespace qsmcore {
namespace {

using qsmtest::error_of;
using qsmtest::scan::filled;
using qsmtest::scan::write_text;
constexpr double pi = std::numbers::pi;
constexpr double kInf = std::numeric_limits<double>::infinity();
const char* kPython = "/usr/bin/python3";

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Why the DICOM round trip cannot run here, if it cannot (looked up once).
std::optional<std::string> missing_tools() {
  static const std::optional<std::string> why = []() -> std::optional<std::string> {
    if (system::run_command({"dcm2niix", "-v"}).exit_code == 127)
      return "dcm2niix is not installed (Debian package dcm2niix; tools/setup.sh installs it)";
    if (system::run_command({kPython, "-c", "import pydicom, numpy"}).exit_code != 0)
      return std::string(kPython) + " cannot import pydicom (Debian package python3-pydicom)";
    return std::nullopt;
  }();
  return why;
}

#define SKIP_WITHOUT_TOOLS()                                    \
  do {                                                          \
    if (const auto why = missing_tools()) GTEST_SKIP() << *why; \
  } while (0)

// A volume as the .npy make_dicom.py takes: shape (X, Y, Z, echoes) in C order, times `scale`.
void write_array(const std::string& path, const Volume& v, double scale = 1.0) {
  const Dims3 d = v.dims();
  const std::int64_t e = v.frames();
  Tensor t = Tensor::zeros(DType::F64, {d[0], d[1], d[2], e});
  double* out = t.data<double>();
  for (std::int64_t f = 0; f < e; ++f)
    for (std::int64_t k = 0; k < d[2]; ++k)
      for (std::int64_t j = 0; j < d[1]; ++j)
        for (std::int64_t i = 0; i < d[0]; ++i)
          out[((i * d[1] + j) * d[2] + k) * e + f] =
              scale * v.frame(f)[static_cast<std::size_t>(i + d[0] * (j + d[1] * k))];
  io::write_npy(path, t);
}

std::string affine_text(const Affine& a) {
  std::string s;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) s += (s.empty() ? "" : ",") + std::to_string(a.m[r][c]);
  return s;
}

std::string te_text(const std::vector<double>& te) {
  std::string s;
  for (double t : te) s += (s.empty() ? "" : ",") + std::to_string(t);
  return s;
}

// Runs make_dicom.py with `args`; a failure of the script is a test failure.
void make_dicom(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kPython, std::string(QSM_SOURCE_DIR) + "/tools/testdata/make_dicom.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  const system::CommandResult r = system::run_command(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
}

// The map from the read volume's voxel index to the phantom's: M = A_phantom⁻¹ · A_read, which
// for the same grid is a signed permutation with a whole-number offset.
struct IndexMap {
  std::array<std::array<double, 4>, 3> m{};
  std::array<std::int64_t, 3> at(std::int64_t i, std::int64_t j, std::int64_t k) const {
    std::array<std::int64_t, 3> p{};
    for (int r = 0; r < 3; ++r)
      p[static_cast<std::size_t>(r)] = std::llround(m[r][0] * i + m[r][1] * j + m[r][2] * k + m[r][3]);
    return p;
  }
};

IndexMap index_map(const Affine& phantom, const Affine& read) {
  const auto& a = phantom.m;
  // Inverse of the 3×3 part by cofactors.
  const double det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) -
                     a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
                     a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
  std::array<std::array<double, 3>, 3> inv{};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      const int r1 = (c + 1) % 3, r2 = (c + 2) % 3, c1 = (r + 1) % 3, c2 = (r + 2) % 3;
      inv[r][c] = (a[r1][c1] * a[r2][c2] - a[r1][c2] * a[r2][c1]) / det;
    }
  IndexMap map;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) {
      double v = 0.0;
      for (int q = 0; q < 3; ++q) v += inv[r][q] * (read.m[q][c] - (c == 3 ? a[q][3] : 0.0));
      map.m[r][c] = v;
    }
  return map;
}

// A round trip through DICOM of the head phantom's raw scan (wrapped multi-echo phase, noise, an
// acquisition angulated by 20° about x): the DICOM series is written once for the suite.
class DicomRoundTrip : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (missing_tools()) return;
    dir_ = new qsmtest::TempDir;
    o_.dims = {48, 48, 48};
    o_.te_s = {0.004, 0.012, 0.020};
    o_.b0_t = 7.0;
    o_.b0_dir = {0.0, std::sin(20.0 * pi / 180.0), std::cos(20.0 * pi / 180.0)};
    o_.extracerebral = o_.air_outside = true;
    o_.peak_snr = 100.0;
    phantom_ = new Phantom(make_head_phantom(o_));
    double peak = 0.0;
    for (std::int64_t i = 0; i < phantom_->magnitude.size(); ++i) peak = std::max(peak, phantom_->magnitude.data()[i]);
    mag_scale_ = 4000.0 / peak;  // into the 12 bits a Siemens magnitude has
    write_array(dir_->file("mag.npy"), phantom_->magnitude, mag_scale_);
    write_array(dir_->file("phase.npy"), phantom_->phase);
    make_dicom({"--out", dir_->file("dicom"), "--magnitude", dir_->file("mag.npy"), "--phase", dir_->file("phase.npy"),
                "--te", te_text(o_.te_s), "--b0", "7", "--affine", affine_text(phantom_->phase.geometry().affine),
                "--series", "2"});
  }
  static void TearDownTestSuite() {
    delete phantom_;
    delete dir_;
    phantom_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override { SKIP_WITHOUT_TOOLS(); }

  static inline qsmtest::TempDir* dir_ = nullptr;
  static inline Phantom* phantom_ = nullptr;
  static inline PhantomOptions o_;
  static inline double mag_scale_ = 1.0;
};

TEST_F(DicomRoundTrip, ScanEqualsThePhantom) {
  std::vector<std::string> notes;
  reset_memory_peak();
  const std::int64_t base = memory_current();
  const ScanFiles files = convert_dicom(dir_->file("dicom"), dir_->file("work"), &notes);
  const double convert_bytes_per_voxel =
      static_cast<double>(memory_peak() - base) / static_cast<double>(phantom_->phase.voxels());
  ASSERT_EQ(files.magnitude.size(), 3u);
  ASSERT_EQ(files.phase.size(), 3u);
  ASSERT_FALSE(notes.empty());
  EXPECT_TRUE(has(notes[0], dir_->file("dicom")) && has(notes[0], "magnitude series 2") &&
              has(notes[0], "phase series 3"))
      << notes[0];
  // Only headers and sidecars are read: no voxel is held.
  EXPECT_LT(convert_bytes_per_voxel, 1.0);

  const Scan s = read_scan(files);
  // Echo times in s and the field strength, as written (EchoTime in ms in the DICOM).
  ASSERT_EQ(s.te_s.size(), 3u);
  for (std::size_t e = 0; e < 3; ++e) EXPECT_NEAR(s.te_s[e], o_.te_s[e], 1e-9) << "echo " << e + 1;
  EXPECT_EQ(s.b0_t, 7.0);
  // Siemens' phase after its header scaling: values v with radians = v·π/4096.
  EXPECT_DOUBLE_EQ(s.phase_scaling.factor, pi / 4096.0);
  EXPECT_EQ(s.phase_scaling.raw_offset, 0.0);

  const Dims3 d = s.phase.dims();
  ASSERT_EQ(d, o_.dims);
  const IndexMap map = index_map(phantom_->phase.geometry().affine, s.phase.geometry().affine);
  // The same grid: a signed permutation (one ±1 in each row and column) with a whole-number offset.
  for (int r = 0; r < 3; ++r) {
    double row = 0.0, col = 0.0;
    for (int c = 0; c < 4; ++c) {
      const double v = map.m[r][c];
      EXPECT_NEAR(v, std::round(v), 1e-3) << "index map (" << r << ", " << c << ")";
      if (c < 3) row += std::abs(std::round(v)), col += std::abs(std::round(map.m[c][r]));
    }
    EXPECT_TRUE(row == 1.0 && col == 1.0) << "index map row/column " << r;
  }
  // B0 in the read volume's voxel axes is the phantom's, carried through the same map.
  EXPECT_EQ(s.b0_dir_source, "affine");
  for (int c = 0; c < 3; ++c) {
    double want = 0.0;
    for (int r = 0; r < 3; ++r) want += std::round(map.m[r][c]) * o_.b0_dir[static_cast<std::size_t>(r)];
    EXPECT_NEAR(s.b0_dir[static_cast<std::size_t>(c)], want, 1e-5) << "B0 direction, axis " << c;
  }

  double worst_phase = 0.0, worst_mag = 0.0;
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const auto p = map.at(i, j, k);
        for (std::size_t a = 0; a < 3; ++a) ASSERT_TRUE(p[a] >= 0 && p[a] < o_.dims[a]) << i << "," << j << "," << k;
        const auto at = static_cast<std::size_t>(i + d[0] * (j + d[1] * k));
        const auto pt = static_cast<std::size_t>(p[0] + d[0] * (p[1] + d[1] * p[2]));
        for (std::int64_t e = 0; e < 3; ++e) {
          const double dp = std::remainder(s.phase.frame(e)[at] - phantom_->phase.frame(e)[pt], 2.0 * pi);
          const double dm = s.magnitude.frame(e)[at] - mag_scale_ * phantom_->magnitude.frame(e)[pt];
          worst_phase = std::max(worst_phase, std::isnan(dp) ? kInf : std::abs(dp));  // NaN fails
          worst_mag = std::max(worst_mag, std::isnan(dm) ? kInf : std::abs(dm));
        }
      }
  // 12-bit phase: rounding to a step of π/2048 errs by at most half of it; magnitude integers.
  EXPECT_LE(worst_phase, pi / 4096.0 + 1e-9);
  EXPECT_LE(worst_mag, 0.5 + 1e-9);
  std::printf(
      "DICOM round trip: worst phase error %.3g rad (pi/4096 = %.3g), magnitude %.3g; convert_dicom "
      "peak %.3g accounted bytes/voxel\n",
      worst_phase, pi / 4096.0, worst_mag, convert_bytes_per_voxel);
}

// Small series for the refusals: 8×7×6 voxels, 3 echoes, 1 mm, axial.
struct SmallScan {
  qsmtest::TempDir dir;
  SmallScan() {
    const Dims3 d{8, 7, 6};
    const Geometry g = Geometry::isotropic(1.0);
    write_array(dir.file("mag.npy"),
                filled(d, g, 3, [](std::int64_t i, std::int64_t t) { return 1000.0 + i + 100.0 * t; }));
    write_array(dir.file("phase.npy"), filled(d, g, 3, [](std::int64_t i, std::int64_t t) {
                  return std::remainder(0.1 * i * (t + 1), 2 * pi);
                }));
    write_array(dir.file("mag_small.npy"), filled({4, 4, 3}, g, 1, [](std::int64_t i, std::int64_t) { return i; }));
  }
  // make_dicom.py into DIR with the given parts and extra options.
  void write(const std::string& out, bool magnitude, bool phase, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> a = {"--out", dir.file(out), "--te", "0.004,0.012,0.020", "--b0", "3"};
    if (magnitude) a.insert(a.end(), {"--magnitude", dir.file("mag.npy")});
    if (phase) a.insert(a.end(), {"--phase", dir.file("phase.npy")});
    a.insert(a.end(), extra.begin(), extra.end());
    make_dicom(a);
  }
  std::string convert_error(const std::string& dicom) {
    return error_of([&] { (void)convert_dicom(dir.file(dicom), dir.file(dicom + "-work")); }, ErrorKind::InvalidInput);
  }
};

TEST(ConvertDicom, MissingDcm2niixNamesTheDebianPackage) {
  qsmtest::TempDir empty;  // PATH holds only this folder: dcm2niix cannot be found
  const char* old = std::getenv("PATH");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("PATH", empty.path().c_str(), 1);
  const std::string e =
      error_of([&] { (void)convert_dicom(empty.path().string(), empty.file("work")); }, ErrorKind::InvalidInput);
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_TRUE(has(e, "dcm2niix is not installed") && has(e, "Debian") && has(e, empty.path().string())) << e;
}

TEST(ConvertDicom, FolderMissingOrWorkFolderInUse) {
  qsmtest::TempDir d;
  std::string e = error_of([&] { (void)convert_dicom(d.file("nope"), d.file("work")); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(has(e, d.file("nope")) && has(e, "no such folder")) << e;
  std::filesystem::create_directories(d.file("work"));
  write_text(d.file("work/old.nii.gz"), "x");
  e = error_of([&] { (void)convert_dicom(d.path().string(), d.file("work")); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(has(e, d.file("work")) && has(e, "old.nii.gz") && has(e, "empty work folder")) << e;
}

TEST(ConvertDicom, NoDicomInTheFolder) {
  SKIP_WITHOUT_TOOLS();
  qsmtest::TempDir d;
  std::filesystem::create_directories(d.file("dicom"));
  write_text(d.file("dicom/notes.txt"), "not a DICOM file\n");
  const std::string e =
      error_of([&] { (void)convert_dicom(d.file("dicom"), d.file("work")); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(has(e, d.file("dicom")) && has(e, "no DICOM images found")) << e;
}

TEST(ConvertDicom, NoPhaseSeries) {
  SKIP_WITHOUT_TOOLS();
  SmallScan s;
  s.write("dicom", true, false);
  const std::string e = s.convert_error("dicom");
  EXPECT_TRUE(has(e, s.dir.file("dicom")) && has(e, "no phase series") && has(e, "series 2")) << e;
}

TEST(ConvertDicom, EchoCountsThatDiffer) {
  SKIP_WITHOUT_TOOLS();
  SmallScan s;
  s.write("dicom", true, true, {"--phase-echoes", "2"});
  const std::string e = s.convert_error("dicom");
  EXPECT_TRUE(has(e, s.dir.file("dicom")) && has(e, "has 3 echo(es) but the phase") && has(e, "has 2")) << e;
}

TEST(ConvertDicom, SeveralPhaseSeriesCannotBeToldApart) {
  SKIP_WITHOUT_TOOLS();
  SmallScan s;
  // Siemens' scan without and with its 2-D distortion correction (ND and DIS2D), in one folder.
  s.write("dicom", true, true, {"--series", "2"});
  s.write("dicom", true, true, {"--series", "4", "--last-image-type", "DIS2D"});
  const std::string e = s.convert_error("dicom");
  EXPECT_TRUE(has(e, s.dir.file("dicom")) && has(e, "2 phase series cannot be told apart") && has(e, "series 3") &&
              has(e, "series 5") && has(e, "P\\DIS2D"))
      << e;
}

TEST(ConvertDicom, OtherSeriesAreSetAside) {
  SKIP_WITHOUT_TOOLS();
  SmallScan s;
  s.write("dicom", true, true, {"--series", "2"});
  // A localiser on another grid, and a DERIVED magnitude (an SWI) on the scan's grid.
  make_dicom({"--out", s.dir.file("dicom"), "--magnitude", s.dir.file("mag_small.npy"), "--te", "0.004", "--b0", "3",
              "--series", "10"});
  s.write("dicom", true, false, {"--series", "20", "--derived"});
  std::vector<std::string> notes;
  const ScanFiles f = convert_dicom(s.dir.file("dicom"), s.dir.file("work"), &notes);
  ASSERT_EQ(f.magnitude.size(), 3u);
  ASSERT_EQ(f.phase.size(), 3u);
  std::string all;
  for (const std::string& n : notes) all += n + "\n";
  EXPECT_TRUE(has(all, "magnitude series 2") && has(all, "phase series 3")) << all;
  EXPECT_TRUE(has(all, "ignored magnitude series 10") && has(all, "not on the phase's grid")) << all;
  EXPECT_TRUE(has(all, "ignored magnitude series 20") && has(all, "DERIVED")) << all;
  // The ORIGINAL magnitude's values, 1000 + index + 100 per echo (integers, stored exactly),
  // summed over the 336 voxels whatever order dcm2niix stores them in.
  const Scan scan = read_scan(f);
  for (std::int64_t e = 0; e < 3; ++e) {
    double sum = 0.0;
    for (double v : scan.magnitude.frame(e)) sum += v;
    EXPECT_EQ(sum, 336.0 * (1000.0 + 100.0 * static_cast<double>(e)) + 335.0 * 336.0 / 2.0) << "echo " << e + 1;
  }
}

}  // namespace
}  // namespace qsmcore
