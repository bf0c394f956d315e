// Malformed models: every one must be an Error with a message that says where and what, never
// a crash or a huge allocation.
#include <gtest/gtest.h>

#include "onnx/onnx_writer.h"
#include "onnx/reader.h"
#include "onnx/test_util.h"

namespace qsmcore::onnx {
namespace {

namespace w = qsmtest::onnxw;
using qsmtest::error_of;

/// A model around one graph with a single Identity node and the given initializers.
std::vector<std::uint8_t> model_with(const std::vector<w::Proto>& inits, const std::vector<w::Proto>& nodes = {}) {
  w::GraphParts p;
  p.nodes = nodes.empty() ? std::vector<w::Proto>{w::node("Identity", {"a"}, {"y"}, "id")} : nodes;
  p.initializers = inits;
  p.inputs.push_back(w::value_info("a", 1, {1}));
  p.outputs.push_back(w::value_info("y", 1, {1}));
  return w::model(w::graph(p)).bytes;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Cutting the file anywhere must give an Error. Protobuf cannot see a cut at a field boundary,
// so the reader requires the fields every valid model has; the model ends with opset_import.
TEST(BadInput, EveryTruncationIsAnError) {
  const auto bytes = w::small_model().bytes;
  ASSERT_NO_THROW(read_model(bytes, "small.onnx"));
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<std::uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    try {
      read_model(prefix, "cut.onnx");
      ADD_FAILURE() << "a prefix of " << n << " of " << bytes.size() << " bytes was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidModel) << n << ": " << e.what();
      EXPECT_TRUE(contains(e.what(), "cut.onnx: ")) << e.what();
    }
  }
}

TEST(BadInput, TruncatedFileOnDisk) {
  qsmtest::TempDir dir;
  auto bytes = w::small_model().bytes;
  bytes.resize(bytes.size() / 2);
  const std::string path = dir.file("half.onnx");
  w::write_file(path, bytes);
  EXPECT_TRUE(contains(error_of([&] { read_model(path); }), path + ": "));
}

TEST(BadInput, WrongWireTypeNamesFieldAndTensor) {
  const auto bytes = model_with({w::tensor_header("w", 1, {1}).varint(9, 5)});
  const std::string err = error_of([&] { read_model(bytes, "model.onnx"); });
  EXPECT_TRUE(contains(err, "model.onnx: at byte ")) << err;
  EXPECT_TRUE(contains(err, "field 'raw_data' of initializer 'w' has wire type 0 (varint), expected 2 "
                            "(length-delimited)"))
      << err;

  const auto node_bytes = model_with({}, {w::node("Relu", {"a"}, {"y"}, "r").varint(1, 3)});
  EXPECT_TRUE(contains(error_of([&] { read_model(node_bytes, "m.onnx"); }),
                       "field 'input' of node 'r' (Relu) has wire type 0 (varint)"));
}

TEST(BadInput, LengthBeyondTheFile) {
  // A graph whose declared length runs far past the end of the file.
  w::Proto m = w::Proto().i64(1, 8);
  m.tag(7, w::kLen).raw_varint(999999);
  m.raw(std::vector<std::uint8_t>(20, 0));
  const std::string err = error_of([&] { read_model(m.bytes, "model.onnx"); });
  EXPECT_EQ(err, "model.onnx: length 999999 at byte 3 runs past the end of the data (26 bytes)");
}

TEST(BadInput, HugeDeclaredLengthsDoNotAllocate) {
  const MemoryCounters before = memory_counters();
  w::Proto m = w::Proto().i64(1, 8);
  m.tag(7, w::kLen).raw_varint(~0ull >> 1);
  EXPECT_TRUE(contains(error_of([&] { read_model(m.bytes, "m.onnx"); }), "runs past the end of the data"));
  EXPECT_EQ(memory_counters().total_current, before.total_current);
}

TEST(BadInput, HugeDimsAreRejectedBeforeAnyAllocation) {
  reset_memory_peak();
  const std::int64_t base = memory_current();
  // 2^40 x 2^40 floats overflows; 2^40 floats with 4 bytes of data is a size mismatch; typed
  // values whose count does not match the dims must not size an allocation by the dims.
  const std::vector<std::uint8_t> four(4, 0);
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({w::raw_tensor("w", 1, {1ll << 40, 1ll << 40}, four)}), "m.onnx"); }),
                       "initializer 'w' has dimensions [1099511627776,1099511627776] whose size overflows"));
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({w::raw_tensor("w", 1, {1ll << 36}, four)}), "m.onnx"); }),
                       "initializer 'w' has 4 bytes of raw_data, expected 274877906944 for float[68719476736]"));
  EXPECT_TRUE(contains(
      error_of([&] { read_model(model_with({w::tensor_header("w", 1, {1ll << 36}).f32(4, 1.0f)}), "m.onnx"); }),
      "initializer 'w' has 1 values, expected 68719476736 for float[68719476736]"));
  // 2^40 floats (4 TiB) is beyond the largest tensor qsmcore accepts (1 TiB), whatever the data.
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({w::raw_tensor("w", 1, {1ll << 40}, four)}), "m.onnx"); }),
                       "initializer 'w': shape [1099511627776] holds 1099511627776 elements of 4 bytes, more than "
                       "the largest tensor qsmcore accepts (1099511627776 bytes)"));
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({w::raw_tensor("w", 1, {-2}, four)}), "m.onnx"); }),
                       "initializer 'w' has negative dimension -2"));
  EXPECT_LT(memory_peak() - base, 4096);
}

