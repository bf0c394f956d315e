#include "onnx/wire.h"

#include <algorithm>

#include "io/byte_source.h"
#include "qsmcore/error.h"

namespace qsmcore::onnx {

WireWindow::WireWindow(const io::ByteSource& src, std::size_t window_bytes)
    : src_(src), size_(static_cast<std::size_t>(src.size())), window_bytes_(std::max<std::size_t>(window_bytes, 16)) {
  if (src.size() > SIZE_MAX) throw Error(ErrorKind::Io, src.name() + ": larger than the address space");
}

const std::uint8_t* WireWindow::refill(std::size_t pos, std::size_t len) {
  // Only ranges the cursor has checked against the data's size come here.
  QSM_ASSERT(pos <= size_ && len <= size_ - pos, "wire window read outside the data");
  const std::size_t want = std::min(std::max(len, window_bytes_), size_ - pos);
  if (window_.size() < want) {
    window_.reset();  // the old bytes are not needed: the whole window is read again
    window_ = Buffer(want, MemCategory::Other);
  }
  have_ = 0;  // a failed read leaves no stale window behind
  if (want) src_.read(pos, want, window_.data());
  bytes_read_ += want;
  lo_ = pos;
  have_ = want;
  return reinterpret_cast<const std::uint8_t*>(window_.data());
}

void WireWindow::copy(std::size_t pos, std::size_t len, void* dst) const {
  if (len == 0) return;
  const std::size_t at = pos - lo_;
  if (at <= have_ && len <= have_ - at) {
    std::memcpy(dst, window_.data() + at, len);
    return;
  }
  src_.read(pos, len, dst);
}

std::string wire_type_name(WireType t) {
  auto n = std::to_string(static_cast<int>(t));  // not const: returned by move
  switch (t) {
    case WireType::Varint: return n + " (varint)";
    case WireType::Fixed64: return n + " (64-bit)";
    case WireType::Len: return n + " (length-delimited)";
    case WireType::GroupStart: return n + " (group start)";
    case WireType::GroupEnd: return n + " (group end)";
    case WireType::Fixed32: return n + " (32-bit)";
  }
  return n;
}

WireCursor::WireCursor(std::span<const std::uint8_t> data, const std::string& file)
    : base_(data.data()), window_(nullptr), size_(data.size()), pos_(0), end_(data.size()), file_(&file), depth_(0) {}

WireCursor::WireCursor(WireWindow& window, const std::string& file)
    : base_(nullptr), window_(&window), size_(window.size()), pos_(0), end_(window.size()), file_(&file), depth_(0) {}

void WireCursor::copy(std::size_t at, std::size_t len, void* dst) const {
  if (len == 0) return;
  if (base_ != nullptr)
    std::memcpy(dst, base_ + at, len);
  else
    window_->copy(at, len, dst);
}

void WireCursor::fail(std::size_t at, const std::string& what) const {
  throw Error(ErrorKind::InvalidModel, *file_ + ": at byte " + std::to_string(at) + ": " + what);
}

void WireCursor::need(std::uint64_t len, std::size_t at, const char* what) const {
  if (len <= end_ - pos_) return;
  // Not "at byte N:" first: the offset is part of the sentence, as in "length 999999 at byte 88".
  const std::string subject = std::string(what) == "length" ? "length " + std::to_string(len) : std::string(what);
  const std::string where = end_ == size_ ? "the end of the data (" + std::to_string(size_) + " bytes)"
                                          : "the end of its enclosing message at byte " + std::to_string(end_);
  throw Error(ErrorKind::InvalidModel,
              *file_ + ": " + subject + " at byte " + std::to_string(at) + " runs past " + where);
}

std::uint64_t WireCursor::read_varint_slow() {
  const std::size_t start = pos_;
  std::uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (pos_ >= end_) fail(start, "truncated varint");
    const std::uint8_t b = *bytes(pos_++, 1);
    // The 10th byte may only carry the top bit of a 64-bit value.
    if (shift == 63 && b > 1) fail(start, "varint overflows 64 bits");
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) return v;
  }
  fail(start, "varint longer than 10 bytes");
}

bool WireCursor::next(Field& f) {
  if (pos_ >= end_) return false;
  f.offset = pos_;
  const std::uint64_t tag = read_varint();
  const auto type = static_cast<std::uint32_t>(tag & 7);
  const std::uint64_t number = tag >> 3;
  if (number == 0 || number > 0x1fffffff) fail(f.offset, "invalid field number " + std::to_string(number));
  if (type > 5) fail(f.offset, "invalid wire type " + std::to_string(type) + " for field " + std::to_string(number));
  f.number = static_cast<std::uint32_t>(number);
  f.type = static_cast<WireType>(type);
  return true;
}

