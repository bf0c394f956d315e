// Concat(x0, x1, ..., axis=1) -> Conv(W) becomes a chain of convolutions over each x_k with the
// matching input-channel slice W_k, accumulated through fused Sum post-ops:
//   y = conv(x0, W_0) + b;  y += conv(x1, W_1);  ...  (activations on the last)
// Same arithmetic, but the concatenated tensor (the largest buffer of a U-Net decoder: skip
// and up-sampled path together) is never materialised, so the activation peak drops by it.
#include <algorithm>
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
  // Parts run in the order their inputs become available (graph inputs first, then by
  // producer): the last accumulation reads the newest input, so a conv chain can take it from
  // the layer that makes it (IR2QSM: the encoder's own features, not the previous iteration's
  // decoder output, which is consumed and freed first).
  std::vector<std::int64_t> first_channel(cat.in.size(), 0);
  std::vector<std::size_t> order(cat.in.size());
  std::vector<int> made_by(cat.in.size());
  for (std::size_t k = 0; k < cat.in.size(); ++k) {
    order[k] = k;
    made_by[k] = producer_of(g, cat.in[k]);
    if (k > 0) first_channel[k] = first_channel[k - 1] + g.values[static_cast<std::size_t>(cat.in[k - 1])].shape[1];
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return made_by[a] < made_by[b]; });
  std::vector<TNode> chain;
  int partial = -1;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t k = order[i];
    const int x = cat.in[k];
    const std::int64_t c = g.values[static_cast<std::size_t>(x)].shape[1];
    TValue wk;
    wk.name = conv.node.name + "/W_split" + std::to_string(k);
    wk.dtype = DType::F32;
    wk.shape = wval.shape;
    wk.shape[1] = c;
    set_input_channel_slice(wk, wval, first_channel[k], c);
    const int wi = append_value(g, std::move(wk));
    TNode n;
    n.node = conv.node;
    n.node.name = conv.node.name + "/split" + std::to_string(k);
    n.node.inputs.clear();  // names are informational past typing
    n.op = conv.op;
    n.in = {x, wi, i == 0 && conv.in.size() > 2 ? conv.in[2] : -1};
    if (i > 0) {
      PostOp sum{PostOp::Kind::Sum};
      sum.sum_input = 3;
      n.in.push_back(partial);
      n.post.push_back(sum);
    }
    if (i + 1 == order.size()) {
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