TEST(BadInput, UnknownDtypeIsUnsupportedAndNamesTheTensor) {
  const std::vector<std::uint8_t> eight(8, 0);
  EXPECT_EQ(error_of([&] { read_model(model_with({w::raw_tensor("cplx", 14, {1}, eight)}), "m.onnx"); },
                     ErrorKind::Unsupported),
            "m.onnx: initializer 'cplx' has unsupported data type code 14");
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({w::raw_tensor("z", 99, {1}, eight)}), "m.onnx"); },
                                ErrorKind::Unsupported),
                       "initializer 'z' has unsupported data type code 99"));
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({w::raw_tensor("u", 0, {1}, eight)}), "m.onnx"); }),
                       "initializer 'u' has no data_type"));
  w::GraphParts p;
  p.nodes.push_back(w::node("Identity", {"a"}, {"y"}));
  p.inputs.push_back(w::value_info("a", 42, {1}));
  EXPECT_TRUE(contains(error_of([&] { read_model(w::model(w::graph(p)).bytes, "m.onnx"); }, ErrorKind::Unsupported),
                       "input 'a' has unsupported element type code 42"));
}

TEST(BadInput, SparseInitializersAreUnsupported) {
  w::GraphParts p;
  p.nodes.push_back(w::node("Identity", {"a"}, {"y"}));
  const w::Proto sparse = w::Proto().msg(1, w::float_tensor("sp", {1}, {1})).i64(3, 4);
  const auto bytes = w::model(w::graph(p).msg(15, sparse)).bytes;
  const std::string err = error_of([&] { read_model(bytes, "m.onnx"); }, ErrorKind::Unsupported);
  EXPECT_TRUE(contains(err, "m.onnx: sparse initializer 'sp' at byte ")) << err;
  EXPECT_TRUE(contains(err, "sparse initializers are not supported")) << err;
}

