#include "graph/graph.h"

#include "qsmcore/error.h"

namespace qsmcore::graph {
namespace {

const char* kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::Float: return "float";
    case Attribute::Kind::Int: return "int";
    case Attribute::Kind::String: return "string";
    case Attribute::Kind::Tensor: return "tensor";
    case Attribute::Kind::Floats: return "floats";
    case Attribute::Kind::Ints: return "ints";
    case Attribute::Kind::Strings: return "strings";
    case Attribute::Kind::Graph: return "graph";
    default: return "undefined";
  }
}

const Attribute* expect(const Attributes& a, const std::string& name, Attribute::Kind kind) {
  const Attribute* at = a.find(name);
  if (at != nullptr && at->kind != kind) {
    throw Error(ErrorKind::InvalidModel, "attribute '" + name + "' is " + kind_name(at->kind) + ", expected " +
                                             kind_name(kind));
  }
  return at;
}

}  // namespace

const Attribute* Attributes::find(const std::string& name) const {
  for (const auto& a : items)
    if (a.name == name) return &a;
  return nullptr;
}

std::int64_t Attributes::get_int(const std::string& name, std::int64_t def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::Int);
  return a ? a->i : def;
}
float Attributes::get_float(const std::string& name, float def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::Float);
  return a ? a->f : def;
}
std::string Attributes::get_string(const std::string& name, const std::string& def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::String);
  return a ? a->s : def;
}
std::vector<std::int64_t> Attributes::get_ints(const std::string& name, const std::vector<std::int64_t>& def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::Ints);
  return a ? a->ints : def;
}
std::vector<float> Attributes::get_floats(const std::string& name, const std::vector<float>& def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::Floats);
  return a ? a->floats : def;
}
const Tensor* Attributes::get_tensor(const std::string& name) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::Tensor);
  return a ? &a->t : nullptr;
}

std::string Node::label() const {
  return "node '" + name + "' (" + op_type + ")";
}

std::int64_t Model::opset(const std::string& domain) const {
  for (const auto& [d, v] : opsets) {
    if (d == domain || (domain.empty() && d == "ai.onnx") || (domain == "ai.onnx" && d.empty())) return v;
  }
  return 0;
}

Tensor load_initializer(const Model& m, const Initializer& init, MemCategory cat) {
  if (init.loc.source < 0) {
    return init.loc.inline_value.clone(cat).reshaped(init.dims);
  }
  if (static_cast<std::size_t>(init.loc.source) >= m.sources.size())
    throw Error(ErrorKind::Internal, "initializer '" + init.name + "' refers to a missing source");
  if (init.loc.length != init.nbytes()) {
    throw Error(ErrorKind::InvalidModel, m.path + ": initializer '" + init.name + "' has " +
                                             std::to_string(init.loc.length) + " bytes of data, expected " +
                                             std::to_string(init.nbytes()) + " for " + dtype_name(init.dtype) +
                                             shape_to_string(init.dims));
  }
  Tensor t = Tensor::empty(init.dtype, init.dims, cat);
  m.sources[static_cast<std::size_t>(init.loc.source)]->read(init.loc.offset, t.nbytes(), t.raw());
  return t;
}

}  // namespace qsmcore::graph
