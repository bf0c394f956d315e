// A bounds-checked cursor over protobuf wire-format bytes. It never allocates on behalf of an
// untrusted length: every length is checked against the bytes that remain before it is used,
// and nested cursors are views into the same span. Offsets in errors are absolute positions in
// the whole data (the file), so a message reads "model.onnx: at byte 1234: truncated varint".
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qsmcore::onnx {

enum class WireType : std::uint8_t { Varint = 0, Fixed64 = 1, Len = 2, GroupStart = 3, GroupEnd = 4, Fixed32 = 5 };

/// "0 (varint)", "2 (length-delimited)", ...
std::string wire_type_name(WireType t);

struct Field {
  std::uint32_t number = 0;
  WireType type = WireType::Varint;
  std::size_t offset = 0;  // absolute offset of the tag
};

class WireCursor {
 public:
  // Generous for ONNX (Model > Graph > Node > Attribute > Tensor is 5 deep); the reader's
  // recursion is structural, this is the safety net against hostile nesting.
  static constexpr int kMaxDepth = 32;

  /// A cursor over the whole data; `file` names it in errors and must outlive the cursor.
  WireCursor(std::span<const std::uint8_t> data, const std::string& file);

  bool at_end() const { return pos_ >= end_; }
  /// Reads the next tag; false at the end of this message.
  bool next(Field& f);

  std::uint64_t read_varint() {
    // Fast path: one-byte varints (tags, small ints, short lengths) dominate metadata.
    if (pos_ < end_ && base_[pos_] < 0x80) return base_[pos_++];
    return read_varint_slow();
  }
  std::uint32_t read_fixed32();
  std::uint64_t read_fixed64();
  /// The payload of a length-delimited field (a view into the data).
  std::span<const std::uint8_t> read_bytes();
  std::string read_string() {
    auto b = read_bytes();
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  /// A cursor over the payload of a length-delimited field, one level deeper.
  WireCursor read_message();
  /// Skips a field's value (groups are rejected: ONNX never uses them).
  void skip(const Field& f);

  /// Throws unless the field has wire type `t`: "field 'NAME' of OWNER has wire type X, expected Y".
  void expect(const Field& f, WireType t, std::string_view field, const std::string& owner) const;

  /// Repeated scalar fields, accepted packed (one length-delimited run) or unpacked (one value
  /// per occurrence), appended to `out`. Growth is bounded by the bytes actually present.
  void read_int64s(const Field& f, std::vector<std::int64_t>& out, std::string_view field, const std::string& owner);
  void read_floats(const Field& f, std::vector<float>& out, std::string_view field, const std::string& owner);

  std::size_t pos() const { return pos_; }
  std::size_t end() const { return end_; }
  std::size_t data_size() const { return size_; }
  const std::uint8_t* base() const { return base_; }
  const std::string& file() const { return *file_; }
  int depth() const { return depth_; }

  /// Throws Error{InvalidModel} "FILE: at byte AT: WHAT".
  [[noreturn]] void fail(std::size_t at, const std::string& what) const;

 private:
  WireCursor(const std::uint8_t* base, std::size_t size, std::size_t pos, std::size_t end, const std::string* file,
             int depth)
      : base_(base), size_(size), pos_(pos), end_(end), file_(file), depth_(depth) {}
  std::uint64_t read_varint_slow();
  /// Checks that `len` bytes starting at pos_ lie inside this message (declared at `at`).
  void need(std::uint64_t len, std::size_t at, const char* what) const;

  const std::uint8_t* base_;
  std::size_t size_;
  std::size_t pos_;
  std::size_t end_;
  const std::string* file_;
  int depth_;
};

/// Counts the varints in a packed run (bytes without the continuation bit); throws if the run
/// ends inside a varint. Used to size a destination before decoding.
std::size_t count_packed_varints(const WireCursor& c, std::span<const std::uint8_t> run);

}  // namespace qsmcore::onnx
