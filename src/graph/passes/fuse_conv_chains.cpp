#include "graph/passes/passes.h"
#include "graph/passes/rewrite_util.h"

namespace qsmcore::graph {
namespace {

std::vector<std::vector<int>> readers_of(const TypedGraph& g) {
  std::vector<std::vector<int>> r(g.values.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].dead) continue;
    for (int v : g.nodes[i].in)
      if (v >= 0) r[static_cast<std::size_t>(v)].push_back(static_cast<int>(i));
  }
  return r;
}

// The activation a node computes, if it is one we can fuse with constant parameters.
bool as_activation(const TypedGraph& g, const TNode& n, PostOp& p) {
  using K = PostOp::Kind;
  const std::string& op = n.node.op_type;
  if (op == "Relu")
    p = {K::Relu};
  else if (op == "LeakyRelu")
    p = {K::LeakyRelu, n.node.attrs.get_float("alpha", 0.01f)};
  else if (op == "Elu")
    p = {K::Elu, n.node.attrs.get_float("alpha", 1.0f)};
  else if (op == "Sigmoid")
    p = {K::Sigmoid};
  else if (op == "Tanh")
    p = {K::Tanh};
  else if (op == "Clip") {
    float lo = n.node.attrs.get_float("min", -3.402823e38f);
    float hi = n.node.attrs.get_float("max", 3.402823e38f);
    for (std::size_t k = 1; k < n.in.size() && k < 3; ++k) {
      if (n.in[k] < 0) continue;
      const auto& v = g.values[static_cast<std::size_t>(n.in[k])];
      if (!v.constant || v.constant->numel() != 1 || v.dtype != DType::F32) return false;
      (k == 1 ? lo : hi) = v.constant->data<float>()[0];
    }
    p = {K::Clip, lo, hi};
  } else {
    return false;
  }
  return true;
}

}  // namespace

int fuse_conv_chains(TypedGraph& g) {
  int fused = 0;
  auto readers = readers_of(g);
  for (std::size_t ci = 0; ci < g.nodes.size(); ++ci) {
    TNode& conv = g.nodes[ci];
    if (conv.dead || (conv.node.op_type != "Conv" && conv.node.op_type != "ConvTranspose")) continue;
    if (g.values[static_cast<std::size_t>(conv.out[0])].dtype != DType::F32) continue;
    bool has_sum = false;
    for (const auto& p : conv.post) has_sum = has_sum || p.kind == PostOp::Kind::Sum;
    for (;;) {
      const int y = conv.out[0];
      const auto& yv = g.values[static_cast<std::size_t>(y)];
      const auto& rs = readers[static_cast<std::size_t>(y)];
      if (yv.graph_output >= 0 || rs.size() != 1) break;
      TNode& next = g.nodes[static_cast<std::size_t>(rs[0])];
      PostOp p;
      if (as_activation(g, next, p) && next.in[0] == y) {
        conv.post.push_back(p);
      } else if (next.node.op_type == "Add" && !has_sum && next.in.size() == 2 && next.in[0] != next.in[1]) {
        const int other = next.in[0] == y ? next.in[1] : next.in[0];
        const auto& ov = g.values[static_cast<std::size_t>(other)];
        const auto& outv = g.values[static_cast<std::size_t>(next.out[0])];
        if (ov.is_const() || ov.shape != yv.shape || outv.shape != yv.shape || ov.dtype != DType::F32) break;
        // The conv will read the addend at its own position: it must exist by then.
        if (producer_of(g, other) > static_cast<int>(ci)) break;
        p = {PostOp::Kind::Sum};
        // The addend goes after the optional bias slot so that input 2 stays the bias.
        if (conv.in.size() < 3) conv.in.resize(3, -1);
        p.sum_input = static_cast<int>(conv.in.size());
        conv.in.push_back(other);
        // The addend is now read by the conv instead of the Add.
        auto& orr = readers[static_cast<std::size_t>(other)];
        for (auto& r : orr)
          if (r == rs[0]) r = static_cast<int>(ci);
        conv.post.push_back(p);
        has_sum = true;
      } else {
        break;
      }
      const int new_out = next.out[0];
      next.dead = true;
      conv.out[0] = new_out;
      ++fused;
    }
  }
  return fused;
}

int remove_dead_nodes(TypedGraph& g) {
  int removed = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    const auto counts = g.consumer_counts();
    for (auto& n : g.nodes) {
      if (n.dead) continue;
      bool used = false;
      for (int v : n.out) {
        if (v >= 0 &&
            (counts[static_cast<std::size_t>(v)] > 0 || g.values[static_cast<std::size_t>(v)].graph_output >= 0))
          used = true;
      }
      if (!used) {
        n.dead = true;
        ++removed;
        changed = true;
      }
    }
  }
  return removed;
}

void run_passes(TypedGraph& g, const PassOptions& opts) {
  remove_dead_nodes(g);
  transposed_to_direct_convs(g);
  if (opts.fold_bn) fold_batchnorm(g);
  if (opts.split_concat) {
    hoist_through_concat(g);
    split_concat_convs(g);
  }
  if (opts.split_concat) split_conv_outputs(g);
  split_heavy_convs(g, opts.max_conv_weight_bytes);
  if (opts.fuse) {
    compare_after_relu(g);
    fuse_conv_chains(g);
  }
  remove_dead_nodes(g);
  if (opts.stream_chains)
    stream_conv_chains(g, opts.max_conv_weight_bytes, opts.chain_filter, opts.chain_window_share,
                       opts.chain_upsampled_addends, opts.chain_masks);
  if (opts.reorder) order_for_memory(g);
  // Last, on the final order (a reorder could move a clone back to the start): far enough that
  // the bytes are free over a real stretch of the run, not a few steps.
  if (opts.recompute) recompute_late_values(g, 32);
}

}  // namespace qsmcore::graph
