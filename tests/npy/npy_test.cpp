// .npy reading and writing: round trips of every dtype, files written by numpy itself (all
// header versions), numpy reading ours, and every kind of bad file with its message.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/npy.h"
#include "onnx/test_util.h"

namespace qsmcore::io {
namespace {

using qsmtest::error_of;
namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<std::uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void put_bytes(const std::string& path, const std::vector<std::uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// A tensor whose bytes are 0, 1, 2, ... (every dtype round-trips bytes exactly).
Tensor counting(DType t, const Shape& shape) {
  Tensor x = Tensor::empty(t, shape);
  auto* b = static_cast<std::uint8_t*>(x.raw());
  for (std::size_t i = 0; i < x.nbytes(); ++i) b[i] = static_cast<std::uint8_t>(t == DType::Bool ? i % 2 : i * 7);
  return x;
}

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  qsmtest::TempDir dir;
  const std::string path = dir.file("x.npy");
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8,
                  DType::U16, DType::U32, DType::U64, DType::Bool}) {
    for (const Shape& s : {Shape{}, Shape{5}, Shape{2, 3, 4}, Shape{0, 3}}) {
      const Tensor x = counting(t, s);
      write_npy(path, x);
      const Tensor y = read_npy(path);
      EXPECT_EQ(y.dtype(), t);
      EXPECT_EQ(y.shape(), s);
      ASSERT_EQ(y.nbytes(), x.nbytes());
      if (x.nbytes()) {
        EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0) << dtype_name(t);
      }
      // numpy's layout: the data starts 64-byte aligned.
      EXPECT_EQ((fs::file_size(path) - x.nbytes()) % 64, 0u);
    }
  }
}

TEST(Npy, WritingIsAtomicAndLeavesNoTemporary) {
  qsmtest::TempDir dir;
  const std::string path = dir.file("v.npy");
  write_npy(path, Tensor::from_vector<float>({2}, {1, 2}));
  write_npy(path, Tensor::from_vector<float>({3}, {4, 5, 6}));  // replaces the old file
  EXPECT_EQ(read_npy(path).to_float_vector(), (std::vector<float>{4, 5, 6}));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "v.npy");
  }
  EXPECT_EQ(files, 1);
  EXPECT_TRUE(contains(error_of([&] { write_npy(dir.file("no/such/dir/x.npy"), Tensor::from_vector<float>({1}, {1})); },
                                ErrorKind::Io),
                       "cannot create"));
  EXPECT_TRUE(contains(error_of([&] { write_npy(path, Tensor::zeros(DType::BF16, {1})); }, ErrorKind::InvalidInput),
                       "cannot write a bfloat16 tensor as .npy"));
}

TEST(Npy, ReadsWhatNumpyWritesAndNumpyReadsOurs) {
  qsmtest::TempDir dir;
  write_npy(dir.file("ours.npy"), Tensor::from_vector<std::int32_t>({2, 2}, {1, -2, 3, 4}));
  const std::string script = R"(
import numpy as np
from numpy.lib import format as F
a = np.arange(24, dtype='<f4').reshape(2, 3, 4) / 8
np.save('v1.npy', a)
for v in [(2, 0), (3, 0)]:
    with open('v%d.npy' % v[0], 'wb') as f:
        F.write_array(f, a, version=v)
np.save('b.npy', np.array([True, False, True]))
np.save('i64.npy', np.array([[-1, 2**40]], dtype='<i8'))
np.save('u16.npy', np.array([65535], dtype='<u2'))
np.save('scalar.npy', np.float64(2.5))
np.save('fortran.npy', np.asfortranarray(np.ones((2, 3), dtype='<f4')))
np.save('big.npy', np.ones(3, dtype='>f4'))
np.save('object.npy', np.array([1, 'a'], dtype=object), allow_pickle=True)
np.save('structured.npy', np.zeros(2, dtype=[('a', '<f4'), ('b', '<i4')]))
np.save('complex.npy', np.zeros(2, dtype='<c8'))
o = np.load('ours.npy')
assert o.dtype == np.int32 and o.shape == (2, 2) and o.tolist() == [[1, -2], [3, 4]], o
)";
  if (!qsmtest::run_python(script, dir.path(), "numpy")) GTEST_SKIP();
  for (const char* v : {"v1.npy", "v2.npy", "v3.npy"}) {
    const Tensor a = read_npy(dir.file(v));
    EXPECT_EQ(a.dtype(), DType::F32) << v;
    EXPECT_EQ(a.shape(), (Shape{2, 3, 4})) << v;
    EXPECT_EQ(a.data<float>()[23], 23.0f / 8) << v;
  }
  EXPECT_EQ(read_npy(dir.file("b.npy")).to_int64_vector(), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_EQ(read_npy(dir.file("b.npy")).dtype(), DType::Bool);
  EXPECT_EQ(read_npy(dir.file("i64.npy")).to_int64_vector(), (std::vector<std::int64_t>{-1, 1ll << 40}));
  EXPECT_EQ(read_npy(dir.file("u16.npy")).to_int64_vector(), (std::vector<std::int64_t>{65535}));
  const Tensor s = read_npy(dir.file("scalar.npy"));
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.data<double>()[0], 2.5);

  const std::string f = dir.file("fortran.npy");
  EXPECT_EQ(error_of([&] { read_npy(f); }, ErrorKind::InvalidInput),
            f + ": Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  const std::string b = dir.file("big.npy");
  EXPECT_EQ(error_of([&] { read_npy(b); }, ErrorKind::InvalidInput),
            b + ": big-endian data (dtype '>f4') is not supported");
  const std::string o = dir.file("object.npy");
  EXPECT_EQ(error_of([&] { read_npy(o); }, ErrorKind::InvalidInput),
            o + ": object arrays (dtype '|O') are not supported");
  EXPECT_TRUE(contains(error_of([&] { read_npy(dir.file("structured.npy")); }, ErrorKind::InvalidInput),
                       "structured dtypes (descr is a list) are not supported"));
  EXPECT_TRUE(contains(error_of([&] { read_npy(dir.file("complex.npy")); }, ErrorKind::InvalidInput),
                       "unsupported dtype '<c8'"));
}