std::uint32_t WireCursor::read_fixed32() {
  need(4, pos_, "32-bit value");
  std::uint32_t v;
  std::memcpy(&v, bytes(pos_, 4), 4);  // the wire is little-endian, like every host we build for
  pos_ += 4;
  return v;
}

std::uint64_t WireCursor::read_fixed64() {
  need(8, pos_, "64-bit value");
  std::uint64_t v;
  std::memcpy(&v, bytes(pos_, 8), 8);
  pos_ += 8;
  return v;
}

std::pair<std::size_t, std::size_t> WireCursor::skip_bytes() {
  const std::size_t at = pos_;
  const std::uint64_t len = read_varint();
  need(len, at, "length");
  const std::size_t start = pos_;
  pos_ += static_cast<std::size_t>(len);
  return {start, static_cast<std::size_t>(len)};
}

std::span<const std::uint8_t> WireCursor::read_bytes() {
  const auto [start, len] = skip_bytes();
  // An empty payload may lie at the very end of the data, where a window has no byte to show.
  if (len == 0) return {};
  return {bytes(start, len), len};
}

WireCursor WireCursor::read_message() {
  const std::size_t at = pos_;
  const auto [start, len] = skip_bytes();
  if (depth_ + 1 > kMaxDepth) fail(at, "messages nested deeper than " + std::to_string(kMaxDepth) + " levels");
  return WireCursor(base_, window_, size_, start, start + len, file_, depth_ + 1);
}

void WireCursor::skip(const Field& f) {
  switch (f.type) {
    case WireType::Varint: read_varint(); return;
    case WireType::Fixed64: read_fixed64(); return;
    case WireType::Fixed32: read_fixed32(); return;
    case WireType::Len:
      skip_bytes();
      return;
    case WireType::GroupStart:
    case WireType::GroupEnd: break;
  }
  fail(f.offset, "field " + std::to_string(f.number) + " uses protobuf groups (wire type " +
                     std::to_string(static_cast<int>(f.type)) + "), which ONNX never uses");
}

void WireCursor::expect(const Field& f, WireType t, std::string_view field, const std::string& owner) const {
  if (f.type == t) return;
  fail(f.offset, "field '" + std::string(field) + "' of " + owner + " has wire type " + wire_type_name(f.type) +
                     ", expected " + wire_type_name(t));
}

std::size_t count_packed_varints(const WireCursor& run) {
  const std::size_t len = run.end() - run.pos();
  if (len == 0) return 0;
  const std::uint8_t* b = run.bytes(run.pos(), len);
  std::size_t n = 0;
  for (std::size_t i = 0; i < len; ++i) n += b[i] < 0x80;
  if (b[len - 1] >= 0x80) run.fail(run.end() - 1, "truncated varint in a packed field");
  return n;
}

void WireCursor::read_int64s(const Field& f, std::vector<std::int64_t>& out, std::string_view field,
                             const std::string& owner) {
  if (f.type == WireType::Varint) {
    out.push_back(static_cast<std::int64_t>(read_varint()));
    return;
  }
  expect(f, WireType::Len, field, owner);
  WireCursor run = read_message();
  // Reserve exactly what the run holds: bounded by its bytes, not by any declared count.
  out.reserve(out.size() + count_packed_varints(run));
  while (!run.at_end()) out.push_back(static_cast<std::int64_t>(run.read_varint()));
}

void WireCursor::read_floats(const Field& f, std::vector<float>& out, std::string_view field,
                             const std::string& owner) {
  auto push = [&](std::uint32_t bits) {
    float v;
    std::memcpy(&v, &bits, 4);
    out.push_back(v);
  };
  if (f.type == WireType::Fixed32) {
    push(read_fixed32());
    return;
  }
  expect(f, WireType::Len, field, owner);
  const std::size_t at = pos_;
  auto run = read_bytes();
  if (run.size() % 4 != 0)
    fail(at, "packed field '" + std::string(field) + "' of " + owner + " has " + std::to_string(run.size()) +
                 " bytes, not a multiple of 4");
  const std::size_t n = run.size() / 4;
  const std::size_t old = out.size();
  out.resize(old + n);
  if (n) std::memcpy(out.data() + old, run.data(), run.size());
}

}  // namespace qsmcore::onnx
