#include "onnx/reader.h"

#include <filesystem>
#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_set>

#include "onnx/external_data.h"
#include "onnx/tensor_proto.h"
#include "onnx/wire.h"
#include "qsmcore/error.h"

namespace qsmcore::onnx {
namespace {

using graph::Attribute;

// Reads the string fields `a` and `b` of a message ahead of the real parse, so that errors in
// fields that come earlier on the wire (a node's inputs come before its name) can name it.
// Malformed bytes end the peek quietly; the real parse reports them.
std::pair<std::string, std::string> peek_strings(WireCursor c, std::uint32_t a, std::uint32_t b) {
  std::pair<std::string, std::string> out;
  try {
    Field f;
    while (c.next(f)) {
      if (f.type == WireType::Len && f.number == a) out.first = c.read_string();
      else if (f.type == WireType::Len && f.number == b) out.second = c.read_string();
      else c.skip(f);
    }
  } catch (const Error&) {
  }
  return out;
}

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

class Reader {
 public:
  Reader(graph::Model& m, std::string base_dir) : m_(m), shards_(m.sources, std::move(base_dir)) {}

  void model(WireCursor c);

 private:
  void graph(WireCursor c, graph::Graph& g);
  graph::Node node(WireCursor c, std::size_t index);
  Attribute attribute(WireCursor c, const std::string& node_label);
  graph::ValueInfo value_info(WireCursor c, const char* kind);
  void tensor_type(WireCursor c, graph::ValueInfo& vi, const std::string& label);
  void shape(WireCursor c, graph::ValueInfo& vi, const std::string& label);
  graph::Initializer initializer(WireCursor c, std::size_t index);

