// Small helpers the graph rewrites share: appending a value, and splicing node chains in place
// of the nodes they replace (keeping topological order).
#pragma once
#include <vector>

#include "graph/typed_graph.h"

namespace qsmcore::graph {

inline int append_value(TypedGraph& g, TValue v) {
  g.values.push_back(std::move(v));
  return static_cast<int>(g.values.size() - 1);
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
