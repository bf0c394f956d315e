// Small helpers the graph rewrites share: appending a value, and splicing node chains in place
// of the nodes they replace (keeping topological order).
#pragma once
#include <string>
#include <vector>

#include "graph/typed_graph.h"

namespace qsmcore::graph {

inline int append_value(TypedGraph& g, TValue v) {
  g.values.push_back(std::move(v));
  return static_cast<int>(g.values.size() - 1);
}

/// A fresh intermediate like `like` (same type and shape, not an output, not constant): the
/// partial sum of an accumulated conv chain.
inline int append_partial(TypedGraph& g, const TValue& like, std::string name) {
  TValue v = like;
  v.name = std::move(name);
  v.graph_output = -1;
  v.constant.reset();
  v.recipe.reset();
  return append_value(g, std::move(v));
}

/// A live Concat of ≥ 2 f32 inputs along the channel axis (1) of a tensor of rank ≥ 3: what the
/// concatenation rewrites work on.
inline bool channel_concat(const TypedGraph& g, const TNode& cat) {
  if (cat.dead || cat.node.op_type != "Concat" || cat.in.size() < 2) return false;
  const TValue& yv = g.values[static_cast<std::size_t>(cat.out[0])];
  const auto rank = static_cast<std::int64_t>(yv.shape.size());
  std::int64_t axis = cat.node.attrs.get_int("axis", 1);
  if (axis < 0) axis += rank;
  return axis == 1 && rank >= 3 && yv.dtype == DType::F32;
}

/// Live nodes reading value v (each once, in graph order).
inline std::vector<int> live_readers(const TypedGraph& g, int v) {
  std::vector<int> r;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].dead) continue;
    for (int in : g.nodes[i].in)
      if (in == v) {
        r.push_back(static_cast<int>(i));
        break;
      }
  }
  return r;
}

/// Index of the live node producing v (-1 for graph inputs and constants).
inline int producer_of(const TypedGraph& g, int v) {
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].dead) continue;
    for (int o : g.nodes[i].out)
      if (o == v) return static_cast<int>(i);
  }
  return -1;
}

/// Replaces node i by replacement[i] wherever that is non-empty.
inline void splice_replacements(TypedGraph& g, std::vector<std::vector<TNode>>& replacement) {
  std::vector<TNode> nodes;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (replacement[i].empty()) {
      nodes.push_back(std::move(g.nodes[i]));
    } else {
      for (auto& n : replacement[i]) nodes.push_back(std::move(n));
    }
  }
  g.nodes = std::move(nodes);
}

}  // namespace qsmcore::graph