TEST(BadInput, InconsistentTensors) {
  const std::vector<std::uint8_t> raw(8, 0);
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({w::raw_tensor("w", 1, {3}, raw)}), "m.onnx"); }),
                       "initializer 'w' has 8 bytes of raw_data, expected 12 for float[3]"));
  EXPECT_TRUE(contains(
      error_of([&] { read_model(model_with({w::raw_tensor("w", 1, {2}, raw).f32(4, 1.0f)}), "m.onnx"); }),
      "initializer 'w' has both raw_data and float_data"));
  EXPECT_TRUE(contains(
      error_of([&] { read_model(model_with({w::tensor_header("w", 1, {1}).i64(7, 1)}), "m.onnx"); }),
      "initializer 'w' of type float stores its values in int64_data, expected float_data"));
  EXPECT_TRUE(contains(
      error_of([&] { read_model(model_with({w::tensor_header("w", 7, {2}).i64(7, 1).f32(4, 1)}), "m.onnx"); }),
      "initializer 'w' has both int64_data and float_data"));
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({w::tensor_header("", 1, {0})}), "m.onnx"); }),
                       "initializer #0 has no name"));
  EXPECT_TRUE(contains(error_of([&] {
                         read_model(model_with({w::float_tensor("w", {1}, {1}), w::float_tensor("w", {1}, {2})}),
                                    "m.onnx");
                       }),
                       "m.onnx: initializer 'w' is defined twice"));
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({w::tensor_header("w", 1, {1}).varint(14, 7)}), "m.onnx"); }),
                       "initializer 'w' has data_location 7, expected 0 or 1"));
}

TEST(BadInput, BadNodesAndAttributes) {
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({}, {w::Proto().str(1, "a").str(2, "y")}), "m.onnx"); }),
                       "node 'node_0' has no op_type"));
  const auto no_name = w::node("Relu", {"a"}, {"y"}, "r", {w::Proto().i64(3, 1)});
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({}, {no_name}), "m.onnx"); }),
                       "an attribute of node 'r' (Relu) has no name"));
  const auto bad_f = w::node("Relu", {"a"}, {"y"}, "r", {w::Proto().str(1, "alpha").i64(2, 1)});
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({}, {bad_f}), "m.onnx"); }),
                       "field 'f' of attribute 'alpha' of node 'r' (Relu) has wire type 0 (varint), expected 5 (32-bit)"));
  const auto no_tensor = w::node("Constant", {}, {"y"}, "c", {w::Proto().str(1, "value").varint(20, w::kTensor)});
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({}, {no_tensor}), "m.onnx"); }),
                       "attribute 'value' of node 'c' (Constant) is of type TENSOR but holds no tensor"));
  const auto bad_value =
      w::node("Constant", {}, {"y"}, "c", {w::attr_tensor("value", w::raw_tensor("", 1, {2}, {1, 2, 3}))});
  EXPECT_TRUE(contains(error_of([&] { read_model(model_with({}, {bad_value}), "m.onnx"); }),
                       "the tensor of attribute 'value' of node 'c' (Constant) has 3 bytes of raw_data, expected 8"));
}

TEST(BadInput, MissingRequiredModelFields) {
  const w::Proto g = w::graph({});
  const w::Proto opset = w::Proto().i64(2, 17);
  EXPECT_EQ(error_of([&] { read_model(w::Proto().msg(7, g).msg(8, opset).bytes, "m.onnx"); }),
            "m.onnx: the model has no ir_version (is the file complete?)");
  EXPECT_EQ(error_of([&] { read_model(w::Proto().i64(1, 8).msg(8, opset).bytes, "m.onnx"); }),
            "m.onnx: the model has no graph (is the file complete?)");
  EXPECT_EQ(error_of([&] { read_model(w::Proto().i64(1, 8).msg(7, g).bytes, "m.onnx"); }),
            "m.onnx: the model imports no opset (is the file complete?)");
  EXPECT_EQ(error_of([&] { read_model({}, "empty.onnx"); }),
            "empty.onnx: the model has no ir_version (is the file complete?)");
}

TEST(BadInput, NotAFile) {
  qsmtest::TempDir dir;
  EXPECT_TRUE(contains(error_of([&] { read_model(dir.file("missing.onnx")); }, ErrorKind::Io), "cannot open"));
  EXPECT_TRUE(contains(error_of([&] { read_model(dir.path().string()); }, ErrorKind::Io), "not a regular file"));
}

}  // namespace
}  // namespace qsmcore::onnx
