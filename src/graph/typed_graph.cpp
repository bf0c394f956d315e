#include "graph/typed_graph.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "core/checked_size.h"
#include "qsmcore/error.h"

namespace qsmcore::graph {
namespace {

bool default_domain(const std::string& d) {
  return d.empty() || d == "ai.onnx";
}

std::string dims_to_string(const ValueInfo& vi) {
  std::string s = "[";
  for (std::size_t i = 0; i < vi.dims.size(); ++i) {
    if (i) s += ",";
    s += vi.dims[i].value >= 0 ? std::to_string(vi.dims[i].value) : (vi.dims[i].param.empty() ? "?" : vi.dims[i].param);
  }
  return s + "]";
}

void check_input_shape(const ValueInfo& vi, const Shape& shape, DType dtype) {
  if (vi.dtype != DType::Undefined && dtype != vi.dtype) {
    throw Error(ErrorKind::InvalidInput,
                "input '" + vi.name + "': expected " + dtype_name(vi.dtype) + ", got " + dtype_name(dtype));
  }
  if (!vi.has_shape) return;
  bool ok = vi.dims.size() == shape.size();
  for (std::size_t i = 0; ok && i < shape.size(); ++i) ok = vi.dims[i].value < 0 || vi.dims[i].value == shape[i];
  if (!ok) {
    throw Error(ErrorKind::InvalidInput, "input '" + vi.name + "': shape " + shape_to_string(shape) +
                                             " does not match the model's " + dims_to_string(vi));
  }
}

// Kahn's algorithm over value availability; keeps the file order among ready nodes so that a
// well-formed file keeps its order.
std::vector<std::size_t> topological_order(const Graph& g, const std::unordered_map<std::string, int>& known,
                                           const std::string& path) {
  std::unordered_map<std::string, std::vector<std::size_t>> readers;
  std::vector<int> missing(g.nodes.size(), 0);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs) {
      if (in.empty() || known.count(in)) continue;
      readers[in].push_back(i);
      ++missing[i];
    }
  }
  std::vector<std::size_t> order, ready;
  for (std::size_t i = g.nodes.size(); i-- > 0;)
    if (missing[i] == 0) ready.push_back(i);
  // `ready` is a stack with the lowest index on top.
  while (!ready.empty()) {
    std::size_t i = ready.back();
    ready.pop_back();
    order.push_back(i);
    std::vector<std::size_t> newly;
    for (const auto& out : g.nodes[i].outputs) {
      auto it = readers.find(out);
      if (out.empty() || it == readers.end()) continue;
      for (std::size_t r : it->second)
        if (--missing[r] == 0) newly.push_back(r);
      readers.erase(it);
    }
    ready.insert(ready.end(), newly.begin(), newly.end());
    std::sort(ready.begin(), ready.end(), std::greater<>());
  }
  if (order.size() != g.nodes.size()) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      if (missing[i] == 0) continue;
      for (const auto& in : g.nodes[i].inputs) {
        if (!in.empty() && readers.count(in)) {
          throw Error(ErrorKind::InvalidModel, path + ": " + g.nodes[i].label() + ": input '" + in +
                                                   "' is not produced by any node, initializer or graph input"
                                                   " (or the graph has a cycle)");
        }
      }
    }
  }
  return order;
}

// Shapes computed from file data (a ConstantOfShape/Expand/Reshape target, a huge pad) are
// checked here once for every op, before anything sums, folds or allocates them.
void check_output_sizes(const Model& model, const Node& n, const std::vector<ValueType>& out_types) {
  for (std::size_t k = 0; k < out_types.size(); ++k) {
    const std::string why = shape_size_problem(out_types[k].shape, dtype_size(out_types[k].dtype));
    if (!why.empty())
      throw Error(ErrorKind::InvalidModel, model.path + ": " + n.label() + ": output " + std::to_string(k) +
                                               (k < n.outputs.size() ? " ('" + n.outputs[k] + "')" : "") + ": " + why);
  }
}

}  // namespace

std::vector<int> TypedGraph::consumer_counts() const {
  std::vector<int> c(values.size(), 0);
  for (const auto& n : nodes) {
    if (n.dead) continue;
    for (int v : n.in)
      if (v >= 0) ++c[static_cast<std::size_t>(v)];
  }
  return c;
}

