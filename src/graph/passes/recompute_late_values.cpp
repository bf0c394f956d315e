// A value made early from the graph's inputs alone but first read much later holds its bytes
// over the whole run between: NeXtQSM's VJP takes the ReLU mask of its first full-resolution
// conv, Greater(conv(chi), 0), at the start of the forward pass and reads it at the very end of
// the backward pass. Made again right before its first reader, from the inputs (which the caller
// holds anyway), it costs one more run of that short op chain and frees its bytes for every step
// between (4.5 MiB of 63 at the VJP twin's 64³ peak). Gradient checkpointing, for the values
// where recomputing is cheapest: at most two ops deep from the inputs.
#include <algorithm>
#include <optional>
#include <vector>

#include "graph/passes/passes.h"
#include "graph/passes/rewrite_util.h"

namespace qsmcore::graph {
namespace {

constexpr std::size_t kMaxClonedWeightBytes = std::size_t{64} * 1024;

bool from_inputs(const TypedGraph& g, int v) {
  const TValue& x = g.values[static_cast<std::size_t>(v)];
  return x.is_const() || x.graph_input >= 0;
}

std::vector<int> producers(const TypedGraph& g) {
  std::vector<int> producer(g.values.size(), -1);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].dead)
      for (int o : g.nodes[i].out)
        if (o >= 0) producer[static_cast<std::size_t>(o)] = static_cast<int>(i);
  return producer;
}

// A node whose data inputs are all graph inputs or constants, or made by such nodes. A
// convolution that the chain pass made a chain of one (stream_conv_chains.cpp) is still one
// convolution: NeXtQSM's first.
bool leaf_node(const TypedGraph& g, const TNode& n) {
  const bool one_conv = n.chain.empty() || (n.chain.size() == 1 && n.chain.front().node.op_type == "Conv");
  if (n.dead || n.out.size() != 1 || !one_conv) return false;
  return std::all_of(n.in.begin(), n.in.end(), [&](int x) { return x < 0 || from_inputs(g, x); });
}

// n's recipe from the inputs: n over inputs (no parents), or n over the outputs of leaf nodes,
// each made again too (their indices). Nothing where n is not that cheap to make again.
std::optional<std::vector<int>> cheap_parents(const TypedGraph& g, const TNode& n, const std::vector<int>& producer) {
  std::vector<int> parents;
  for (int x : n.in) {
    if (x < 0 || from_inputs(g, x)) continue;
    // Values appended by this pass (clones rewired into later readers) have no entry: such a
    // reader is not made again in turn.
    const int p = static_cast<std::size_t>(x) < producer.size() ? producer[static_cast<std::size_t>(x)] : -1;
    if (p < 0 || !leaf_node(g, g.nodes[static_cast<std::size_t>(p)])) return std::nullopt;
    if (std::find(parents.begin(), parents.end(), p) == parents.end()) parents.push_back(p);
  }
  if (parents.empty() && !leaf_node(g, n)) return std::nullopt;
  return parents;
}

// The constants the clones read: each clone packs its own copy of them.
std::size_t cloned_weight_bytes(const TypedGraph& g, const TNode& n, const std::vector<int>& parents) {
  std::size_t weights = 0;
  auto add = [&](const TNode& m) {
    for (int x : m.in)
      if (x >= 0 && g.values[static_cast<std::size_t>(x)].is_const())
        weights += g.values[static_cast<std::size_t>(x)].plain_bytes();
  };
  for (int p : parents) add(g.nodes[static_cast<std::size_t>(p)]);
  add(n);
  return weights;
}

// The clones of n's parents and of n (in that order, "/again" appended to their names), with
// every reader of n's value rewired to the clone's.
std::vector<TNode> clone_recipe(TypedGraph& g, const TNode& n, const std::vector<int>& parents,
                                const std::vector<int>& readers) {
  const int v = n.out[0];
  std::vector<TNode> clones;
  std::vector<std::pair<int, int>> renamed;  // original value -> clone's
  for (int p : parents) {
    TNode c = g.nodes[static_cast<std::size_t>(p)];
    const int o = c.out[0];
    c.node.name += "/again";
    c.out[0] =
        append_partial(g, g.values[static_cast<std::size_t>(o)], g.values[static_cast<std::size_t>(o)].name + "/again");
    for (auto& sub : c.chain) std::replace(sub.out.begin(), sub.out.end(), o, c.out[0]);  // a chain of one
    renamed.emplace_back(o, c.out[0]);
    clones.push_back(std::move(c));
  }
  TNode c = n;
  c.node.name += "/again";
  for (int& x : c.in)
    for (const auto& [from, to] : renamed)
      if (x == from) x = to;
  c.out[0] =
      append_partial(g, g.values[static_cast<std::size_t>(v)], g.values[static_cast<std::size_t>(v)].name + "/again");
  for (int r : readers) {
    TNode& reader = g.nodes[static_cast<std::size_t>(r)];
    std::replace(reader.in.begin(), reader.in.end(), v, c.out[0]);
    for (auto& sub : reader.chain) std::replace(sub.in.begin(), sub.in.end(), v, c.out[0]);  // a conv chain's layers
  }
  clones.push_back(std::move(c));
  return clones;
}

}  // namespace

int recompute_late_values(TypedGraph& g, std::size_t min_distance) {
  const std::vector<int> producer = producers(g);
  int rewrites = 0;
  std::vector<std::vector<TNode>> replacement(g.nodes.size());
  const std::size_t n_nodes = g.nodes.size();
  for (std::size_t i = 0; i < n_nodes; ++i) {
    const TNode n = g.nodes[i];  // a copy: values are appended below
    if (n.dead || n.out.size() != 1 || n.out[0] < 0 || !n.chain.empty()) continue;
    const int v = n.out[0];
    if (g.values[static_cast<std::size_t>(v)].graph_output >= 0) continue;
    const std::optional<std::vector<int>> parents = cheap_parents(g, n, producer);
    if (!parents || cloned_weight_bytes(g, n, *parents) > kMaxClonedWeightBytes) continue;
    const auto readers = live_readers(g, v);
    if (readers.empty() || static_cast<std::size_t>(readers.front()) < i + min_distance) continue;
    const auto first = static_cast<std::size_t>(readers.front());
    if (!replacement[first].empty()) continue;
    // Clones before the first reader; every reader reads the clone.
    replacement[first] = clone_recipe(g, n, *parents, readers);
    g.nodes[i].dead = true;  // read by nobody now (its parents may still be)
    ++rewrites;
  }
  if (rewrites == 0) return 0;
  for (std::size_t i = 0; i < n_nodes; ++i)  // then the reader itself, as rewired
    if (!replacement[i].empty()) replacement[i].push_back(g.nodes[i]);
  splice_replacements(g, replacement);
  remove_dead_nodes(g);
  return rewrites;
}

}  // namespace qsmcore::graph
