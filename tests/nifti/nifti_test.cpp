// NIfTI I/O: round trips (NIfTI-1/2, .nii/.nii.gz, f32/f64/u8, oblique affines, frames);
// headers written byte by byte here (NIfTI-1 field offsets from the standard) to check scaling,
// units and the qform/sform choice independently of our writer; and every kind of bad file,
// each with its message and nothing written.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>

#include "io/nifti.h"
#include "io/png_preview.h"
#include "onnx/test_util.h"

namespace qsmcore::io {
namespace {

namespace fs = std::filesystem;
using qsmtest::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Volume ramp(const Dims3& d, const Geometry& g, std::int64_t frames = 1) {
  Volume v = Volume::zeros(d, g, frames);
  for (std::int64_t i = 0; i < v.size(); ++i) v.data()[i] = 0.25 * static_cast<double>(i % 97) - 3.0;
  return v;
}

Geometry oblique() {
  // Rotated 20° about x, anisotropic, with an origin: a typical angulated acquisition.
  const double t = 20.0 * std::numbers::pi / 180.0;
  Geometry g = Geometry::with_voxel({0.9, 1.1, 2.0});
  g.affine.m[1][1] = std::cos(t) * 1.1;
  g.affine.m[2][1] = std::sin(t) * 1.1;
  g.affine.m[1][2] = -std::sin(t) * 2.0;
  g.affine.m[2][2] = std::cos(t) * 2.0;
  g.affine.m[0][3] = -90.5;
  g.affine.m[1][3] = 12.25;
  g.affine.m[2][3] = -40.0;
  return g;
}

void expect_same_geometry(const Volume& a, const Volume& b, double tol) {
  EXPECT_EQ(a.dims(), b.dims());
  EXPECT_EQ(a.frames(), b.frames());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(a.voxel_mm()[i], b.voxel_mm()[i], tol);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(a.affine().m[r][c], b.affine().m[r][c], tol) << r << "," << c;
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void put(const std::string& path, const std::vector<char>& b, std::size_t n) {
  std::ofstream(path, std::ios::binary).write(b.data(), static_cast<std::streamsize>(n));
}
void gzip_to(const std::string& path, const std::vector<char>& b, std::size_t n) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, b.data(), static_cast<unsigned>(n));
  gzclose(f);
}

// A NIfTI-1 single file built by hand: header (348 bytes), 4 zero bytes, data at 352.
struct Hand {
  std::vector<short> dim{3, 4, 5, 6, 1, 1, 1, 1};
  short datatype = 16, bitpix = 32;
  float pixdim[4] = {1, 1, 1, 1};
  float slope = 0, inter = 0;
  char xyzt_units = 2;
  short qform_code = 0, sform_code = 0;
  float srow[3][4] = {{0}};
  float vox_offset = 352;
  std::vector<char> data;

  std::vector<char> bytes() const {
    std::vector<char> h(352, 0);
    const auto at = [&](std::size_t off, const void* p, std::size_t n) { std::memcpy(h.data() + off, p, n); };
    const int sizeof_hdr = 348;
    at(0, &sizeof_hdr, 4);
    at(40, dim.data(), 16);
    at(70, &datatype, 2);
    at(72, &bitpix, 2);
    at(76, pixdim, 16);
    at(108, &vox_offset, 4);
    at(112, &slope, 4);
    at(116, &inter, 4);
    at(123, &xyzt_units, 1);
    at(252, &qform_code, 2);
    at(254, &sform_code, 2);
    at(280, srow, 48);
    at(344, "n+1\0", 4);
    h.insert(h.end(), data.begin(), data.end());
    return h;
  }
  std::int64_t voxels() const { return std::int64_t(dim[1]) * dim[2] * dim[3] * std::max<short>(1, dim[4]); }
  template <class T>
  void fill(const std::function<T(std::int64_t)>& f) {
    data.resize(static_cast<std::size_t>(voxels()) * sizeof(T));
    for (std::int64_t i = 0; i < voxels(); ++i) {
      const T v = f(i);
      std::memcpy(data.data() + i * sizeof(T), &v, sizeof(T));
    }
  }
  void write(const std::string& path) const {
    const auto b = bytes();
    put(path, b, b.size());
  }
};

TEST(Nifti, RoundTripsEveryVersionCompressionAndStore) {
  qsmtest::TempDir dir;
  const Volume v = ramp({7, 6, 5}, oblique());
  for (int version : {1, 2})
    for (const char* ext : {".nii", ".nii.gz"})
      for (NiftiStore store : {NiftiStore::F32, NiftiStore::F64}) {
        const std::string path = dir.file("v" + std::to_string(version) + ext);
        NiftiWriteOptions o;
        o.version = version;
        o.store = store;
        o.description = "round trip";
        write_nifti(path, v, o);
        NiftiInfo info;
        const Volume r = read_nifti(path, {}, &info);
        EXPECT_EQ(info.version, version);
        EXPECT_EQ(info.description, "round trip");
        // NIfTI-1 keeps srow in f32; NIfTI-2 in f64.
        expect_same_geometry(r, v, version == 1 ? 2e-5 : 1e-12);
        for (std::int64_t i = 0; i < v.size(); ++i) ASSERT_EQ(r.data()[i], v.data()[i]);  // quarter steps are exact in f32
        for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))  // no temporary left
          EXPECT_EQ(e.path().filename().string().find(".part"), std::string::npos) << e.path();
      }
}