  graph::Model& m_;
  ShardTable shards_;
};

void Reader::model(WireCursor c) {
  const std::string owner = "the model";
  bool has_graph = false, has_ir = false;
  Field f;
  while (c.next(f)) {
    switch (f.number) {
      case 1:
        c.expect(f, WireType::Varint, "ir_version", owner);
        m_.ir_version = static_cast<std::int64_t>(c.read_varint());
        has_ir = true;
        break;
      case 2: c.expect(f, WireType::Len, "producer_name", owner); m_.producer_name = c.read_string(); break;
      case 3: c.expect(f, WireType::Len, "producer_version", owner); m_.producer_version = c.read_string(); break;
      case 7:
        c.expect(f, WireType::Len, "graph", owner);
        graph(c.read_message(), m_.graph);  // a repeated message field merges, as in protobuf
        has_graph = true;
        break;
      case 8: {
        c.expect(f, WireType::Len, "opset_import", owner);
        WireCursor o = c.read_message();
        std::pair<std::string, std::int64_t> opset;
        Field g;
        while (o.next(g)) {
          if (g.number == 1) {
            o.expect(g, WireType::Len, "domain", "an opset_import");
            opset.first = o.read_string();
          } else if (g.number == 2) {
            o.expect(g, WireType::Varint, "version", "an opset_import");
            opset.second = static_cast<std::int64_t>(o.read_varint());
          } else {
            o.skip(g);
          }
        }
        m_.opsets.push_back(std::move(opset));
        break;
      }
      default: c.skip(f); break;
    }
  }
  // Protobuf cannot tell a file cut at a field boundary from a complete one; these fields every
  // valid model has (the checker requires them) turn most such truncations into errors.
  if (!has_ir) throw Error(ErrorKind::InvalidModel, m_.path + ": the model has no ir_version (is the file complete?)");
  if (!has_graph) throw Error(ErrorKind::InvalidModel, m_.path + ": the model has no graph (is the file complete?)");
  if (m_.opsets.empty())
    throw Error(ErrorKind::InvalidModel, m_.path + ": the model imports no opset (is the file complete?)");
}

void Reader::graph(WireCursor c, graph::Graph& g) {
  const std::string owner = "the graph";
  Field f;
  while (c.next(f)) {
    switch (f.number) {
      case 1:
        c.expect(f, WireType::Len, "node", owner);
        g.nodes.push_back(node(c.read_message(), g.nodes.size()));
        break;
      case 2: c.expect(f, WireType::Len, "name", owner); g.name = c.read_string(); break;
      case 5:
        c.expect(f, WireType::Len, "initializer", owner);
        g.initializers.push_back(initializer(c.read_message(), g.initializers.size()));
        break;
      case 11: c.expect(f, WireType::Len, "input", owner); g.inputs.push_back(value_info(c.read_message(), "input")); break;
      case 12:
        c.expect(f, WireType::Len, "output", owner);
        g.outputs.push_back(value_info(c.read_message(), "output"));
        break;
      case 13:
        c.expect(f, WireType::Len, "value_info", owner);
        g.value_infos.push_back(value_info(c.read_message(), "value_info"));
        break;
      case 15: {
        c.expect(f, WireType::Len, "sparse_initializer", owner);
        // SparseTensorProto.values (1) carries the name (TensorProto field 8).
        WireCursor sp = c.read_message();
        std::string name;
        try {
          Field h;
          while (sp.next(h)) {
            if (h.number == 1 && h.type == WireType::Len) name = peek_strings(sp.read_message(), 8, 8).first;
            else sp.skip(h);
          }
        } catch (const Error&) {
        }
        throw Error(ErrorKind::Unsupported, m_.path + ": sparse initializer " + in_quotes(name) + " at byte " +
                                                std::to_string(f.offset) + ": sparse initializers are not supported");
      }
      default: c.skip(f); break;
    }
  }
  // Graph inputs that are also initializers are constants with an overridable default (IR < 4
  // requires listing them); the engine treats them as weights, not as inputs.
  std::unordered_set<std::string> names;
  for (const auto& init : g.initializers) {
    if (!names.insert(init.name).second)
      throw Error(ErrorKind::InvalidModel, m_.path + ": initializer " + in_quotes(init.name) + " is defined twice");
  }
  std::erase_if(g.inputs, [&](const graph::ValueInfo& vi) { return names.count(vi.name) != 0; });
}

graph::Node Reader::node(WireCursor c, std::size_t index) {
  graph::Node n;
  auto [name, op] = peek_strings(c, 3, 4);
  n.name = name.empty() ? (op.empty() ? "node" : op) + "_" + std::to_string(index) : name;
  n.op_type = op;
  const std::string label = "node " + in_quotes(n.name) + (op.empty() ? "" : " (" + op + ")");
  const std::size_t start = c.pos();
  Field f;
  while (c.next(f)) {
    switch (f.number) {
      case 1: c.expect(f, WireType::Len, "input", label); n.inputs.push_back(c.read_string()); break;
      case 2: c.expect(f, WireType::Len, "output", label); n.outputs.push_back(c.read_string()); break;
      case 3:
        c.expect(f, WireType::Len, "name", label);
        c.skip_bytes();
        break;
      case 4:
        c.expect(f, WireType::Len, "op_type", label);
        c.skip_bytes();
        break;
      case 5: c.expect(f, WireType::Len, "attribute", label); n.attrs.items.push_back(attribute(c.read_message(), label)); break;
      case 7: c.expect(f, WireType::Len, "domain", label); n.domain = c.read_string(); break;
      default: c.skip(f); break;
    }
  }
  if (n.op_type.empty()) c.fail(start, label + " has no op_type");
  return n;
}

Attribute Reader::attribute(WireCursor c, const std::string& node_label) {
  Attribute a;
  a.name = peek_strings(c, 1, 1).first;
  const std::size_t start = c.pos();
  const std::string label = "attribute " + in_quotes(a.name) + " of " + node_label;
  std::int64_t type = -1;
  bool has_f = false, has_i = false, has_s = false, has_g = false, has_other = false;
  std::optional<WireCursor> t;
  Field f;
  while (c.next(f)) {
    switch (f.number) {
      case 1:
        c.expect(f, WireType::Len, "name", label);
        c.skip_bytes();
        break;
      case 20: c.expect(f, WireType::Varint, "type", label); type = static_cast<std::int64_t>(c.read_varint()); break;
      case 2: {
        c.expect(f, WireType::Fixed32, "f", label);
        const std::uint32_t bits = c.read_fixed32();
        std::memcpy(&a.f, &bits, 4);
        has_f = true;
        break;
      }
      case 3: c.expect(f, WireType::Varint, "i", label); a.i = static_cast<std::int64_t>(c.read_varint()); has_i = true; break;
      case 4: c.expect(f, WireType::Len, "s", label); a.s = c.read_string(); has_s = true; break;
      case 5: c.expect(f, WireType::Len, "t", label); t = c.read_message(); break;
      case 6:
      case 11:
        c.expect(f, WireType::Len, f.number == 6 ? "g" : "graphs", label);
        c.skip_bytes();
        has_g = true;
        break;
      case 7: c.read_floats(f, a.floats, "floats", label); break;
      case 8: c.read_int64s(f, a.ints, "ints", label); break;
      case 9: c.expect(f, WireType::Len, "strings", label); a.strings.push_back(c.read_string()); break;
      case 10: case 14: case 15: case 22: case 23: c.skip(f); has_other = true; break;
      default: c.skip(f); break;
    }
  }
  if (a.name.empty()) c.fail(start, "an attribute of " + node_label + " has no name");
  using K = Attribute::Kind;
  switch (type) {
    case 1: a.kind = K::Float; break;
    case 2: a.kind = K::Int; break;
    case 3: a.kind = K::String; break;
    case 4: a.kind = K::Tensor; break;
    case 5: case 10: a.kind = K::Graph; break;
    case 6: a.kind = K::Floats; break;
    case 7: a.kind = K::Ints; break;
    case 8: a.kind = K::Strings; break;
    case -1: case 0:
      // Files from before AttributeProto.type existed: the kind is the field that is set.
      a.kind = t ? K::Tensor : has_g ? K::Graph : !a.floats.empty() ? K::Floats : !a.ints.empty() ? K::Ints
             : !a.strings.empty() ? K::Strings : has_s ? K::String : has_i ? K::Int : has_f ? K::Float
             : has_other ? K::Other : K::Undefined;
      break;
    default: a.kind = K::Other; break;
  }
  if (a.kind == K::Tensor) {
    if (!t) c.fail(start, label + " is of type TENSOR but holds no tensor");
    const TensorProtoView v = scan_tensor_proto(*t, "tensor", "the tensor of " + label);
    a.t = shards_.decode(v, MemCategory::Weights);
  }
  return a;
}

graph::ValueInfo Reader::value_info(WireCursor c, const char* kind) {
  graph::ValueInfo vi;
  vi.name = peek_strings(c, 1, 1).first;
  const std::size_t start = c.pos();
  const std::string label = std::string(kind) + " " + in_quotes(vi.name);
  Field f;
  while (c.next(f)) {
    if (f.number == 1) {
      c.expect(f, WireType::Len, "name", label);
      c.skip_bytes();
    } else if (f.number == 2) {
      c.expect(f, WireType::Len, "type", label);
      WireCursor type = c.read_message();
      Field g;
      while (type.next(g)) {
        if (g.number != 1) {  // sequence/map/optional types: left undefined for the planner to reject
          type.skip(g);
          continue;
        }
        type.expect(g, WireType::Len, "tensor_type", label);
        tensor_type(type.read_message(), vi, label);
      }
    } else {
      c.skip(f);
    }
  }
  if (vi.name.empty()) c.fail(start, "a graph " + std::string(kind) + " has no name");
  return vi;
}

void Reader::tensor_type(WireCursor c, graph::ValueInfo& vi, const std::string& label) {
  Field f;
  while (c.next(f)) {
    if (f.number == 1) {
      c.expect(f, WireType::Varint, "elem_type", label);
      const auto code = static_cast<std::int32_t>(c.read_varint());
      if (code != 0 && !dtype_known(code))
        throw Error(ErrorKind::Unsupported, m_.path + ": " + label + " has unsupported element type code " +
                                                std::to_string(code));
      vi.dtype = static_cast<DType>(code);
    } else if (f.number == 2) {
      c.expect(f, WireType::Len, "shape", label);
      vi.has_shape = true;
      vi.dims.clear();
      shape(c.read_message(), vi, label);
    } else {
      c.skip(f);
    }
  }
}

void Reader::shape(WireCursor c, graph::ValueInfo& vi, const std::string& label) {
  Field f;
  while (c.next(f)) {
    if (f.number != 1) {
      c.skip(f);
      continue;
    }
    c.expect(f, WireType::Len, "dim", label);
    WireCursor d = c.read_message();
    graph::Dim dim;
    Field g;
    while (d.next(g)) {
      if (g.number == 1) {
        d.expect(g, WireType::Varint, "dim_value", label);
        // Negative sizes are not valid ONNX; exporters that write -1 mean "dynamic".
        dim.value = std::max<std::int64_t>(-1, static_cast<std::int64_t>(d.read_varint()));
        dim.param.clear();
      } else if (g.number == 2) {
        d.expect(g, WireType::Len, "dim_param", label);
        dim.param = d.read_string();
        dim.value = -1;
      } else {
        d.skip(g);
      }
    }
    vi.dims.push_back(std::move(dim));
  }
}

graph::Initializer Reader::initializer(WireCursor c, std::size_t index) {
  const std::size_t start = c.pos();
  const TensorProtoView v = scan_tensor_proto(c, "initializer", "initializer #" + std::to_string(index));
  if (v.name.empty()) c.fail(start, v.label + " has no name");
  graph::Initializer init;
  init.name = v.name;
  init.dtype = tensor_dtype(v);
  init.dims = v.dims;
  const std::uint64_t nbytes = tensor_nbytes(v, init.dtype);
  if (v.external) {
    init.loc = shards_.locate(v, nbytes);
  } else if (v.has_raw) {
    if (v.raw_length != nbytes)
      c.fail(v.raw_offset, v.label + " has " + std::to_string(v.raw_length) + " bytes of raw_data, expected " +
                               std::to_string(nbytes) + " for " + dtype_name(init.dtype) + shape_to_string(v.dims));
    // The weights stay in the file: only their place is recorded.
    init.loc.source = 0;
    init.loc.offset = v.raw_offset;
    init.loc.length = v.raw_length;
  } else {
    init.loc.inline_value = decode_tensor(v, MemCategory::Weights);
    init.loc.length = nbytes;
  }
  return init;
}

}  // namespace

graph::Model read_model(std::span<const std::uint8_t> bytes, const std::string& name, const std::string& base_dir) {
  graph::Model m;
  m.path = name;
  m.sources.push_back(io::memory_source(bytes, name));
  Reader(m, base_dir).model(WireCursor(bytes, m.path));
  return m;
}

graph::Model read_model(const std::string& path) {
  return read_model(path, ParseView::Auto);
}

graph::Model read_model_windowed(std::shared_ptr<io::ByteSource> source, const std::string& base_dir,
                                 std::size_t window_bytes) {
  graph::Model m;
  m.path = source->name();
  m.sources.push_back(std::move(source));
  WireWindow window(*m.sources[0], window_bytes);
  Reader(m, base_dir).model(WireCursor(window, m.path));
  return m;
}

graph::Model read_model(const std::string& path, ParseView view) {
  graph::Model m;
  m.path = path;
  m.sources.push_back(io::open_file_source(path));
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
#ifdef __EMSCRIPTEN__
  if (view == ParseView::Auto) view = ParseView::Windowed;
#endif
  if (view == ParseView::Windowed) return read_model_windowed(m.sources[0], dir);
  // A private read-only mapping: parsing touches only the pages holding metadata. Weights are
  // read from the file by offset later, so the view goes once the structure is parsed.
  const auto bytes = m.sources[0]->map();
  Reader(m, dir).model(WireCursor(bytes, m.path));
  m.sources[0]->release_map();
  return m;
}

Tensor read_tensor_proto(std::span<const std::uint8_t> bytes, const std::string& name) {
  std::vector<std::shared_ptr<io::ByteSource>> sources{io::memory_source(bytes, name)};
  ShardTable shards(sources, "");
  return shards.decode(scan_tensor_proto(WireCursor(bytes, name), "tensor", "the tensor"), MemCategory::IO);
}

Tensor read_tensor_file(const std::string& path) {
  std::vector<std::shared_ptr<io::ByteSource>> sources{io::open_file_source(path)};
  const std::string dir = std::filesystem::path(path).parent_path().string();
  ShardTable shards(sources, dir.empty() ? "." : dir);
  return shards.decode(scan_tensor_proto(WireCursor(sources[0]->map(), path), "tensor", "the tensor"), MemCategory::IO);
}

}  // namespace qsmcore::onnx
