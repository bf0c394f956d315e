// The int16 store with scl_slope/scl_inter: representable values round-trip exactly (Siemens'
// phase convention included), the integers on disk are (v − inter)/slope as read straight from
// the file's bytes at the NIfTI-1 offsets of the standard, and anything not representable, an
// invalid slope, or scaling asked of a float store is refused with nothing written.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "io/nifti.h"
#include "onnx/test_util.h"

namespace qsmcore::io {
namespace {

namespace fs = std::filesystem;
using qsmtest::error_of;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The whole file, gunzipped if need be (zlib reads plain files as they are).
std::vector<unsigned char> file_bytes(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  return out;
}

template <class T>
T at(const std::vector<unsigned char>& b, std::size_t offset) {
  T v;
  std::memcpy(&v, b.data() + offset, sizeof v);
  return v;
}

// Values slope·q + inter for stored integers q running over [q_lo, q_hi] (both ends included).
Volume on_grid(double slope, double inter, std::int64_t q_lo, std::int64_t q_hi, std::int64_t frames = 1) {
  Volume v = Volume::zeros({16, 16, 16}, Geometry::isotropic(1.0), frames);
  const std::int64_t span = q_hi - q_lo;
  for (std::int64_t i = 0; i < v.size(); ++i) {
    const std::int64_t q = i == v.size() - 1 ? q_hi : q_lo + (i * 7919) % (span + 1);
    v.data()[i] = double(q) * slope + inter;
  }
  return v;
}

TEST(NiftiInt16, SiemensPhaseRoundTripsExactlyAndStoresTheRawIntegers) {
  qsmtest::TempDir dir;
  const Volume v = on_grid(2.0, -4096.0, 0, 4095, 2);  // [−4096, 4094]: even integers
  for (const char* ext : {".nii", ".nii.gz"}) {
    const std::string path = dir.file(std::string("phase") + ext);
    NiftiWriteOptions o;
    o.store = NiftiStore::I16;
    o.scl_slope = 2.0;
    o.scl_inter = -4096.0;
    write_nifti(path, v, o);
    NiftiInfo info;
    const Volume r = read_nifti(path, NiftiReadOptions{true, false}, &info);
    EXPECT_EQ(info.datatype_name, "INT16");
    EXPECT_EQ(info.scl_slope, 2.0);
    EXPECT_EQ(info.scl_inter, -4096.0);
    ASSERT_EQ(r.size(), v.size());
    for (std::int64_t i = 0; i < v.size(); ++i) ASSERT_EQ(r.data()[i], v.data()[i]) << i;
    // The bytes themselves (NIfTI-1: datatype int16 at 70, bitpix at 72, scl_slope/inter f32 at
    // 112/116, data from 352): Siemens' 12-bit raw values 0..4095.
    const auto b = file_bytes(path);
    ASSERT_EQ(b.size(), 352u + 2u * std::size_t(v.size()));
    EXPECT_EQ(at<std::int16_t>(b, 70), 4);
    EXPECT_EQ(at<std::int16_t>(b, 72), 16);
    EXPECT_EQ(at<float>(b, 112), 2.0f);
    EXPECT_EQ(at<float>(b, 116), -4096.0f);
    for (std::int64_t i = 0; i < v.size(); ++i) {
      const auto q = at<std::int16_t>(b, 352 + 2 * std::size_t(i));
      ASSERT_GE(q, 0);
      ASSERT_LE(q, 4095);
      ASSERT_EQ(double(q), (v.data()[i] + 4096.0) / 2.0) << i;
    }
  }
}

TEST(NiftiInt16, TheWholeInt16RangeRoundTripsWithOtherScalings) {
  qsmtest::TempDir dir;
  struct Case {
    double slope, inter;
    int version;
  };
  // 0.1 is not a float32, so it needs NIfTI-2's f64 scaling; negative slopes are allowed.
  for (const Case c : {Case{1.0, 0.0, 1}, Case{0.25, 10.5, 1}, Case{-3.0, 1.0, 1}, Case{0.1, -2.0, 2}}) {
    const Volume v = on_grid(c.slope, c.inter, -32768, 32767);
    NiftiWriteOptions o;
    o.store = NiftiStore::I16;
    o.scl_slope = c.slope;
    o.scl_inter = c.inter;
    o.version = c.version;
    const std::string path = dir.file("v.nii");
    write_nifti(path, v, o);
    const Volume r = read_nifti(path);
    for (std::int64_t i = 0; i < v.size(); ++i) ASSERT_EQ(r.data()[i], v.data()[i]) << c.slope << " " << i;
  }
}

TEST(NiftiInt16, ValuesThatCannotComeBackAreRefusedBeforeWriting) {
  qsmtest::TempDir dir;
  const std::string path = dir.file("x.nii.gz");
  const auto refusal = [&](double value, double slope, double inter, NiftiStore store = NiftiStore::I16,
                           int version = 1) {
    Volume v = on_grid(2.0, -4096.0, 0, 4095);
    v.at(3, 4, 5) = value;
    NiftiWriteOptions o;
    o.store = store;
    o.scl_slope = slope;
    o.scl_inter = inter;
    o.version = version;
    return error_of([&] { write_nifti(path, v, o); }, ErrorKind::InvalidInput);
  };
  // Off the grid (odd with slope 2), beyond int16 at each end, not a number.
  for (double bad : {-4095.0, 3.5, 2.0 * 32768 - 4096 + 2, -2.0 * 32769 - 4096, double(NAN)}) {
    const std::string msg = refusal(bad, 2.0, -4096.0);
    EXPECT_TRUE(contains(msg, path) && contains(msg, "int16") && contains(msg, "(3,4,5)")) << bad << ": " << msg;
  }
  EXPECT_TRUE(contains(refusal(0.0, 0.0, 0.0), "scl_slope"));
  EXPECT_TRUE(contains(refusal(0.0, INFINITY, 0.0), "scl_slope"));
  EXPECT_TRUE(contains(refusal(0.0, 0.1, 0.0), "float32"));  // NIfTI-1 could not hold it exactly
  EXPECT_TRUE(contains(refusal(0.0, 2.0, -4096.0, NiftiStore::F32), "integer stores"));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(NiftiInt16, Uint8TakesTheSameScaling) {
  qsmtest::TempDir dir;
  const Volume v = on_grid(0.5, -1.0, 0, 255);
  NiftiWriteOptions o;
  o.store = NiftiStore::U8;
  o.scl_slope = 0.5;
  o.scl_inter = -1.0;
  write_nifti(dir.file("u.nii"), v, o);
  NiftiInfo info;
  const Volume r = read_nifti(dir.file("u.nii"), {}, &info);
  EXPECT_EQ(info.datatype_name, "UINT8");
  for (std::int64_t i = 0; i < v.size(); ++i) ASSERT_EQ(r.data()[i], v.data()[i]);
  const Volume off = on_grid(0.5, -1.0, 0, 256);  // 127.0 needs 256
  EXPECT_TRUE(contains(error_of([&] { write_nifti(dir.file("w.nii"), off, o); }, ErrorKind::InvalidInput), "uint8"));
  EXPECT_FALSE(fs::exists(dir.file("w.nii")));
}

}  // namespace
}  // namespace qsmcore::io
