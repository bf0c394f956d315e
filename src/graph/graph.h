// The engine's IR: what the ONNX reader produces and the planner consumes. Weights are not
// copied here: an Initializer holds where its bytes are (source, offset, length), or a small
// inline tensor for values ONNX stores in typed repeated fields.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/byte_source.h"
#include "qsmcore/tensor.h"

namespace qsmcore::graph {

struct Graph;

struct Attribute {
  enum class Kind { Undefined, Float, Int, String, Tensor, Floats, Ints, Strings, Graph, Other };
  std::string name;
  Kind kind = Kind::Undefined;
  float f = 0.0f;
  std::int64_t i = 0;
  std::string s;
  Tensor t;  // owned (category Weights)
  std::vector<float> floats;
  std::vector<std::int64_t> ints;
  std::vector<std::string> strings;
};

class Attributes {
 public:
  std::vector<Attribute> items;

  const Attribute* find(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }
  // Typed getters: return the default when absent; throw Error{InvalidModel} when present with
  // another kind (message names the attribute and both kinds).
  std::int64_t get_int(const std::string& name, std::int64_t def) const;
  float get_float(const std::string& name, float def) const;
  std::string get_string(const std::string& name, const std::string& def) const;
  std::vector<std::int64_t> get_ints(const std::string& name, const std::vector<std::int64_t>& def = {}) const;
  std::vector<float> get_floats(const std::string& name, const std::vector<float>& def = {}) const;
  const Tensor* get_tensor(const std::string& name) const;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" or "ai.onnx" for the default domain
  std::vector<std::string> inputs;   // "" = optional input absent
  std::vector<std::string> outputs;  // "" = optional output unused
  Attributes attrs;
  std::int64_t opset = 0;  // default-domain opset of the model (set when typed); 0 = unknown
  /// "node 'NAME' (OP)" for error messages.
  std::string label() const;
};

struct Dim {
  std::int64_t value = -1;  // -1 = dynamic
  std::string param;        // symbolic name, if any
};

struct ValueInfo {
  std::string name;
  DType dtype = DType::Undefined;
  bool has_shape = false;
  std::vector<Dim> dims;
};

struct WeightLocation {
  int source = -1;               // index into Model::sources; -1 = inline
  std::uint64_t offset = 0;      // byte offset in that source
  std::uint64_t length = 0;      // bytes
  Tensor inline_value;           // when source == -1 (decoded typed fields, small)
};

struct Initializer {
  std::string name;
  DType dtype = DType::Undefined;
  Shape dims;
  WeightLocation loc;
  std::uint64_t nbytes() const { return static_cast<std::uint64_t>(numel(dims)) * dtype_size(dtype); }
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;   // graph inputs that are not initializers
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_infos;
  std::vector<Initializer> initializers;
};

struct Model {
  std::string path;  // file the model came from ("<memory>" for spans)
  std::int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::vector<std::pair<std::string, std::int64_t>> opsets;  // (domain, version)
  Graph graph;
  /// [0] = the model source itself; further entries = external-data shard files.
  std::vector<std::shared_ptr<io::ByteSource>> sources;

  /// Opset of a domain ("" = default ONNX domain); 0 if not imported.
  std::int64_t opset(const std::string& domain = "") const;
};

/// Reads an initializer's bytes into an owned tensor of the given category (pread from its
/// source; no copy of anything else).
Tensor load_initializer(const Model& m, const Initializer& init, MemCategory cat = MemCategory::Weights);

}  // namespace qsmcore::graph
