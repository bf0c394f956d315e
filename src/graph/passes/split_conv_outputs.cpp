// Conv -> Split(axis 1), the Split its only reader, becomes one Conv per part with the matching
// output-channel rows of the weights and bias: y_k = conv(x, W[rows_k]) + b[rows_k]. Same
// arithmetic per output channel, but the whole conv output never exists, nor the plain copy a
// reference Split would read: NeXtQSM's VJP takes the adjoint of a decoder's first conv, which
// reads cat(up, skip), as a 36-channel full-resolution conv split into the two gradients.
#include <algorithm>

#include "graph/const_recipe.h"
#include "graph/passes/passes.h"
#include "graph/passes/rewrite_util.h"

namespace qsmcore::graph {
namespace {

/// Output-channel rows [r0, r0 + r) of a constant [M, ...] (weights or bias).
void set_row_slice(TValue& out, const TValue& w, std::int64_t r0, std::int64_t r) {
  out.dtype = DType::F32;
  out.shape = w.shape;
  out.shape[0] = r;
  const TValue* args[] = {&w};
  set_derived(out, args, [r0, r](std::span<const Tensor> a) {
    const Tensor& x = a[0];
    const std::int64_t row = x.numel() / x.shape()[0];
    Shape s = x.shape();
    s[0] = r;
    Tensor t = Tensor::empty(DType::F32, s, MemCategory::Weights);
    std::copy_n(x.data<float>() + r0 * row, r * row, t.data<float>());
    return t;
  });
}

/// The part sizes of a Split along axis 1 of an f32 tensor (typing already resolved them into
/// the outputs' shapes), or empty; also empty when an output is unused.
std::vector<std::int64_t> channel_parts(const TypedGraph& g, const TNode& s) {
  if (s.dead || s.node.op_type != "Split" || s.in.empty() || s.in[0] < 0) return {};
  const TValue& x = g.values[static_cast<std::size_t>(s.in[0])];
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  std::int64_t axis = s.node.attrs.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis != 1 || rank < 3 || x.dtype != DType::F32) return {};
  std::vector<std::int64_t> parts;
  for (int o : s.out) {
    if (o < 0) return {};
    parts.push_back(g.values[static_cast<std::size_t>(o)].shape[1]);
  }
  return parts;
}

}  // namespace

int split_conv_outputs(TypedGraph& g) {
  int rewrites = 0;
  std::vector<std::vector<TNode>> replacement(g.nodes.size());
  for (std::size_t si = 0; si < g.nodes.size(); ++si) {
    const TNode split = g.nodes[si];  // copies: appending values below reallocates
    const auto parts = channel_parts(g, split);
    if (parts.empty()) continue;
    const int y = split.in[0];
    const int ci = producer_of(g, y);
    if (ci < 0 || g.values[static_cast<std::size_t>(y)].graph_output >= 0 || live_readers(g, y).size() != 1) continue;
    const TNode conv = g.nodes[static_cast<std::size_t>(ci)];
    if (conv.node.op_type != "Conv" || conv.in.size() < 2 || !conv.post.empty() ||
        conv.node.attrs.get_int("group", 1) != 1 || !replacement[static_cast<std::size_t>(ci)].empty())
      continue;
    const TValue w = g.values[static_cast<std::size_t>(conv.in[1])];
    const bool has_bias = conv.in.size() > 2 && conv.in[2] >= 0;
    if (!w.is_const() || w.dtype != DType::F32 ||
        (has_bias && !g.values[static_cast<std::size_t>(conv.in[2])].is_const()))
      continue;
    std::vector<TNode> convs;
    std::int64_t r0 = 0;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const int out = split.out[k];
      TNode n = conv;
      n.node.name = conv.node.name + "/part" + std::to_string(k);
      TValue wk;
      wk.name = n.node.name + "/W";
      set_row_slice(wk, w, r0, parts[k]);
      n.in[1] = append_value(g, std::move(wk));
      if (has_bias) {
        const TValue b = g.values[static_cast<std::size_t>(conv.in[2])];
        TValue bk;
        bk.name = n.node.name + "/B";
        set_row_slice(bk, b, r0, parts[k]);
        n.in[2] = append_value(g, std::move(bk));
      }
      n.out = {out};
      convs.push_back(std::move(n));
      r0 += parts[k];
    }
    g.nodes[static_cast<std::size_t>(ci)].dead = true;
    replacement[si] = std::move(convs);
    ++rewrites;
  }
  if (rewrites == 0) return 0;
  splice_replacements(g, replacement);
  return rewrites;
}

}  // namespace qsmcore::graph
