#include "io/npy.h"

#include <cstring>
#include <optional>

#include "io/atomic_file.h"
#include "io/bad_file.h"
#include "io/byte_source.h"
#include "qsmcore/error.h"

namespace qsmcore::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
// numpy itself refuses headers above this size when reading untrusted files.
constexpr std::uint64_t kMaxHeader = 1 << 20;

struct NpyHeader {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

// A parser for the one Python literal numpy writes: {'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), }. Keys and values are checked, not evaluated.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  NpyHeader parse() {
    NpyHeader h;
    bool has_descr = false, has_fortran = false, has_shape = false;
    expect('{');
    while (!peek('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        if (peek('[')) bad_file(path_, "structured dtypes (descr is a list) are not supported");
        h.descr = string_literal();
        has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran = boolean();
        has_fortran = true;
      } else if (key == "shape") {
        h.shape = tuple();
        has_shape = true;
      } else {
        bad_file(path_, "unexpected key '" + key + "' in the header");
      }
      if (!peek(',')) break;
      expect(',');
    }
    expect('}');
    if (!has_descr || !has_fortran || !has_shape)
      bad_file(path_, "the header lacks one of 'descr', 'fortran_order', 'shape': " + s_);
    return h;
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n')) ++i_;
  }
  bool peek(char c) {
    skip_space();
    return i_ < s_.size() && s_[i_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    bad_file(path_, "malformed header at character " + std::to_string(i_) + " (" + what + "): " + s_);
  }
  std::string string_literal() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a string");
    const char q = s_[i_++];
    const std::size_t end = s_.find(q, i_);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (s_.compare(i_, std::strlen(word), word) == 0) {
        i_ += std::strlen(word);
        return value;
      }
    }
    fail("expected True or False");
  }
  Shape tuple() {
    Shape out;
    expect('(');
    while (!peek(')')) {
      skip_space();
      std::int64_t v = 0;
      std::size_t digits = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (++digits > 18) fail("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (digits == 0) fail("expected a dimension");
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 longs
      out.push_back(v);
      if (!peek(',')) break;
      expect(',');
    }
    expect(')');
    return out;
  }

  const std::string& s_;
  const std::string& path_;
  std::size_t i_ = 0;
};

DType dtype_from_descr(const std::string& d, const std::string& path) {
  if (d.size() >= 2 && d[1] == 'O') bad_file(path, "object arrays (dtype '" + d + "') are not supported");
  if (d.size() < 3) bad_file(path, "unsupported dtype '" + d + "'");
  const char order = d[0], kind = d[1];
  const std::string size = d.substr(2);
  if (order == '>' && size != "1") bad_file(path, "big-endian data (dtype '" + d + "') is not supported");
  if (order != '<' && order != '|' && order != '=' && order != '>') bad_file(path, "unsupported dtype '" + d + "'");
  const std::pair<const char*, DType> table[] = {
      {"f2", DType::F16}, {"f4", DType::F32}, {"f8", DType::F64}, {"i1", DType::I8},  {"i2", DType::I16},
      {"i4", DType::I32}, {"i8", DType::I64}, {"u1", DType::U8},  {"u2", DType::U16}, {"u4", DType::U32},
      {"u8", DType::U64}, {"b1", DType::Bool}};
  const std::string key = std::string(1, kind) + size;
  for (const auto& [name, t] : table)
    if (key == name) return t;
  bad_file(path, "unsupported dtype '" + d + "'");
}

const char* descr_of(DType t) {
  switch (t) {
    case DType::F16: return "<f2";
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::I8: return "|i1";
    case DType::I16: return "<i2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "|u1";
    case DType::U16: return "<u2";
    case DType::U32: return "<u4";
    case DType::U64: return "<u8";
    case DType::Bool: return "|b1";
    default: return nullptr;  // bfloat16 has no numpy dtype; strings and undefined are not data
  }
}