std::shared_ptr<const Tensor> ConstantTable::find(const std::string& name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return tensors[i];
  return nullptr;
}

bool ConstantTable::is_deferred(const std::string& name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return tensors[i] == nullptr;
  return false;
}

TypedGraph build_typed_graph(const Model& model, const ConstantTable& constants, const std::vector<Shape>& input_shapes,
                             const std::vector<DType>& input_dtypes) {
  const Graph& g = model.graph;
  TypedGraph tg;
  tg.opset = model.opset("");
  std::unordered_map<std::string, int> index;

  if (input_shapes.size() != g.inputs.size()) {
    throw Error(ErrorKind::InvalidInput, model.path + ": the model has " + std::to_string(g.inputs.size()) +
                                             " input(s), " + std::to_string(input_shapes.size()) + " given");
  }
  auto add_value = [&](TValue v) {
    index[v.name] = static_cast<int>(tg.values.size());
    tg.values.push_back(std::move(v));
    return static_cast<int>(tg.values.size() - 1);
  };
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    const DType dt = i < input_dtypes.size() ? input_dtypes[i] : g.inputs[i].dtype;
    try {
      check_input_shape(g.inputs[i], input_shapes[i], dt);
      const std::string why = shape_size_problem(input_shapes[i], dtype_size(dt));
      if (!why.empty()) throw Error(ErrorKind::InvalidInput, "input '" + g.inputs[i].name + "': " + why);
    } catch (const Error& e) {
      throw Error(e.kind(), model.path + ": " + e.what());
    }
    TValue v;
    v.name = g.inputs[i].name;
    v.dtype = dt;
    v.shape = input_shapes[i];
    v.graph_input = static_cast<int>(i);
    tg.inputs.push_back(add_value(std::move(v)));
  }
  for (std::size_t ii = 0; ii < g.initializers.size(); ++ii) {
    const auto& init = g.initializers[ii];
    if (index.count(init.name)) continue;  // a graph input overrides an initializer default
    TValue v;
    v.name = init.name;
    v.dtype = init.dtype;
    v.shape = init.dims;
    v.constant = constants.find(init.name);
    if (!v.constant && constants.is_deferred(init.name)) {
      auto r = std::make_shared<ConstRecipe>();
      r->leaf.initializer = static_cast<int>(ii);
      v.recipe = std::move(r);
    }
    QSM_ASSERT(v.is_const(), "initializer '" + init.name + "' not resident");
    add_value(std::move(v));
  }

  // All unsupported operators in one error, so a user learns the whole gap at once.
  std::string unknown;
  const auto& reg = OpRegistry::instance();
  for (const auto& n : g.nodes) {
    if (!default_domain(n.domain) || reg.find(n.op_type) == nullptr) {
      if (!unknown.empty()) unknown += ", ";
      unknown += n.op_type + (default_domain(n.domain) ? "" : " (domain " + n.domain + ")") + " in " + n.label();
    }
  }
  if (!unknown.empty()) throw Error(ErrorKind::Unsupported, model.path + ": unsupported operator(s): " + unknown);

  for (std::size_t ni : topological_order(g, index, model.path)) {
    const Node& n = g.nodes[ni];
    TNode tn;
    tn.node = n;
    tn.node.opset = tg.opset;
    tn.op = reg.find(n.op_type);
    std::vector<ValueType> in_types;
    bool all_const = true;
    for (const auto& name : n.inputs) {
      if (name.empty()) {
        tn.in.push_back(-1);
        in_types.emplace_back();
        continue;
      }
      const int vi = index.at(name);
      tn.in.push_back(vi);
      const TValue& v = tg.values[static_cast<std::size_t>(vi)];
      in_types.push_back(ValueType{v.dtype, v.shape, v.constant.get()});  // null when deferred
      all_const = all_const && v.is_const();
    }
    for (int ci : tn.op->const_inputs) {
      if (ci < static_cast<int>(in_types.size()) && in_types[static_cast<std::size_t>(ci)].present() &&
          in_types[static_cast<std::size_t>(ci)].value == nullptr) {
        throw Error(ErrorKind::Unsupported, model.path + ": " + n.label() + ": input " + std::to_string(ci) + " ('" +
                                                n.inputs[static_cast<std::size_t>(ci)] +
                                                "') must be a constant (computed from initializers or shapes)");
      }
    }
    std::vector<ValueType> out_types;
    try {
      out_types = tn.op->infer(n, in_types);
    } catch (const Error& e) {
      throw Error(e.kind(), model.path + ": " + e.what());
    }
    check_output_sizes(model, n, out_types);
    if (out_types.size() < n.outputs.size()) {
      // Optional trailing outputs the op does not produce must be unused.
      for (std::size_t k = out_types.size(); k < n.outputs.size(); ++k) {
        if (!n.outputs[k].empty())
          throw Error(ErrorKind::Unsupported, model.path + ": " + n.label() + ": output " + std::to_string(k) + " ('" +
                                                  n.outputs[k] + "') is not supported");
      }
    }
    // Fold: every present input known (Shape only needs its input's shape) — unless the
    // result is large and much larger than what it is computed from (Expand/Tile of a small
    // table into an attention mask, say): that stays a run-time op, so the resident model holds
    // the small inputs instead of the big constant.
    std::size_t in_bytes = 0, out_bytes = 0;
    for (int vi : tn.in)
      if (vi >= 0) in_bytes += tg.values[static_cast<std::size_t>(vi)].plain_bytes();
    for (const auto& ot : out_types) out_bytes += static_cast<std::size_t>(numel(ot.shape)) * dtype_size(ot.dtype);
    const bool blows_up = out_bytes > (std::size_t{1} << 20) && out_bytes > 4 * in_bytes;
    const bool fold = (all_const && !blows_up) || n.op_type == "Shape";
    bool any_deferred = false;
    for (int vi : tn.in)
      if (vi >= 0) any_deferred = any_deferred || tg.values[static_cast<std::size_t>(vi)].deferred();
    // A fold over a deferred constant stays deferred: it runs the same reference kernel when
    // the unit reading it is materialised (Shape needs only the shape and folds now).
    const bool defer = fold && any_deferred && n.op_type != "Shape";
    std::vector<Tensor> folded;
    if (fold && !defer) {
      std::vector<Tensor> ins;
      for (std::size_t k = 0; k < tn.in.size(); ++k) {
        if (tn.in[k] < 0) {
          ins.emplace_back();
          continue;
        }
        const TValue& v = tg.values[static_cast<std::size_t>(tn.in[k])];
        ins.push_back(v.is_const() ? *v.constant : Tensor::view(v.dtype, v.shape, nullptr));
      }
      for (const auto& ot : out_types) folded.push_back(Tensor::empty(ot.dtype, ot.shape, MemCategory::Weights));
      tn.op->ref(n, ins, folded);
    }
    for (std::size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty() || k >= out_types.size()) {
        tn.out.push_back(-1);
        continue;
      }
      TValue v;
      v.name = n.outputs[k];
      v.dtype = out_types[k].dtype;
      v.shape = out_types[k].shape;
      if (defer) {
        std::vector<const TValue*> args;
        for (int vi : tn.in) args.push_back(vi < 0 ? nullptr : &tg.values[static_cast<std::size_t>(vi)]);
        std::vector<ValueType> types = out_types;
        const Node node = n;
        const OpDef* op = tn.op;
        set_derived(v, args, [node, op, types, k](std::span<const Tensor> ins) {
          std::vector<Tensor> outs;
          for (const auto& ot : types) outs.push_back(Tensor::empty(ot.dtype, ot.shape, MemCategory::Weights));
          op->ref(node, ins, outs);
          return outs[k];
        });
      } else if (fold) {
        v.constant = std::make_shared<const Tensor>(std::move(folded[k]));
      }
      tn.out.push_back(add_value(std::move(v)));
    }
    tn.dead = fold;  // a folded node never runs
    tg.nodes.push_back(std::move(tn));
  }

  for (std::size_t i = 0; i < g.outputs.size(); ++i) {
    auto it = index.find(g.outputs[i].name);
    if (it == index.end())
      throw Error(ErrorKind::InvalidModel, model.path + ": graph output '" + g.outputs[i].name + "' is never produced");
    tg.outputs.push_back(it->second);
    auto& v = tg.values[static_cast<std::size_t>(it->second)];
    if (v.graph_output < 0) v.graph_output = static_cast<int>(i);
  }
  return tg;
}

}  // namespace qsmcore::graph
