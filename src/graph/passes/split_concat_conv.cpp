// Concat(x0, x1, ..., axis=1) -> Conv(W) becomes a chain of convolutions over each x_k with the
// matching input-channel slice W_k, accumulated through fused Sum post-ops:
//   y = conv(x0, W_0) + b;  y += conv(x1, W_1);  ...  (activations on the last)
// Same arithmetic, but the concatenated tensor (the largest buffer of a U-Net decoder: skip
// and up-sampled path together) is never materialised, so the activation peak drops by it.
#include <cstring>

#include "graph/passes/passes.h"
#include "graph/passes/rewrite_util.h"

namespace qsmcore::graph {
namespace {

// The conv reading the concatenation y as its data input, if it can be split: plain (no post-ops
// yet), one group, constant f32 weights and bias.
bool splittable_conv(const TypedGraph& g, const TNode& conv, int y) {
  if (conv.node.op_type != "Conv" || conv.in.size() < 2 || conv.in[0] != y || !conv.post.empty()) return false;
  if (conv.node.attrs.get_int("group", 1) != 1) return false;
  for (std::size_t k = 1; k < conv.in.size(); ++k)
    if (conv.in[k] == y) return false;
  const TValue& w = g.values[static_cast<std::size_t>(conv.in[1])];
  if (!w.is_const() || w.dtype != DType::F32) return false;
  return conv.in.size() < 3 || conv.in[2] < 0 || g.values[static_cast<std::size_t>(conv.in[2])].is_const();
}

// One conv per concatenated input, accumulated through Sum post-ops.
std::vector<TNode> split_chain(TypedGraph& g, const TNode& cat, const TNode& conv) {
  // Held by value: adding values below reallocates g.values.
  const TValue wval = g.values[static_cast<std::size_t>(conv.in[1])];
  const int out = conv.out[0];
  const TValue outv = g.values[static_cast<std::size_t>(out)];
  std::vector<TNode> chain;
  std::int64_t c0 = 0;
  int partial = -1;
  for (std::size_t k = 0; k < cat.in.size(); ++k) {
    const int x = cat.in[k];
    const std::int64_t c = g.values[static_cast<std::size_t>(x)].shape[1];
    TValue wk;
    wk.name = conv.node.name + "/W_split" + std::to_string(k);
    wk.dtype = DType::F32;
    wk.shape = wval.shape;
    wk.shape[1] = c;
    set_input_channel_slice(wk, wval, c0, c);
    const int wi = append_value(g, std::move(wk));
    c0 += c;
    TNode n;
    n.node = conv.node;
    n.node.name = conv.node.name + "/split" + std::to_string(k);
    n.node.inputs.clear();  // names are informational past typing
    n.op = conv.op;
    n.in = {x, wi, k == 0 && conv.in.size() > 2 ? conv.in[2] : -1};
    if (k > 0) {
      kernels::PostOp sum{kernels::PostOp::Kind::Sum};
      sum.sum_input = 3;
      n.in.push_back(partial);
      n.post.push_back(sum);
    }
    if (k + 1 == cat.in.size()) {
      n.out = {out};
    } else {
      partial = append_partial(g, outv, conv.node.name + "/partial" + std::to_string(k));
      n.out = {partial};
    }
    chain.push_back(std::move(n));
  }
  return chain;
}

}  // namespace

int split_concat_convs(TypedGraph& g) {
  int rewrites = 0;
  std::vector<std::vector<TNode>> replacement(g.nodes.size());
  for (std::size_t ci = 0; ci < g.nodes.size(); ++ci) {
    TNode& cat = g.nodes[ci];
    if (!channel_concat(g, cat)) continue;
    const int y = cat.out[0];
    if (g.values[static_cast<std::size_t>(y)].graph_output >= 0) continue;
    // Every reader must be a splittable conv (xQSM's octave blocks read one concatenation with
    // two convs), else the concatenation is needed anyway.
    const auto readers = live_readers(g, y);
    bool ok = !readers.empty();
    for (int r : readers)
      ok = ok && replacement[static_cast<std::size_t>(r)].empty() &&
           splittable_conv(g, g.nodes[static_cast<std::size_t>(r)], y);
    for (int x : cat.in) ok = ok && x >= 0 && !g.values[static_cast<std::size_t>(x)].is_const();
    if (!ok) continue;
    for (int r : readers) {
      // Copies: split_chain appends values, and cat/conv are read while it does.
      const TNode conv = g.nodes[static_cast<std::size_t>(r)];
      const TNode c = cat;
      replacement[static_cast<std::size_t>(r)] = split_chain(g, c, conv);
    }
    cat.dead = true;
    ++rewrites;
  }
  if (rewrites == 0) return 0;
  splice_replacements(g, replacement);
  return rewrites;
}

}  // namespace qsmcore::graph