TEST(Npy, BadFiles) {
  qsmtest::TempDir dir;
  const std::string good = dir.file("good.npy");
  write_npy(good, Tensor::from_vector<float>({4}, {1, 2, 3, 4}));
  const auto bytes = file_bytes(good);
  const std::string p = dir.file("bad.npy");

  auto with = [&](std::vector<std::uint8_t> b) {
    put_bytes(p, b);
    return error_of([&] { read_npy(p); }, ErrorKind::InvalidInput);
  };
  auto cut = bytes;
  cut.resize(cut.size() - 3);
  EXPECT_EQ(with(cut), p + ": truncated data: 13 bytes, expected 16 for float[4]");
  auto extra = bytes;
  extra.push_back(0);
  EXPECT_EQ(with(extra), p + ": 1 unexpected bytes after the data of float[4]");
  auto magic = bytes;
  magic[1] = 'X';
  EXPECT_EQ(with(magic), p + ": not a .npy file (bad magic)");
  EXPECT_EQ(with({1, 2, 3}), p + ": too short to be a .npy file (3 bytes)");
  auto version = bytes;
  version[6] = 9;
  EXPECT_EQ(with(version), p + ": unsupported .npy format version 9.0");
  auto long_header = bytes;
  long_header[8] = 0xff;
  long_header[9] = 0xff;
  EXPECT_TRUE(contains(with(long_header), "truncated header (65535 bytes declared"));

  // Every prefix of a valid file is an error, never a crash.
  for (std::size_t n = 0; n < bytes.size(); ++n) with({bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)});

  // Headers that lie: a huge shape must be refused before allocating.
  auto header_file = [&](const std::string& dict) {
    std::vector<std::uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<std::uint8_t>(dict.size()), 0};
    b.insert(b.end(), dict.begin(), dict.end());
    return with(b);
  };
  const std::int64_t before = memory_current();
  EXPECT_TRUE(contains(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100000000), }"),
                       "shape [100000000000,100000000] is too large"));
  EXPECT_TRUE(contains(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }"),
                       "truncated data: 0 bytes, expected 4000000000"));
  EXPECT_EQ(memory_current(), before);
  EXPECT_TRUE(contains(header_file("{'descr': '<f4', 'shape': (1,), }"), "the header lacks one of"));
  EXPECT_TRUE(contains(header_file("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }"),
                       "expected True or False"));
  EXPECT_TRUE(contains(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"),
                       "expected a dimension"));
  EXPECT_TRUE(contains(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}"),
                       "unexpected key 'x'"));
  EXPECT_TRUE(contains(header_file("{'descr': '<f4"), "unterminated string"));
  EXPECT_TRUE(contains(error_of([&] { read_npy(dir.file("missing.npy")); }, ErrorKind::Io), "cannot open"));
}

}  // namespace
}  // namespace qsmcore::io
