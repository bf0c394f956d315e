// A graph specialised to one set of input shapes: every value has a dtype and a concrete shape,
// constants (initializers and everything folded from them) have their values, and nodes refer
// to values by index. This is what the passes rewrite and the planner schedules.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/const_recipe.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/post_op.h"

namespace qsmcore::graph {

struct TValue {
  std::string name;
  DType dtype = DType::Undefined;
  Shape shape;
  std::shared_ptr<const Tensor> constant;  // set for resident constants
  /// Set for deferred constants (weights left on disk under a residency policy): how to
  /// materialise the value. A value is resident, deferred, or computed at run time.
  std::shared_ptr<const ConstRecipe> recipe;
  int graph_input = -1;   // index among graph inputs, or -1
  int graph_output = -1;  // index among graph outputs, or -1 (first one if listed twice)
  bool is_const() const { return constant != nullptr || recipe != nullptr; }
  bool deferred() const { return constant == nullptr && recipe != nullptr; }
  std::size_t plain_bytes() const { return static_cast<std::size_t>(numel(shape)) * dtype_size(dtype); }
};

struct TNode {
  Node node;  // attributes, names
  const OpDef* op = nullptr;
  std::vector<int> in;       // value indices; -1 = absent optional input
  std::vector<int> out;      // value indices; -1 = unused optional output
  std::vector<PostOp> post;  // fused elementwise ops (Sum addends are extra inputs)
  bool dead = false;
  /// For a fused node (op "qsm.ConvChain"): the nodes it runs, in order, with their own value
  /// indices (intermediates keep their TValues, though no live node produces them).
  std::vector<TNode> chain;
};

struct TypedGraph {
  std::vector<TValue> values;
  std::vector<TNode> nodes;  // topological order
  std::vector<int> inputs;   // graph inputs in declaration order
  std::vector<int> outputs;  // graph outputs in declaration order
  std::int64_t opset = 0;

  /// Number of live nodes reading each value (post-op addends included).
  std::vector<int> consumer_counts() const;
};

/// Resolves the constants of a Model for planning: initializer name -> resident tensor, or
/// (tensor null) a deferred one whose bytes stay in the file until a unit needs them.
struct ConstantTable {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<const Tensor>> tensors;
  std::shared_ptr<const Tensor> find(const std::string& name) const;
  /// True if the initializer is known and deferred (listed with a null tensor).
  bool is_deferred(const std::string& name) const;
};

/// Builds the typed graph: topological sort (the file's order is not trusted), shape/type
/// inference, and folding of every node whose inputs are all known (Shape of a known shape
/// included), through the reference kernels. Errors name the node and what is wrong; unknown
/// operators are all listed in one error.
TypedGraph build_typed_graph(const Model& model, const ConstantTable& constants, const std::vector<Shape>& input_shapes,
                             const std::vector<DType>& input_dtypes);

}  // namespace qsmcore::graph
