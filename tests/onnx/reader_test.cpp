// The reader on well-formed models built with the test writer: the IR it produces (nodes,
// attributes, initializers by location or inline, value infos, opsets) and test-data tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "onnx/onnx_writer.h"
#include "onnx/reader.h"
#include "onnx/test_util.h"

namespace qsmcore::onnx {
namespace {

namespace w = qsmtest::onnxw;
using qsmtest::error_of;
using K = graph::Attribute::Kind;

const graph::Initializer& init_named(const graph::Model& m, const std::string& name) {
  for (const auto& i : m.graph.initializers)
    if (i.name == name) return i;
  throw std::runtime_error("no initializer " + name);
}

TEST(Reader, SmallModelStructure) {
  const auto bytes = w::small_model().bytes;
  const graph::Model m = read_model(bytes, "small.onnx");
  EXPECT_EQ(m.path, "small.onnx");
  EXPECT_EQ(m.ir_version, 8);
  EXPECT_EQ(m.producer_name, "qsmtest");
  EXPECT_EQ(m.producer_version, "1");
  EXPECT_EQ(m.opset(), 17);
  ASSERT_EQ(m.sources.size(), 1u);
  EXPECT_EQ(m.graph.name, "g");

  ASSERT_EQ(m.graph.nodes.size(), 3u);
  const auto& conv = m.graph.nodes[0];
  EXPECT_EQ(conv.name, "conv0");
  EXPECT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(conv.inputs, (std::vector<std::string>{"x", "w", "b"}));
  EXPECT_EQ(conv.outputs, (std::vector<std::string>{"c"}));
  EXPECT_EQ(conv.attrs.get_ints("kernel_shape"), (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(conv.attrs.get_ints("pads"), (std::vector<std::int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(conv.attrs.get_int("group", 0), 1);

  // A node without a name gets "<op_type>_<index>" so errors can name it.
  const auto& cst = m.graph.nodes[1];
  EXPECT_EQ(cst.name, "Constant_1");
  const Tensor* value = cst.attrs.get_tensor("value");
  ASSERT_NE(value, nullptr);
  ASSERT_TRUE(value->owns_storage());
  EXPECT_EQ(value->dtype(), DType::F32);
  EXPECT_EQ(value->shape(), (Shape{2}));
  EXPECT_EQ(value->to_float_vector(), (std::vector<float>{0.5f, 2.0f}));

  const auto& act = m.graph.nodes[2];
  EXPECT_FLOAT_EQ(act.attrs.get_float("alpha", 0), 0.25f);
  EXPECT_EQ(act.attrs.get_string("note", ""), "hi");

  // "w" is listed as a graph input but is an initializer: it is not an input of the engine.
  ASSERT_EQ(m.graph.inputs.size(), 1u);
  const auto& x = m.graph.inputs[0];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DType::F32);
  ASSERT_TRUE(x.has_shape);
  ASSERT_EQ(x.dims.size(), 4u);
  EXPECT_EQ(x.dims[0].value, -1);
  EXPECT_EQ(x.dims[0].param, "d0");
  EXPECT_EQ(x.dims[2].value, 8);
  EXPECT_TRUE(x.dims[2].param.empty());
  ASSERT_EQ(m.graph.outputs.size(), 1u);
  EXPECT_EQ(m.graph.outputs[0].name, "y");
  ASSERT_EQ(m.graph.value_infos.size(), 1u);
  EXPECT_EQ(m.graph.value_infos[0].name, "c");

  // raw_data initializers are recorded by place, not copied; typed ones are decoded inline.
  const auto& wi = init_named(m, "w");
  EXPECT_EQ(wi.dtype, DType::F32);
  EXPECT_EQ(wi.dims, (Shape{2, 1, 3, 3}));
  EXPECT_EQ(wi.loc.source, 0);
  EXPECT_EQ(wi.loc.length, 18u * 4);
  float first;
  std::memcpy(&first, bytes.data() + wi.loc.offset + 4, 4);
  EXPECT_EQ(first, 0.5f);
  const Tensor wt = graph::load_initializer(m, wi);
  EXPECT_EQ(wt.data<float>()[17], 8.5f);

  const auto& bi = init_named(m, "b");
  EXPECT_EQ(bi.loc.source, -1);
  EXPECT_EQ(bi.loc.length, 8u);
  EXPECT_EQ(graph::load_initializer(m, bi).to_float_vector(), (std::vector<float>{1.5f, -2.0f}));
}

TEST(Reader, FileAndSpanGiveTheSameModel) {
  qsmtest::TempDir dir;
  const auto bytes = w::small_model().bytes;
  const std::string path = dir.file("m.onnx");
  w::write_file(path, bytes);
  const graph::Model a = read_model(path);
  const graph::Model b = read_model(bytes, "m.onnx");
  EXPECT_EQ(a.path, path);
  ASSERT_EQ(a.graph.nodes.size(), b.graph.nodes.size());
  ASSERT_EQ(a.graph.initializers.size(), b.graph.initializers.size());
  for (std::size_t i = 0; i < a.graph.initializers.size(); ++i) {
    EXPECT_EQ(a.graph.initializers[i].loc.offset, b.graph.initializers[i].loc.offset);
    const Tensor ta = graph::load_initializer(a, a.graph.initializers[i]);
    const Tensor tb = graph::load_initializer(b, b.graph.initializers[i]);
    ASSERT_EQ(ta.nbytes(), tb.nbytes());
    EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.nbytes()), 0);
  }
}

// Typed repeated fields of every dtype, packed and unpacked, decode to the right element bytes.
TEST(Reader, TypedFieldsOfEveryDtype) {
  w::GraphParts p;
  p.nodes.push_back(w::node("Identity", {"a"}, {"y"}));
  p.initializers.push_back(w::tensor_header("f32", 1, {3}).f32(4, 1.0f).packed_fixed(4, std::vector<float>{2, 3}));
  p.initializers.push_back(w::tensor_header("f64", 11, {2}).packed_fixed(10, std::vector<double>{0.25, -8}));
  p.initializers.push_back(w::tensor_header("i64", 7, {3}).packed_varints(7, {-1, 0}).i64(7, 1ll << 40));
  p.initializers.push_back(w::tensor_header("i32", 6, {2}).i64(5, -5).i64(5, 70000));
  p.initializers.push_back(w::tensor_header("i8", 3, {2}).packed_varints(5, {-3, 127}));
  p.initializers.push_back(w::tensor_header("u8", 2, {2}).packed_varints(5, {255, 1}));
  p.initializers.push_back(w::tensor_header("i16", 5, {1}).packed_varints(5, {-300}));
  p.initializers.push_back(w::tensor_header("u16", 4, {1}).packed_varints(5, {65535}));
  p.initializers.push_back(w::tensor_header("bool", 9, {3}).packed_varints(5, {1, 0, 1}));
  p.initializers.push_back(w::tensor_header("f16", 10, {1}).packed_varints(5, {0x3c00}));  // 1.0 bits
  p.initializers.push_back(w::tensor_header("u32", 12, {1}).packed_varints(11, {4000000000ll}));
  p.initializers.push_back(w::tensor_header("u64", 13, {1}).packed_varints(11, {-1}));
  p.initializers.push_back(w::tensor_header("scalar", 1, {}).f32(4, 7.0f));
  p.initializers.push_back(w::tensor_header("empty", 1, {0, 3}));
  // Found by the fuzzer: an empty packed run into an empty tensor (no storage to copy into).
  p.initializers.push_back(w::tensor_header("empty_run", 1, {0}).packed_fixed(4, std::vector<float>{}));
  p.inputs.push_back(w::value_info("a", 1, {1}));
  p.outputs.push_back(w::value_info("y", 1, {1}));
  const auto bytes = w::model(w::graph(p)).bytes;
  const graph::Model m = read_model(bytes, "typed.onnx");
  auto get = [&](const std::string& n) {
    const auto& i = init_named(m, n);
    EXPECT_EQ(i.loc.source, -1) << n;
    return graph::load_initializer(m, i);
  };
  EXPECT_EQ(get("f32").to_float_vector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(get("f64").data<double>()[1], -8.0);
  EXPECT_EQ(get("i64").to_int64_vector(), (std::vector<std::int64_t>{-1, 0, 1ll << 40}));
  EXPECT_EQ(get("i32").to_int64_vector(), (std::vector<std::int64_t>{-5, 70000}));
  EXPECT_EQ(get("i8").to_int64_vector(), (std::vector<std::int64_t>{-3, 127}));
  EXPECT_EQ(get("u8").to_int64_vector(), (std::vector<std::int64_t>{255, 1}));
  EXPECT_EQ(get("i16").to_int64_vector(), (std::vector<std::int64_t>{-300}));
  EXPECT_EQ(get("u16").to_int64_vector(), (std::vector<std::int64_t>{65535}));
  EXPECT_EQ(get("bool").to_int64_vector(), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_EQ(get("f16").data<std::uint16_t>()[0], 0x3c00);
  EXPECT_EQ(get("u32").data<std::uint32_t>()[0], 4000000000u);
  EXPECT_EQ(get("u64").data<std::uint64_t>()[0], ~0ull);
  const Tensor s = get("scalar");
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.to_float_vector(), (std::vector<float>{7.0f}));
  EXPECT_EQ(get("empty").numel(), 0);
  EXPECT_EQ(get("empty_run").numel(), 0);
}

// Files written before AttributeProto.type existed: the kind comes from the field that is set.
TEST(Reader, AttributeKindsWithAndWithoutType) {
  std::vector<w::Proto> attrs = {
      w::Proto().str(1, "i").i64(3, -4),
      w::Proto().str(1, "f").f32(2, 1.5f),
      w::Proto().str(1, "s").str(4, "txt"),
      w::Proto().str(1, "ints").i64(8, 1).i64(8, 2),  // unpacked repeated
      w::Proto().str(1, "floats").f32(7, 0.5f),
      w::Proto().str(1, "strings").str(9, "a").str(9, "b"),
      w::Proto().str(1, "g").msg(6, w::Proto().str(2, "body")).varint(20, w::kGraph),
      w::Proto().str(1, "tensors").msg(10, w::float_tensor("", {1}, {1})).varint(20, 9),
      w::attr_strings("typed_strings", {"x"}),
      w::attr_floats("typed_floats", {1, 2}),
  };
  w::GraphParts p;
  p.nodes.push_back(w::node("Custom", {"a"}, {"y"}, "n", attrs, "com.example"));
  p.inputs.push_back(w::value_info("a", 1, {1}));
  p.outputs.push_back(w::value_info("y", 1, {1}));
  const auto bytes = w::model(w::graph(p)).bytes;
  const graph::Model m = read_model(bytes, "attrs.onnx");
  const auto& n = m.graph.nodes.at(0);
  EXPECT_EQ(n.domain, "com.example");
  auto kind = [&](const std::string& a) { return n.attrs.find(a)->kind; };
  EXPECT_EQ(kind("i"), K::Int);
  EXPECT_EQ(n.attrs.get_int("i", 0), -4);
  EXPECT_EQ(kind("f"), K::Float);
  EXPECT_EQ(kind("s"), K::String);
  EXPECT_EQ(kind("ints"), K::Ints);
  EXPECT_EQ(n.attrs.get_ints("ints"), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(kind("floats"), K::Floats);
  EXPECT_EQ(kind("strings"), K::Strings);
  EXPECT_EQ(n.attrs.find("strings")->strings, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(kind("g"), K::Graph);
  EXPECT_EQ(kind("tensors"), K::Other);
  EXPECT_EQ(kind("typed_strings"), K::Strings);
  EXPECT_EQ(n.attrs.get_floats("typed_floats"), (std::vector<float>{1, 2}));
}

TEST(Reader, UnknownFieldsAreSkipped) {
  w::GraphParts p;
  p.nodes.push_back(w::node("Relu", {"a"}, {"y"}, "r").str(6, "doc").fixed64(99, 1).fixed32(98, 2));
  p.inputs.push_back(w::value_info("a", 1, {1}).str(3, "doc"));
  p.outputs.push_back(w::value_info("y", 1, {1}));
  w::Proto g = w::graph(p).str(10, "graph doc");
  w::Proto m = w::Proto().i64(1, 8).str(6, "model doc").i64(5, 3).msg(7, g).msg(8, w::Proto().i64(2, 13));
  m.msg(14, w::Proto().str(1, "k").str(2, "v"));  // metadata_props
  const graph::Model model = read_model(m.bytes, "unknown.onnx");
  EXPECT_EQ(model.graph.nodes.at(0).op_type, "Relu");
  EXPECT_EQ(model.opset(), 13);
}

TEST(Reader, TensorProtoFiles) {
  qsmtest::TempDir dir;
  const auto raw = w::raw_tensor("input_0", 7, {2, 2}, w::as_bytes(std::vector<std::int64_t>{1, 2, 3, -4})).bytes;
  const std::string path = dir.file("input_0.pb");
  w::write_file(path, raw);
  const Tensor t = read_tensor_file(path);
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_EQ(t.to_int64_vector(), (std::vector<std::int64_t>{1, 2, 3, -4}));

  const auto typed = w::tensor_header("x", 1, {2}).packed_fixed(4, std::vector<float>{3, 4}).bytes;
  const MemoryCounters before = memory_counters();
  {
    const Tensor u = read_tensor_proto(typed, "x.pb");
    EXPECT_EQ(u.to_float_vector(), (std::vector<float>{3, 4}));
    EXPECT_EQ(memory_counters().current[static_cast<int>(MemCategory::IO)] -
                  before.current[static_cast<int>(MemCategory::IO)],
              8);
  }
  EXPECT_NE(error_of([&] { read_tensor_proto(w::tensor_header("s", 8, {1}).str(6, "a").bytes, "s.pb"); },
                     ErrorKind::Unsupported)
                .find("tensor 's' holds strings"),
            std::string::npos);
}

}  // namespace
}  // namespace qsmcore::onnx