TEST(Nifti, FramesRoundTripOnlyWhenAllowed) {
  qsmtest::TempDir dir;
  const Volume v = ramp({5, 4, 3}, Geometry::isotropic(1.0), 4);
  const std::string path = dir.file("echoes.nii.gz");
  write_nifti(path, v);
  const Volume r = read_nifti(path, NiftiReadOptions{true, false});
  EXPECT_EQ(r.frames(), 4);
  for (std::int64_t i = 0; i < v.size(); ++i) ASSERT_EQ(r.data()[i], v.data()[i]);
  const std::string msg = error_of([&] { read_nifti(path); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(msg, path) && contains(msg, "4 frames")) << msg;
}

TEST(Nifti, MaskRoundTripsAsUint8) {
  qsmtest::TempDir dir;
  Volume m = Volume::zeros({4, 4, 4}, Geometry::isotropic(2.0));
  m.at(1, 2, 3) = 1.0;
  NiftiWriteOptions u8;
  u8.store = NiftiStore::U8;
  write_nifti(dir.file("m.nii"), m, u8);
  EXPECT_EQ(fs::file_size(dir.file("m.nii")), 352u + 64u);
  const Volume r = read_mask(dir.file("m.nii"), m);
  EXPECT_EQ(r.at(1, 2, 3), 1.0);
  EXPECT_EQ(r.at(0, 0, 0), 0.0);
}

TEST(Nifti, AppliesSlopeAndInterceptLikeSiemensPhase) {
  qsmtest::TempDir dir;
  Hand h;
  h.datatype = 4;  // int16
  h.bitpix = 16;
  h.slope = 2.0f;
  h.inter = -4096.0f;
  h.fill<std::int16_t>([](std::int64_t i) { return static_cast<std::int16_t>(i * 31 % 4096); });
  h.write(dir.file("phase.nii"));
  NiftiInfo info;
  const Volume v = read_nifti(dir.file("phase.nii"), {}, &info);
  EXPECT_EQ(info.datatype_name, "INT16");
  EXPECT_EQ(info.scl_slope, 2.0);
  for (std::int64_t i = 0; i < v.size(); ++i) ASSERT_EQ(v.data()[i], 2.0 * double(i * 31 % 4096) - 4096.0);
}

TEST(Nifti, ConvertsMetresAndPrefersTheSform) {
  qsmtest::TempDir dir;
  Hand h;
  h.fill<float>([](std::int64_t) { return 1.0f; });
  h.pixdim[1] = 0.001f;  // 1 mm written in metres
  h.pixdim[2] = 0.002f;
  h.pixdim[3] = 0.003f;
  h.xyzt_units = 1;  // NIFTI_UNITS_METER
  h.write(dir.file("metres.nii"));
  const Volume a = read_nifti(dir.file("metres.nii"));
  EXPECT_NEAR(a.voxel_mm()[0], 1.0, 1e-6);
  EXPECT_NEAR(a.voxel_mm()[2], 3.0, 1e-6);
  EXPECT_NEAR(a.affine().m[1][1], 2.0, 1e-6);  // no xform: scaling by pixdim ("method 1")
  EXPECT_EQ(a.geometry().xform_code, 0);

  Hand s;
  s.fill<float>([](std::int64_t) { return 1.0f; });
  s.sform_code = 2;
  const float rows[3][4] = {{0, 0, 2, -10}, {1, 0, 0, 5}, {0, 1, 0, 7}};  // a sagittal-like permutation
  std::memcpy(s.srow, rows, sizeof rows);
  s.write(dir.file("sform.nii"));
  const Volume b = read_nifti(dir.file("sform.nii"));
  EXPECT_EQ(b.geometry().xform_code, 2);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(b.affine().m[r][c], rows[r][c]);
}

// What `qsm batch plan` reads of each subject: the grid read_nifti would return, from the header
// alone, and the same refusals where the header (or the file's size) shows them.
TEST(Nifti, HeaderAloneGivesTheGridReadNiftiGives) {
  qsmtest::TempDir dir;
  Geometry g = Geometry::with_voxel({0.5, 0.75, 2.0});
  g.affine.m[0][3] = -12.5;
  const Volume v = ramp({6, 5, 4}, g, 3);
  const std::string path = dir.file("echoes.nii.gz");
  write_nifti(path, v);
  const NiftiHeader h = read_nifti_header(path, NiftiReadOptions{true, false});
  const Volume r = read_nifti(path, NiftiReadOptions{true, false});
  EXPECT_EQ(h.dims, r.dims());
  EXPECT_EQ(h.frames, r.frames());
  EXPECT_EQ(h.geometry.voxel_mm, r.voxel_mm());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(h.geometry.affine.m[i][j], r.affine().m[i][j]);
  const std::string msg = error_of([&] { read_nifti_header(path); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(msg, path) && contains(msg, "3 frames")) << msg;
  const std::string plain = dir.file("plain.nii");
  write_nifti(plain, v);
  const auto b = bytes_of(plain);
  const std::string cut = dir.file("cut.nii");
  put(cut, b, b.size() - 100);
  const std::string cut_msg =
      error_of([&] { read_nifti_header(cut, NiftiReadOptions{true, false}); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(cut_msg, cut) && contains(cut_msg, "truncated")) << cut_msg;
}

TEST(Nifti, TruncatedFilesAreNamedAsTruncated) {
  qsmtest::TempDir dir;
  const Volume v = ramp({8, 8, 8}, Geometry::isotropic(1.0));
  const std::string whole = dir.file("whole.nii");
  write_nifti(whole, v);
  const auto b = bytes_of(whole);
  struct Case {
    std::string name;
    std::size_t keep;
    bool gz;
    std::string says;
  };
  for (const Case& c : {Case{"data.nii", b.size() - 100, false, "file has"},
                        Case{"data.nii.gz", b.size() - 100, true, "holds"},
                        Case{"header.nii", 200, false, "truncated inside its header"},
                        Case{"header.nii.gz", 200, true, "truncated inside its header"},
                        Case{"empty.nii", 0, false, "empty or truncated"}}) {
    const std::string path = dir.file(c.name);
    c.gz ? gzip_to(path, b, c.keep) : put(path, b, c.keep);
    const std::string msg = error_of([&] { read_nifti(path); }, ErrorKind::InvalidInput);
    EXPECT_TRUE(contains(msg, path) && contains(msg, "truncated") && contains(msg, c.says)) << msg;
  }
}

TEST(Nifti, WrongKindsOfFileAreRefusedWithTheReason) {
  qsmtest::TempDir dir;
  put(dir.file("text.nii"), std::vector<char>(400, 'x'), 400);
  EXPECT_TRUE(contains(error_of([&] { read_nifti(dir.file("text.nii")); }, ErrorKind::InvalidInput), "not a NIfTI file"));

  Hand flat;
  flat.dim = {2, 16, 16, 1, 1, 1, 1, 1};
  flat.fill<float>([](std::int64_t) { return 0.0f; });
  flat.write(dir.file("flat.nii"));
  const std::string msg2d = error_of([&] { read_nifti(dir.file("flat.nii")); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(msg2d, "2-D (16×16)") && contains(msg2d, "3-D volume")) << msg2d;

  Hand five;
  five.dim = {5, 4, 5, 6, 1, 2, 1, 1};
  five.fill<float>([](std::int64_t) { return 0.0f; });
  five.data.resize(five.data.size() * 2);
  five.write(dir.file("five.nii"));
  EXPECT_TRUE(contains(error_of([&] { read_nifti(dir.file("five.nii")); }, ErrorKind::InvalidInput), "5 dimensions"));

  Hand cplx;
  cplx.datatype = 32;  // complex64
  cplx.bitpix = 64;
  cplx.fill<double>([](std::int64_t) { return 0.0; });
  cplx.write(dir.file("complex.nii"));
  EXPECT_TRUE(contains(error_of([&] { read_nifti(dir.file("complex.nii")); }, ErrorKind::Unsupported), "COMPLEX64"));

  Hand zero;
  zero.pixdim[2] = 0.0f;
  zero.fill<float>([](std::int64_t) { return 0.0f; });
  zero.write(dir.file("zero.nii"));
  EXPECT_TRUE(contains(error_of([&] { read_nifti(dir.file("zero.nii")); }, ErrorKind::InvalidInput), "voxel size along y"));

  EXPECT_TRUE(contains(error_of([&] { read_nifti(dir.file("missing.nii")); }, ErrorKind::NotFound), "missing.nii"));
}

TEST(Nifti, NonFiniteValuesAreRefusedOrZeroedOnRequest) {
  qsmtest::TempDir dir;
  Hand h;
  h.fill<float>([&](std::int64_t i) {
    if (i == 1 + 4 * (2 + 5 * 3)) return std::numeric_limits<float>::quiet_NaN();
    if (i == 7) return std::numeric_limits<float>::infinity();
    return 0.5f;
  });
  h.write(dir.file("nan.nii"));
  const std::string msg = error_of([&] { read_nifti(dir.file("nan.nii")); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(msg, "2 voxel value(s) are NaN or infinite") && contains(msg, "(3,1,0)")) << msg;
  const Volume v = read_nifti(dir.file("nan.nii"), NiftiReadOptions{false, true});
  EXPECT_EQ(v.at(1, 2, 3), 0.0);
  EXPECT_EQ(v.at(0, 0, 0), 0.5);
}

TEST(Nifti, MaskOnAnotherGridIsRefused) {
  qsmtest::TempDir dir;
  const Volume img = ramp({8, 8, 8}, Geometry::isotropic(1.0));
  write_nifti(dir.file("small.nii"), Volume::zeros({8, 8, 7}, Geometry::isotropic(1.0)));
  write_nifti(dir.file("coarse.nii"), Volume::zeros({8, 8, 8}, Geometry::isotropic(2.0)));
  Volume shifted = Volume::zeros({8, 8, 8}, Geometry::isotropic(1.0));
  Geometry g = shifted.geometry();
  g.affine.m[0][3] = 5.0;
  shifted.set_geometry(g);
  write_nifti(dir.file("shifted.nii"), shifted);
  for (const char* name : {"small.nii", "coarse.nii", "shifted.nii"}) {
    const std::string msg = error_of([&] { read_mask(dir.file(name), img); }, ErrorKind::InvalidInput);
    EXPECT_TRUE(contains(msg, name) && contains(msg, "not on the image's grid")) << msg;
  }
}

TEST(Nifti, RefusedWritesLeaveNothingBehind) {
  qsmtest::TempDir dir;
  Volume v = ramp({4, 4, 4}, Geometry::isotropic(1.0));
  EXPECT_TRUE(contains(error_of([&] { write_nifti(dir.file("x.img"), v); }, ErrorKind::InvalidInput), ".nii or .nii.gz"));
  NiftiWriteOptions u8;
  u8.store = NiftiStore::U8;
  EXPECT_TRUE(contains(error_of([&] { write_nifti(dir.file("m.nii"), v, u8); },
                                ErrorKind::InvalidInput),
                       "uint8"));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// A NIfTI-2 single file built by hand (540-byte header, 4 zero bytes, data at 544): int64 dims
// and vox_offset, f64 pixdim. Offsets from the NIfTI-2 standard.
struct Hand2 {
  std::vector<std::int64_t> dim{3, 4, 5, 6, 1, 1, 1, 1};
  short datatype = 16, bitpix = 32;
  std::int64_t vox_offset = 544;
  std::vector<char> data;

  std::vector<char> bytes() const {
    std::vector<char> h(544 + data.size(), 0);  // sized once: GCC 12 misreads an insert at 544
    const auto at = [&](std::size_t off, const void* p, std::size_t n) { std::memcpy(h.data() + off, p, n); };
    const int sizeof_hdr = 540, xyzt_units = 2;
    const double pixdim[4] = {1, 1, 1, 1};
    at(0, &sizeof_hdr, 4);
    at(4, "n+2\0\r\n\032\n", 8);
    at(12, &datatype, 2);
    at(14, &bitpix, 2);
    at(16, dim.data(), 64);
    at(104, pixdim, 32);
    at(168, &vox_offset, 8);
    at(500, &xyzt_units, 4);
    if (!data.empty()) at(544, data.data(), data.size());
    return h;
  }
  void write(const std::string& path) const {
    const auto b = bytes();
    put(path, b, b.size());
  }
};

TEST(Nifti, HandBuiltNifti2Reads) {
  // Proves Hand2's offsets, so the hostile variants below fail for the field they change.
  qsmtest::TempDir dir;
  Hand2 h;
  h.data.resize(4 * 5 * 6 * 4);
  for (std::size_t i = 0; i < h.data.size() / 4; ++i) {
    const float v = static_cast<float>(i);
    std::memcpy(h.data.data() + 4 * i, &v, 4);
  }
  h.write(dir.file("two.nii"));
  NiftiInfo info;
  const Volume v = read_nifti(dir.file("two.nii"), {}, &info);
  EXPECT_EQ(info.version, 2);
  EXPECT_EQ(v.dims(), (Dims3{4, 5, 6}));
  EXPECT_EQ(v.data()[7], 7.0);
}

TEST(Nifti, Nifti2DimsWhoseProductWrapsAreRefused) {
  qsmtest::TempDir dir;
  Hand2 h;
  h.dim = {3, std::int64_t{1} << 31, std::int64_t{1} << 31, std::int64_t{1} << 31, 1, 1, 1, 1};
  for (const bool gz : {false, true}) {
    const std::string path = dir.file(gz ? "huge.nii.gz" : "huge.nii");
    const auto b = h.bytes();
    gz ? gzip_to(path, b, b.size()) : put(path, b, b.size());
    const std::string msg = error_of([&] { read_nifti(path); }, ErrorKind::InvalidInput);
    EXPECT_TRUE(contains(msg, path + ": the header's dimensions (2147483648×2147483648×2147483648) are too large"))
        << msg;
    EXPECT_TRUE(contains(msg, "more elements than an int64 can count")) << msg;
  }
}

TEST(Nifti, Nifti2DimsOfTerabytesAreRefusedBeforeAllocating) {
  qsmtest::TempDir dir;
  Hand2 h;
  h.dim = {3, 1 << 14, 1 << 14, 1 << 14, 1, 1, 1, 1};  // 2^42 voxels: 32 TiB as doubles
  h.write(dir.file("tera.nii"));
  const std::string msg = error_of([&] { read_nifti(dir.file("tera.nii")); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(msg, "are too large") && contains(msg, "more than the largest tensor")) << msg;
}

TEST(Nifti, GzipThatCannotHoldThePromisedBytesIsRefusedBeforeAllocating) {
  // 1024³ float32 = 4 GiB promised by a .nii.gz of a few hundred bytes.
  qsmtest::TempDir dir;
  Hand2 h;
  h.dim = {3, 1024, 1024, 1024, 1, 1, 1, 1};
  const std::string path = dir.file("bomb.nii.gz");
  const auto b = h.bytes();
  gzip_to(path, b, b.size());
  const std::string msg = error_of([&] { read_nifti(path); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(msg, path + ": is truncated") && contains(msg, "more than a gzip file of")) << msg;
}

TEST(Nifti, NegativeOrZeroDimsAndBadDim0AreRefused) {
  qsmtest::TempDir dir;
  struct Case {
    std::vector<short> dim;
    std::string says;
  };
  for (const Case& c : {Case{{3, 4, -5, 6, 1, 1, 1, 1}, "dimension 2 is -5 (4×-5×6)"},
                        Case{{4, 4, 5, 6, 0, 1, 1, 1}, "dimension 4 is 0"},
                        Case{{4, 4, 5, 6, -3, 1, 1, 1}, "dimension 4 is -3"},
                        Case{{9, 4, 5, 6, 1, 1, 1, 1}, "dim[0] (the number of dimensions) is 9"},
                        Case{{0, 4, 5, 6, 1, 1, 1, 1}, "dim[0] (the number of dimensions) is 0"},
                        Case{{-1, 4, 5, 6, 1, 1, 1, 1}, "dim[0] (the number of dimensions) is -1"}}) {
    Hand h;
    h.dim = c.dim;
    h.data.resize(4 * 5 * 6 * 4);
    const std::string path = dir.file("dims.nii");
    h.write(path);
    const std::string msg = error_of([&] { read_nifti(path); }, ErrorKind::InvalidInput);
    EXPECT_TRUE(contains(msg, path + ": ") && contains(msg, c.says)) << msg;
  }
}

TEST(Nifti, VoxOffsetBeyondTheFileOrNegativeIsRefused) {
  qsmtest::TempDir dir;
  Hand h;
  h.fill<float>([](std::int64_t) { return 1.0f; });
  h.vox_offset = 1e9f;
  h.write(dir.file("far.nii"));
  const std::string far = error_of([&] { read_nifti(dir.file("far.nii")); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(far, "is truncated") && contains(far, "after byte 1000000000")) << far;

  Hand2 h2;
  h2.data.resize(4 * 5 * 6 * 4);
  h2.vox_offset = -4096;
  h2.write(dir.file("neg.nii"));
  const std::string neg = error_of([&] { read_nifti(dir.file("neg.nii")); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(neg, dir.file("neg.nii") + ": the voxel data offset (vox_offset -4096")) << neg;
}

TEST(Nifti, BitpixThatContradictsTheDatatypeIsRefused) {
  qsmtest::TempDir dir;
  Hand h;
  h.bitpix = 16;  // datatype 16 is FLOAT32
  h.fill<float>([](std::int64_t) { return 1.0f; });
  h.write(dir.file("bitpix.nii"));
  const std::string msg = error_of([&] { read_nifti(dir.file("bitpix.nii")); }, ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(msg, "bitpix (16) does not match its datatype FLOAT32 (32 bits)")) << msg;

  Hand unknown;  // not a NIfTI code at all: refused before nifticlib parses (and prints about) it
  unknown.datatype = 9999;
  unknown.fill<float>([](std::int64_t) { return 1.0f; });
  unknown.write(dir.file("unknown.nii"));
  const std::string msg2 = error_of([&] { read_nifti(dir.file("unknown.nii")); }, ErrorKind::Unsupported);
  EXPECT_TRUE(contains(msg2, "(code 9999) is not supported")) << msg2;
}

TEST(PngPreview, WritesThreeOrthogonalSlices) {
  qsmtest::TempDir dir;
  const Volume v = ramp({10, 12, 8}, Geometry::isotropic(1.0));
  write_png_preview(dir.file("p.png"), v);
  const auto b = bytes_of(dir.file("p.png"));
  ASSERT_GT(b.size(), 33u);
  EXPECT_EQ(std::memcmp(b.data(), "\x89PNG\r\n\x1a\n", 8), 0);
  const auto be32 = [&](std::size_t o) {
    return (std::uint32_t(std::uint8_t(b[o])) << 24) | (std::uint32_t(std::uint8_t(b[o + 1])) << 16) |
           (std::uint32_t(std::uint8_t(b[o + 2])) << 8) | std::uint32_t(std::uint8_t(b[o + 3]));
  };
  EXPECT_EQ(be32(16), 10u + 10u + 12u);  // axial nx + coronal nx + sagittal ny
  EXPECT_EQ(be32(20), 12u);              // max(ny, nz)
  EXPECT_FALSE(fs::exists(dir.file("p.png.tmp")));
}

}  // namespace
}  // namespace qsmcore::io
