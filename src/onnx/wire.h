// A bounds-checked cursor over protobuf wire-format bytes. It never allocates on behalf of an
// untrusted length: every length is checked against the bytes that remain before it is used,
// and nested cursors are views into the same data. Offsets in errors are absolute positions in
// the whole data (the file), so a message reads "model.onnx: at byte 1234: truncated varint".
//
// The data is either a span held whole in memory (a native file's private mapping, a caller's
// bytes) or a WireWindow: a small accounted buffer that slides over a ByteSource as the cursors
// read. The window is what WebAssembly parses through: there a "mapping" is a heap copy of the
// whole file, and a 400 MB network's copy left a 400 MB hole in the wasm heap that the packed
// weights then filled in a shape-dependent order (docs/wasm.md). Length-delimited payloads
// that are only located or skipped (raw_data, unused fields) are never read through it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qsmcore/memory.h"

namespace qsmcore::io {
class ByteSource;
}

namespace qsmcore::onnx {

/// A sliding view of a ByteSource for WireCursor: holds at most max(window, the largest payload
/// read at once) bytes, accounted (category Other). Not thread-safe; the cursors over one window
/// must be used from one thread. A span returned by a cursor over it is valid until the next
/// read through any cursor over the same window.
class WireWindow {
 public:
  WireWindow(const io::ByteSource& src, std::size_t window_bytes);
  std::size_t size() const { return size_; }
  /// [pos, pos + len), which the caller has checked lies inside the data.
  const std::uint8_t* view(std::size_t pos, std::size_t len) {
    const std::size_t at = pos - lo_;  // wraps above have_ when pos < lo_
    if (at <= have_ && len <= have_ - at) return reinterpret_cast<const std::uint8_t*>(window_.data()) + at;
    return refill(pos, len);
  }
  /// Copies [pos, pos + len) to dst, from the window if it holds the range, else from the source.
  void copy(std::size_t pos, std::size_t len, void* dst) const;
  /// Bytes read from the source so far (tests check that skipped payloads are not read).
  std::uint64_t bytes_read() const { return bytes_read_; }

 private:
  const std::uint8_t* refill(std::size_t pos, std::size_t len);

  const io::ByteSource& src_;
  std::size_t size_;
  std::size_t window_bytes_;
  Buffer window_;
  std::size_t lo_ = 0, have_ = 0;
  std::uint64_t bytes_read_ = 0;
};

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
  /// A cursor over a window's source; the window and `file` must outlive the cursor.
  WireCursor(WireWindow& window, const std::string& file);

  bool at_end() const { return pos_ >= end_; }
  /// Reads the next tag; false at the end of this message.
  bool next(Field& f);

  std::uint64_t read_varint() {
    // Fast path: one-byte varints (tags, small ints, short lengths) dominate metadata.
    if (pos_ < end_) {
      const std::uint8_t b = *bytes(pos_, 1);
      if (b < 0x80) {
        ++pos_;
        return b;
      }
    }
    return read_varint_slow();
  }
  std::uint32_t read_fixed32();
  std::uint64_t read_fixed64();
  /// The payload of a length-delimited field (a view into the data; over a window, valid until
  /// the next read).
  std::span<const std::uint8_t> read_bytes();
  /// Where the payload of a length-delimited field lies (absolute offset, length), moving past
  /// it without reading it.
  std::pair<std::size_t, std::size_t> skip_bytes();
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
  /// Copies [at, at + len) of the data (checked to lie in it by the caller) to dst.
  void copy(std::size_t at, std::size_t len, void* dst) const;
  const std::string& file() const { return *file_; }
  int depth() const { return depth_; }

  /// Throws Error{InvalidModel} "FILE: at byte AT: WHAT".
  [[noreturn]] void fail(std::size_t at, const std::string& what) const;

 private:
  friend std::size_t count_packed_varints(const WireCursor& run);
  WireCursor(const std::uint8_t* base, WireWindow* window, std::size_t size, std::size_t pos, std::size_t end,
             const std::string* file, int depth)
      : base_(base), window_(window), size_(size), pos_(pos), end_(end), file_(file), depth_(depth) {}
  /// [at, at + len) of the data, checked by the caller to lie inside it.
  const std::uint8_t* bytes(std::size_t at, std::size_t len) const {
    return base_ != nullptr ? base_ + at : window_->view(at, len);
  }
  std::uint64_t read_varint_slow();
  /// Checks that `len` bytes starting at pos_ lie inside this message (declared at `at`).
  void need(std::uint64_t len, std::size_t at, const char* what) const;

  const std::uint8_t* base_;  // the whole data, or null over a window
  WireWindow* window_;
  std::size_t size_;
  std::size_t pos_;
  std::size_t end_;
  const std::string* file_;
  int depth_;
};

/// Counts the varints in the packed run that `run` (a cursor from read_message) covers: bytes
/// without the continuation bit; throws if the run ends inside a varint. Used to size a
/// destination before decoding. Does not move `run`.
std::size_t count_packed_varints(const WireCursor& run);

}  // namespace qsmcore::onnx
