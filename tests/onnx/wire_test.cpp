// The protobuf wire cursor on hand-made bytes: every primitive, every bounds check and the
// exact error text (file, byte offset, what was expected).
#include <gtest/gtest.h>

#include "onnx/onnx_writer.h"
#include "onnx/test_util.h"
#include "onnx/wire.h"
#include "qsmcore/error.h"

namespace qsmcore::onnx {
namespace {

using qsmtest::onnxw::Proto;

const std::string kFile = "t.onnx";

using qsmtest::error_of;

TEST(Wire, VarintsOfEveryLength) {
  const std::vector<std::uint64_t> values = {0, 1, 127, 128, 300, 1u << 31, (1ull << 63) - 1, ~0ull};
  Proto p;
  for (auto v : values) p.raw_varint(v);
  WireCursor c(p.bytes, kFile);
  for (auto v : values) EXPECT_EQ(c.read_varint(), v);
  EXPECT_TRUE(c.at_end());
}

TEST(Wire, TruncatedVarintNamesItsOffset) {
  const std::vector<std::uint8_t> b = {0x08, 0x96};  // tag, then a varint whose last byte is missing
  WireCursor c(b, kFile);
  Field f;
  ASSERT_TRUE(c.next(f));
  EXPECT_EQ(error_of([&] { c.read_varint(); }), "t.onnx: at byte 1: truncated varint");
}

TEST(Wire, OverlongVarintsAreRejected) {
  std::vector<std::uint8_t> eleven(10, 0x80);
  eleven.push_back(0x01);
  WireCursor c(eleven, kFile);
  EXPECT_NE(error_of([&] { c.read_varint(); }).find("at byte 0"), std::string::npos);
  std::vector<std::uint8_t> over(9, 0xff);
  over.push_back(0x02);  // 10th byte may only be 0 or 1
  WireCursor d(over, kFile);
  EXPECT_EQ(error_of([&] { d.read_varint(); }), "t.onnx: at byte 0: varint overflows 64 bits");
}

TEST(Wire, LengthPastTheEndIsCheckedBeforeUse) {
  Proto p;
  p.tag(9, qsmtest::onnxw::kLen).raw_varint(999999);
  p.bytes.resize(p.bytes.size() + 10, 0);
  WireCursor c(p.bytes, kFile);
  Field f;
  ASSERT_TRUE(c.next(f));
  EXPECT_EQ(error_of([&] { c.read_bytes(); }),
            "t.onnx: length 999999 at byte 1 runs past the end of the data (14 bytes)");
}

TEST(Wire, HugeLengthDoesNotOverflow) {
  Proto p;
  p.tag(9, qsmtest::onnxw::kLen).raw_varint(~0ull);
  WireCursor c(p.bytes, kFile);
  Field f;
  ASSERT_TRUE(c.next(f));
  EXPECT_NE(error_of([&] { c.read_bytes(); }).find("runs past the end of the data"), std::string::npos);
}

TEST(Wire, NestedLengthIsCheckedAgainstTheEnclosingMessage) {
  Proto inner;
  inner.tag(1, qsmtest::onnxw::kLen).raw_varint(50);  // claims 50 bytes inside a 2-byte message
  Proto outer;
  outer.msg(7, inner);
  outer.bytes.resize(outer.bytes.size() + 100, 0);  // the file itself would have room
  WireCursor c(outer.bytes, kFile);
  Field f;
  ASSERT_TRUE(c.next(f));
  WireCursor m = c.read_message();
  ASSERT_TRUE(m.next(f));
  EXPECT_EQ(error_of([&] { m.read_bytes(); }),
            "t.onnx: length 50 at byte 3 runs past the end of its enclosing message at byte 4");
}

TEST(Wire, FixedWidthValues) {
  Proto p;
  p.fixed32(1, 0xdeadbeef).fixed64(2, 0x0123456789abcdefull);
  WireCursor c(p.bytes, kFile);
  Field f;
  ASSERT_TRUE(c.next(f));
  EXPECT_EQ(f.type, WireType::Fixed32);
  EXPECT_EQ(c.read_fixed32(), 0xdeadbeefu);
  ASSERT_TRUE(c.next(f));
  EXPECT_EQ(f.type, WireType::Fixed64);
  EXPECT_EQ(c.read_fixed64(), 0x0123456789abcdefull);
  EXPECT_FALSE(c.next(f));

  const std::vector<std::uint8_t> cut = {0x0d, 1, 2};
  WireCursor d(cut, kFile);
  ASSERT_TRUE(d.next(f));
  EXPECT_EQ(error_of([&] { d.read_fixed32(); }), "t.onnx: 32-bit value at byte 1 runs past the end of the data (3 bytes)");
}

TEST(Wire, SkipsEveryKnownWireTypeAndRejectsGroups) {
  Proto p;
  p.varint(1, 300).fixed64(2, 7).str(3, "abc").fixed32(4, 9).varint(5, 1);
  WireCursor c(p.bytes, kFile);
  Field f;
  int n = 0;
  while (c.next(f)) {
    c.skip(f);
    ++n;
  }
  EXPECT_EQ(n, 5);

  Proto g;
  g.tag(4, qsmtest::onnxw::kGroupStart);
  WireCursor d(g.bytes, kFile);
  ASSERT_TRUE(d.next(f));
  EXPECT_EQ(error_of([&] { d.skip(f); }),
            "t.onnx: at byte 0: field 4 uses protobuf groups (wire type 3), which ONNX never uses");
}

TEST(Wire, InvalidTagsAreRejected) {
  const std::vector<std::uint8_t> zero = {0x00};
  WireCursor c(zero, kFile);
  Field f;
  EXPECT_EQ(error_of([&] { c.next(f); }), "t.onnx: at byte 0: invalid field number 0");
  const std::vector<std::uint8_t> six = {0x0e};
  WireCursor d(six, kFile);
  EXPECT_EQ(error_of([&] { d.next(f); }), "t.onnx: at byte 0: invalid wire type 6 for field 1");
}

TEST(Wire, ExpectNamesFieldOwnerAndBothWireTypes) {
  Proto p;
  p.varint(9, 1);
  WireCursor c(p.bytes, kFile);
  Field f;
  ASSERT_TRUE(c.next(f));
  EXPECT_EQ(error_of([&] { c.expect(f, WireType::Len, "raw_data", "tensor 'w'"); }),
            "t.onnx: at byte 0: field 'raw_data' of tensor 'w' has wire type 0 (varint), expected 2 "
            "(length-delimited)");
}

TEST(Wire, RepeatedFieldsPackedAndUnpacked) {
  Proto p;
  p.packed_varints(8, {1, -2, 300}).i64(8, 4).packed_fixed(7, std::vector<float>{1.5f, 2.5f}).f32(7, 3.5f);
  WireCursor c(p.bytes, kFile);
  std::vector<std::int64_t> ints;
  std::vector<float> floats;
  Field f;
  while (c.next(f)) {
    if (f.number == 8) c.read_int64s(f, ints, "ints", "x");
    else c.read_floats(f, floats, "floats", "x");
  }
  EXPECT_EQ(ints, (std::vector<std::int64_t>{1, -2, 300, 4}));
  EXPECT_EQ(floats, (std::vector<float>{1.5f, 2.5f, 3.5f}));
}

TEST(Wire, PackedRunsMustBeWhole) {
  Proto p;
  p.data(7, std::vector<std::uint8_t>{1, 2, 3, 4, 5});  // 5 bytes of floats
  WireCursor c(p.bytes, kFile);
  Field f;
  ASSERT_TRUE(c.next(f));
  std::vector<float> v;
  EXPECT_EQ(error_of([&] { c.read_floats(f, v, "floats", "attribute 'a'"); }),
            "t.onnx: at byte 1: packed field 'floats' of attribute 'a' has 5 bytes, not a multiple of 4");

  Proto q;
  q.data(8, std::vector<std::uint8_t>{1, 0x80});  // ends inside a varint
  WireCursor d(q.bytes, kFile);
  ASSERT_TRUE(d.next(f));
  std::vector<std::int64_t> w;
  EXPECT_EQ(error_of([&] { d.read_int64s(f, w, "ints", "x"); }),
            "t.onnx: at byte 3: truncated varint in a packed field");
}

TEST(Wire, NestingDepthIsLimited) {
  Proto p;
  p.varint(1, 1);
  for (int i = 0; i < WireCursor::kMaxDepth + 2; ++i) p = Proto().msg(1, p);
  WireCursor c(p.bytes, kFile);
  std::string err = error_of([&] {
    WireCursor cur = c;
    Field f;
    while (cur.next(f) && f.type == WireType::Len) cur = cur.read_message();
  });
  EXPECT_NE(err.find("nested deeper than 32 levels"), std::string::npos) << err;
}

}  // namespace
}  // namespace qsmcore::onnx
