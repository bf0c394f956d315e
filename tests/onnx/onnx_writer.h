// A minimal protobuf/ONNX writer for tests and fuzz seeds: builds models byte by byte so tests
// can produce exactly the (valid or broken) wire bytes they need, without libprotobuf.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace qsmtest::onnxw {

enum Wire : std::uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kGroupStart = 3, kFixed32 = 5 };

class Proto {
 public:
  std::vector<std::uint8_t> bytes;

  Proto& raw_varint(std::uint64_t v) {
    while (v >= 0x80) {
      bytes.push_back(static_cast<std::uint8_t>(v | 0x80));
      v >>= 7;
    }
    bytes.push_back(static_cast<std::uint8_t>(v));
    return *this;
  }
  Proto& tag(std::uint32_t field, std::uint32_t wire) { return raw_varint((std::uint64_t{field} << 3) | wire); }
  Proto& raw(std::span<const std::uint8_t> b) {
    bytes.insert(bytes.end(), b.begin(), b.end());
    return *this;
  }

  Proto& varint(std::uint32_t field, std::uint64_t v) { return tag(field, kVarint).raw_varint(v); }
  Proto& i64(std::uint32_t field, std::int64_t v) { return varint(field, static_cast<std::uint64_t>(v)); }
  Proto& fixed32(std::uint32_t field, std::uint32_t v) {
    tag(field, kFixed32);
    return append_le(v);
  }
  Proto& fixed64(std::uint32_t field, std::uint64_t v) {
    tag(field, kFixed64);
    return append_le(v);
  }
  Proto& f32(std::uint32_t field, float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return fixed32(field, b);
  }
  Proto& data(std::uint32_t field, std::span<const std::uint8_t> b) {
    tag(field, kLen).raw_varint(b.size());
    return raw(b);
  }
  Proto& str(std::uint32_t field, std::string_view s) {
    return data(field, {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
  }
  Proto& msg(std::uint32_t field, const Proto& m) { return data(field, m.bytes); }
  Proto& packed_varints(std::uint32_t field, const std::vector<std::int64_t>& v) {
    Proto run;
    for (auto x : v) run.raw_varint(static_cast<std::uint64_t>(x));
    return msg(field, run);
  }
  template <class T>
  Proto& packed_fixed(std::uint32_t field, const std::vector<T>& v) {
    return data(field, {reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(T)});
  }

 private:
  template <class T>
  Proto& append_le(T v) {
    std::uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    return raw(b);
  }
};

// --- ONNX messages (field numbers from onnx.proto) ---

template <class T>
std::vector<std::uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<std::uint8_t> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

/// TensorProto header: name, data_type, dims (packed, as onnx python writes them).
inline Proto tensor_header(const std::string& name, int dtype, const std::vector<std::int64_t>& dims) {
  Proto t;
  if (!dims.empty()) t.packed_varints(1, dims);
  t.varint(2, static_cast<std::uint64_t>(dtype));
  if (!name.empty()) t.str(8, name);
  return t;
}

inline Proto raw_tensor(const std::string& name, int dtype, const std::vector<std::int64_t>& dims,
                        const std::vector<std::uint8_t>& raw) {
  return tensor_header(name, dtype, dims).data(9, raw);
}

inline Proto float_tensor(const std::string& name, const std::vector<std::int64_t>& dims,
                          const std::vector<float>& values) {
  return raw_tensor(name, 1, dims, as_bytes(values));
}

inline Proto external_tensor(const std::string& name, int dtype, const std::vector<std::int64_t>& dims,
                             const std::string& location, std::int64_t offset, std::int64_t length) {
  Proto t = tensor_header(name, dtype, dims);
  auto entry = [&](const std::string& k, const std::string& v) { t.msg(13, Proto().str(1, k).str(2, v)); };
  entry("location", location);
  if (offset >= 0) entry("offset", std::to_string(offset));
  if (length >= 0) entry("length", std::to_string(length));
  return t.varint(14, 1);
}

/// ValueInfoProto of a tensor; a dim < 0 is written as dim_param "d<index>".
inline Proto value_info(const std::string& name, int elem_type, const std::vector<std::int64_t>& dims) {
  Proto shape;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    Proto d;
    if (dims[i] >= 0) d.i64(1, dims[i]);
    else d.str(2, "d" + std::to_string(i));
    shape.msg(1, d);
  }
  Proto tensor_type = Proto().varint(1, static_cast<std::uint64_t>(elem_type)).msg(2, shape);
  return Proto().str(1, name).msg(2, Proto().msg(1, tensor_type));
}

enum AttrType { kFloat = 1, kInt = 2, kString = 3, kTensor = 4, kGraph = 5, kFloats = 6, kInts = 7, kStrings = 8 };

inline Proto attr_int(const std::string& name, std::int64_t v) { return Proto().str(1, name).i64(3, v).varint(20, kInt); }
inline Proto attr_float(const std::string& name, float v) { return Proto().str(1, name).f32(2, v).varint(20, kFloat); }
inline Proto attr_string(const std::string& name, const std::string& v) {
  return Proto().str(1, name).str(4, v).varint(20, kString);
}
inline Proto attr_ints(const std::string& name, const std::vector<std::int64_t>& v) {
  return Proto().str(1, name).packed_varints(8, v).varint(20, kInts);
}
inline Proto attr_floats(const std::string& name, const std::vector<float>& v) {
  return Proto().str(1, name).packed_fixed(7, v).varint(20, kFloats);
}
inline Proto attr_strings(const std::string& name, const std::vector<std::string>& v) {
  Proto a = Proto().str(1, name);
  for (const auto& s : v) a.str(9, s);
  return a.varint(20, kStrings);
}
inline Proto attr_tensor(const std::string& name, const Proto& tensor) {
  return Proto().str(1, name).msg(5, tensor).varint(20, kTensor);
}

inline Proto node(const std::string& op, const std::vector<std::string>& inputs,
                  const std::vector<std::string>& outputs, const std::string& name = "",
                  const std::vector<Proto>& attrs = {}, const std::string& domain = "") {
  Proto n;
  for (const auto& i : inputs) n.str(1, i);
  for (const auto& o : outputs) n.str(2, o);
  if (!name.empty()) n.str(3, name);
  n.str(4, op);
  for (const auto& a : attrs) n.msg(5, a);
  if (!domain.empty()) n.str(7, domain);
  return n;
}

struct GraphParts {
  std::string name = "g";
  std::vector<Proto> nodes, initializers, inputs, outputs, value_infos;
};

inline Proto graph(const GraphParts& p) {
  Proto g;
  for (const auto& n : p.nodes) g.msg(1, n);
  g.str(2, p.name);
  for (const auto& t : p.initializers) g.msg(5, t);
  for (const auto& v : p.inputs) g.msg(11, v);
  for (const auto& v : p.outputs) g.msg(12, v);
  for (const auto& v : p.value_infos) g.msg(13, v);
  return g;
}

/// ModelProto in the field order onnx writes: ir_version, producer, graph, opset_import last.
inline Proto model(const Proto& graph, std::int64_t opset = 17, std::int64_t ir_version = 8) {
  return Proto()
      .i64(1, ir_version)
      .str(2, "qsmtest")
      .str(3, "1")
      .msg(7, graph)
      .msg(8, Proto().str(1, "").i64(2, opset));
}

inline void write_file(const std::string& path, std::span<const std::uint8_t> bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

/// A small model touching most reader paths: Conv with a raw weight and an int64 typed
/// bias-like initializer, a Constant with a tensor attribute, attributes of every simple kind.
inline Proto small_model() {
  GraphParts p;
  p.nodes.push_back(node("Conv", {"x", "w", "b"}, {"c"}, "conv0",
                         {attr_ints("kernel_shape", {3, 3}), attr_ints("pads", {1, 1, 1, 1}), attr_int("group", 1)}));
  p.nodes.push_back(node("Constant", {}, {"k"}, "", {attr_tensor("value", float_tensor("", {2}, {0.5f, 2.0f}))}));
  p.nodes.push_back(node("LeakyRelu", {"c"}, {"y"}, "act", {attr_float("alpha", 0.25f), attr_string("note", "hi")}));
  std::vector<float> w(2 * 1 * 3 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f;
  p.initializers.push_back(float_tensor("w", {2, 1, 3, 3}, w));
  p.initializers.push_back(tensor_header("b", 1, {2}).packed_fixed(4, std::vector<float>{1.5f, -2.0f}));
  p.inputs.push_back(value_info("x", 1, {-1, 1, 8, 8}));
  p.inputs.push_back(value_info("w", 1, {2, 1, 3, 3}));  // an input that is also an initializer
  p.outputs.push_back(value_info("y", 1, {-1, 2, 8, 8}));
  p.value_infos.push_back(value_info("c", 1, {-1, 2, 8, 8}));
  return model(graph(p));
}

}  // namespace qsmtest::onnxw
