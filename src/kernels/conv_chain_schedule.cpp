#include "kernels/conv_chain_schedule.h"

#include "graph/conv_geometry.h"

namespace qsmcore::kernels {
namespace {

const graph::TValue& value_at(const graph::TypedGraph& g, int v) {
  return g.values[static_cast<std::size_t>(v)];
}

bool is_pool(const graph::TNode& c) {
  return c.node.op_type == "MaxPool" || c.node.op_type == "AveragePool";
}

// The position of value v among the chain node's inputs.
int input_pos(const graph::TNode& n, int v) {
  for (std::size_t i = 0; i < n.in.size(); ++i)
    if (n.in[i] == v) return static_cast<int>(i);
  throw Error(ErrorKind::Internal, "conv chain: a value read is not among the node's inputs");
}

}  // namespace

ChainSchedule::ChainSchedule(const graph::TypedGraph& g, const graph::TNode& n) {
  slab = n.node.attrs.get_int("slab", 2);
  const bool pooled = is_pool(n.chain.back());
  // The layers' volume: a pooling's input, else the last layer's output.
  const auto& y0 = value_at(g, pooled ? n.chain.back().in[0] : n.chain.back().out[0]);
  d = y0.shape[2];
  h = y0.shape[3];
  w = y0.shape[4];
  // A node accumulating onto the previous node's output (a split concatenation) continues its
  // layer; any other starts one.
  int prev_out = -1;
  std::vector<int> source_out;  // per source: the value it produces
  for (const auto& c : n.chain) {
    if (&c == &n.chain.back() && pooled) {
      add_pool(c, y0.shape);
    } else if (c.node.op_type == "ConvTranspose") {
      add_source(g, n, c);
      source_out.push_back(c.out[0]);
    } else if (c.node.op_type == "Where") {  // masks the layer before it (stream_conv_chains.cpp)
      ChainLayer& l = layers.back();
      l.mask_pos = input_pos(n, c.in[0]);
      l.mask_fill = value_at(g, c.in[2]).constant->data<float>()[0];
      prev_out = -1;  // nothing accumulates onto a masked output
    } else {
      add_conv(g, n, c, prev_out, source_out);
      prev_out = c.out[0];
    }
  }
}

void ChainSchedule::add_pool(const graph::TNode& c, const std::vector<std::int64_t>& in_shape) {
  const auto geo = graph::pool_geometry(c.node, in_shape);
  ChainPool pl;
  pl.node = &c;
  for (std::size_t i = 0; i < 3; ++i) pl.k[i] = geo.kernel[i];
  pool = pl;
}

void ChainSchedule::add_source(const graph::TypedGraph& g, const graph::TNode& n, const graph::TNode& c) {
  const auto& x = value_at(g, c.in[0]);
  const auto& wt = value_at(g, c.in[1]);
  const auto geo = graph::conv_transpose_geometry(c.node, x.shape, wt.shape);
  ChainSource src;
  src.node = &c;
  // After the layers: it adds onto the last layer's output (graph/passes/stream_conv_chains.cpp).
  src.addend = !layers.empty();
  if (src.addend) layers.back().addend_source = static_cast<int>(sources.size());
  src.input_pos = input_pos(n, c.in[0]);
  src.cin = x.shape[1];
  src.m = wt.shape[1];
  for (std::size_t i = 0; i < 3; ++i) src.s[i] = geo.strides[i];
  src.ld = x.shape[2], src.lh = x.shape[3], src.lw = x.shape[4];
  sources.push_back(src);
}

// A convolution: a new layer, or a part of the current one where it accumulates onto the
// previous convolution's output (`prev_out`).
void ChainSchedule::add_conv(const graph::TypedGraph& g, const graph::TNode& n, const graph::TNode& c, int prev_out,
                             const std::vector<int>& source_out) {
  int addend = -1;
  for (const auto& p : c.post)
    if (p.kind == graph::PostOp::Kind::Sum) addend = c.in[static_cast<std::size_t>(p.sum_input)];
  const bool continues = addend >= 0 && addend == prev_out;
  if (!continues) layers.emplace_back();
  ChainLayer& l = layers.back();
  const auto& x = value_at(g, c.in[0]);
  const auto& wt = value_at(g, c.in[1]);
  const auto geo = graph::conv_geometry(c.node, x.shape, wt.shape);
  ChainPart p;
  p.node = &c;
  p.cin = x.shape[1];
  if (layers.size() == 1) {
    const auto it = std::find(source_out.begin(), source_out.end(), c.in[0]);
    if (it != source_out.end()) {
      p.source = static_cast<int>(it - source_out.begin());
    } else {
      p.input_pos = input_pos(n, c.in[0]);
    }
  }
  if (addend >= 0 && !continues) {
    p.addend_pos = input_pos(n, addend);
  }
  if (l.parts.empty()) {
    l.m = wt.shape[0];
    l.pf = geo.pads_begin[0];
    l.pb = geo.pads_end[0];
  }
  l.parts.push_back(p);
}

// An input whose bytes the output may take (the plan aliases them only when nothing reads that
// input after the chain): one whose plane z the chain never reads after the last layer has
// written plane z, and of the output's plane size. A layer's residual is read at the plane that
// layer computes, never behind the last layer. A first-layer input is read up to its front pad
// ahead, and the first layer runs ahead of the last by the other layers' back pads. Residuals
// first (LPCNN's blocks), then first-layer inputs (IR2QSM's decoders writing over their skip
// connections). A pooled chain's output has another shape: none.
int ChainSchedule::shareable_input() const {
  if (pool) return -1;
  std::int64_t lead = 0;
  for (std::size_t j = 1; j < layers.size(); ++j) lead += layers[j].pb;
  const bool lead_ok = lead >= layers.front().pf;
  auto first_layer_reads = [&](int pos) {
    return std::any_of(layers.front().parts.begin(), layers.front().parts.end(),
                       [&](const ChainPart& p) { return p.input_pos == pos; });
  };
  auto layers_adding = [&](int pos) {
    return std::count_if(layers.begin(), layers.end(),
                         [&](const ChainLayer& l) { return l.parts.front().addend_pos == pos; });
  };
  const std::int64_t m = layers.back().m;
  for (std::size_t j = layers.size(); j-- > 0;) {
    const int a = layers[j].parts.front().addend_pos;
    if (a >= 0 && layers[j].m == m && layers_adding(a) == 1 && (lead_ok || !first_layer_reads(a))) return a;
  }
  // A single layer reads and writes the same planes in one call: its input is never shared.
  if (lead_ok && layers.size() > 1)
    for (const auto& p : layers.front().parts)
      if (p.input_pos >= 0 && p.cin == m && layers_adding(p.input_pos) == 0) return p.input_pos;
  return -1;
}

}  // namespace qsmcore::kernels