template <class T>
T read_le(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Tensor read_npy(const std::string& path) {
  auto src = open_file_source(path);
  const std::uint64_t size = src->size();
  std::uint8_t prefix[12] = {};
  if (size < 10) bad_file(path, "too short to be a .npy file (" + std::to_string(size) + " bytes)");
  src->read(0, size >= 12 ? 12 : 10, prefix);
  if (std::memcmp(prefix, kMagic, kMagicLen) != 0) bad_file(path, "not a .npy file (bad magic)");
  const int major = prefix[6], minor = prefix[7];
  std::uint64_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = read_le<std::uint16_t>(prefix + 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {  // 3.0 only changes the header's encoding to UTF-8
    if (size < 12) bad_file(path, "truncated header");
    header_len = read_le<std::uint32_t>(prefix + 8);
    header_at = 12;
  } else {
    bad_file(path, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor));
  }
  if (header_len > size - header_at)
    bad_file(path, "truncated header (" + std::to_string(header_len) + " bytes declared, " +
                  std::to_string(size - header_at) + " in the file)");
  if (header_len > kMaxHeader) bad_file(path, "header of " + std::to_string(header_len) + " bytes is too large");
  std::string text(static_cast<std::size_t>(header_len), '\0');
  src->read(header_at, text.size(), text.data());
  const NpyHeader h = HeaderParser(text, path).parse();
  const DType t = dtype_from_descr(h.descr, path);
  if (h.fortran) bad_file(path, "Fortran-order arrays are not supported (save with np.ascontiguousarray)");

  std::uint64_t nbytes = dtype_size(t);
  for (std::int64_t d : h.shape) {
    if (d != 0 && nbytes > (UINT64_MAX >> 1) / static_cast<std::uint64_t>(d))
      bad_file(path, "shape " + shape_to_string(h.shape) + " is too large");
    nbytes *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t data_at = header_at + header_len;
  const std::uint64_t have = size - data_at;
  if (have < nbytes)
    bad_file(path, "truncated data: " + std::to_string(have) + " bytes, expected " + std::to_string(nbytes) + " for " +
                  dtype_name(t) + shape_to_string(h.shape));
  if (have > nbytes)
    bad_file(path, std::to_string(have - nbytes) + " unexpected bytes after the data of " + dtype_name(t) +
                  shape_to_string(h.shape));
  // Allocated only now: the file is known to hold exactly these bytes.
  Tensor out = Tensor::empty(t, h.shape, MemCategory::IO);
  if (nbytes) src->read(data_at, static_cast<std::size_t>(nbytes), out.raw());
  return out;
}

void write_npy(const std::string& path, const Tensor& t) {
  const char* descr = descr_of(t.dtype());
  if (descr == nullptr)
    throw Error(ErrorKind::InvalidInput, path + ": cannot write a " + std::string(dtype_name(t.dtype())) +
                                             " tensor as .npy");
  if (t.nbytes() && t.raw() == nullptr) throw Error(ErrorKind::InvalidInput, path + ": the tensor has no data");
  std::string shape = "(";
  for (std::size_t i = 0; i < t.shape().size(); ++i) shape += std::to_string(t.shape()[i]) + ", ";
  if (t.shape().size() > 1) shape.resize(shape.size() - 2);
  else if (t.shape().size() == 1) shape.pop_back();  // "(n,)"
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // As numpy does: pad with spaces and a final newline so the data starts 64-byte aligned.
  const bool v2 = header.size() + 1 + 10 + 64 > 0xffff;
  const std::size_t prefix = v2 ? 12 : 10;
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header.push_back('\n');

  std::string head(kMagic, kMagicLen);
  head.push_back(static_cast<char>(v2 ? 2 : 1));
  head.push_back('\0');
  const auto len = static_cast<std::uint32_t>(header.size());
  const char len_bytes[4] = {static_cast<char>(len), static_cast<char>(len >> 8), static_cast<char>(len >> 16),
                             static_cast<char>(len >> 24)};
  head.append(len_bytes, v2 ? 4 : 2);
  head += header;

  AtomicFile file(path, ".tmp");  // a temporary of its own, whoever else writes this path
  file.write(head.data(), head.size());
  if (t.nbytes()) file.write(t.raw(), t.nbytes());
  file.commit();
}

}  // namespace qsmcore::io
