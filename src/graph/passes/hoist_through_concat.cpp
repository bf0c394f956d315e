// A per-channel op reading a channel concatenation is moved in front of it:
//   R(Concat(x0, …, xk)) = Concat(R(x0), …, R(xk))      R = pooling or a unary activation
// exactly (each output channel depends on its own input channel only). It matters when the
// concatenation is also read by convolutions: xQSM's octave block reads its input both directly
// (high-frequency conv) and average-pooled (high-to-low conv); once the pool reads the parts,
// split_concat_convs can split both convolutions and the full-resolution concatenation — the
// largest tensor of the decoder, plus its reorder copy — is never built.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite_util.h"

namespace qsmcore::graph {
namespace {

bool per_channel(const TNode& n) {
  static const char* const kOps[] = {"AveragePool", "MaxPool", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu"};
  bool known = false;
  for (const char* op : kOps) known = known || n.node.op_type == op;
  if (!known || n.in.size() != 1 || n.out.empty()) return false;
  for (std::size_t k = 1; k < n.out.size(); ++k)  // MaxPool's indices are not per-part
    if (n.out[k] >= 0) return false;
  return true;
}

}  // namespace

int hoist_through_concat(TypedGraph& g) {
  int rewrites = 0;
  std::vector<std::vector<TNode>> replacement(g.nodes.size());
  for (std::size_t ci = 0; ci < g.nodes.size(); ++ci) {
    const TNode& cat = g.nodes[ci];
    if (!channel_concat(g, cat)) continue;
    const int y = cat.out[0];
    bool parts_ok = true;
    for (int x : cat.in) parts_ok = parts_ok && x >= 0 && !g.values[static_cast<std::size_t>(x)].is_const();
    if (!parts_ok) continue;
    const auto readers = live_readers(g, y);
    // Only worth it when something else (a conv to split) reads the concatenation too.
    if (readers.size() < 2) continue;
    for (int r : readers) {
      const TNode op = g.nodes[static_cast<std::size_t>(r)];  // copy: values are appended below
      if (!per_channel(op) || !replacement[static_cast<std::size_t>(r)].empty()) continue;
      const TValue outv = g.values[static_cast<std::size_t>(op.out[0])];
      std::vector<TNode> chain;
      TNode joined = cat;
      joined.node.name = cat.node.name + "/" + op.node.name;
      joined.in.clear();
      for (std::size_t k = 0; k < cat.in.size(); ++k) {
        TValue part = outv;
        part.name = op.node.name + "/part" + std::to_string(k);
        part.graph_output = -1;
        part.shape[1] = g.values[static_cast<std::size_t>(cat.in[k])].shape[1];
        const int pv = append_value(g, std::move(part));
        TNode n = op;
        n.node.name = op.node.name + "/part" + std::to_string(k);
        n.in = {cat.in[k]};
        n.out = {pv};
        chain.push_back(std::move(n));
        joined.in.push_back(pv);
      }
      joined.out = {op.out[0]};
      chain.push_back(std::move(joined));
      replacement[static_cast<std::size_t>(r)] = std::move(chain);
      ++rewrites;
    }
  }
  if (rewrites == 0) return 0;
  splice_replacements(g, replacement);
  return rewrites;
}

}  // namespace qsmcore::graph
