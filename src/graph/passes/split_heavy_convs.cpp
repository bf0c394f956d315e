// A convolution whose weights exceed a bound runs as input-channel chunks accumulated in place:
//   y = conv(x[:, C0], W[:, C0]) + b;  y += conv(x[:, C1], W[:, C1]);  ...
// (the same chain split_concat_convs builds, with Slice nodes cutting the input). Why: a weight
// unit is what a residency policy moves as one piece, so the largest unit sets the floor of a
// streaming run's weight memory (QSMnet's bottleneck conv alone holds 125 MB). Chunks bound it.
// The pass does not depend on the residency policy, so every policy runs the same arithmetic
// and outputs stay bitwise identical across policies. The extra activation is one input slice
// at a time — small where weights are large (the bottleneck of a U-Net).
#include "graph/passes/passes.h"
#include "graph/passes/rewrite_util.h"

namespace qsmcore::graph {
namespace {

int add_i64(TypedGraph& g, const std::string& name, std::int64_t x) {
  Tensor t = Tensor::empty(DType::I64, {1}, MemCategory::Weights);
  t.data<std::int64_t>()[0] = x;
  TValue v;
  v.name = name;
  v.dtype = DType::I64;
  v.shape = {1};
  v.constant = std::make_shared<const Tensor>(std::move(t));
  return append_value(g, std::move(v));
}

// The input channels per chunk where conv's weights exceed the bound: 0 where it stays whole
// (not a dense f32 conv over a computed input, within the bound, or one chunk anyway).
std::int64_t chunk_channels(const TypedGraph& g, const TNode& conv, std::uint64_t max_weight_bytes) {
  if (conv.dead || conv.node.op_type != "Conv" || conv.in.size() < 2 || conv.in[0] < 0) return 0;
  if (conv.node.attrs.get_int("group", 1) != 1) return 0;
  const TValue& wval = g.values[static_cast<std::size_t>(conv.in[1])];
  const TValue& xval = g.values[static_cast<std::size_t>(conv.in[0])];
  if (!wval.is_const() || wval.dtype != DType::F32 || wval.shape.size() < 3 || xval.is_const()) return 0;
  const std::uint64_t bytes = wval.plain_bytes();
  if (bytes <= max_weight_bytes) return 0;
  const std::int64_t cin = wval.shape[1];
  const auto pieces = static_cast<std::int64_t>((bytes + max_weight_bytes - 1) / max_weight_bytes);
  std::int64_t chunk = (cin + pieces - 1) / pieces;
  if (chunk >= 16) chunk = (chunk + 15) / 16 * 16;  // whole channel blocks of the blocked layouts
  return chunk >= cin ? 0 : chunk;
}

// Chunk k of conv: a Slice of the input's channels [c0, c0 + c) and the conv of that slice with
// the weights' slice, accumulating onto `partial` (the chunks before; -1 for the first). Appends
// both nodes to `chain`; returns the chunk's output value.
int add_chunk(TypedGraph& g, const TNode& conv, const TValue& xval, const TValue& wval, int axis, std::int64_t k,
              std::int64_t c0, std::int64_t c, int partial, std::vector<TNode>& chain) {
  const std::int64_t cin = wval.shape[1];
  const int out = conv.out[0];
  const std::string tag = conv.node.name + "/chunk" + std::to_string(k);
  TValue xk;
  xk.name = tag + "/x";
  xk.dtype = xval.dtype;
  xk.shape = xval.shape;
  xk.shape[1] = c;
  const int xi = append_value(g, std::move(xk));
  TNode sl;
  sl.node.name = tag + "/Slice";
  sl.node.op_type = "Slice";
  sl.node.opset = g.opset;
  sl.op = OpRegistry::instance().find("Slice");
  sl.in = {conv.in[0], add_i64(g, tag + "/start", c0), add_i64(g, tag + "/end", c0 + c), axis};
  sl.out = {xi};
  chain.push_back(std::move(sl));

  TValue wk;
  wk.name = tag + "/W";
  wk.dtype = DType::F32;
  wk.shape = wval.shape;
  wk.shape[1] = c;
  set_input_channel_slice(wk, wval, c0, c);
  const int wi = append_value(g, std::move(wk));
  TNode n;
  n.node = conv.node;
  n.node.name = tag;
  n.node.inputs.clear();  // names are informational past typing
  n.op = conv.op;
  if (k == 0) {
    // The first chunk keeps the bias and whatever the conv already accumulated into (a Sum
    // post-op of a split concat).
    n.in = conv.in;
    n.in[0] = xi;
    n.in[1] = wi;
    n.post = conv.post;
  } else {
    PostOp sum{PostOp::Kind::Sum};
    sum.sum_input = 3;
    n.in = {xi, wi, -1, partial};
    n.post = {sum};
  }
  if (c0 + c >= cin) {
    n.out = {out};
  } else {
    // A copy of the output's value info: appending values may reallocate g.values.
    const TValue outv = g.values[static_cast<std::size_t>(out)];
    n.out = {append_partial(g, outv, tag + "/partial")};
  }
  const int y = n.out[0];
  chain.push_back(std::move(n));
  return y;
}

}  // namespace

int split_heavy_convs(TypedGraph& g, std::uint64_t max_weight_bytes) {
  if (max_weight_bytes == 0) return 0;
  int rewrites = 0;
  std::vector<std::vector<TNode>> replacement(g.nodes.size());
  for (std::size_t ci = 0; ci < g.nodes.size(); ++ci) {
    const TNode conv = g.nodes[ci];  // a copy: adding values and nodes below reallocates
    const std::int64_t chunk = chunk_channels(g, conv, max_weight_bytes);
    if (chunk == 0) continue;
    const TValue wval = g.values[static_cast<std::size_t>(conv.in[1])];  // copies: values are appended
    const TValue xval = g.values[static_cast<std::size_t>(conv.in[0])];
    const std::int64_t cin = wval.shape[1];
    const int axis = add_i64(g, conv.node.name + "/split_axis", 1);
    std::vector<TNode> chain;
    int partial = -1;
    for (std::int64_t c0 = 0, k = 0; c0 < cin; c0 += chunk, ++k)
      partial = add_chunk(g, conv, xval, wval, axis, k, c0, std::min(chunk, cin - c0), partial, chain);
    replacement[ci] = std::move(chain);
    ++rewrites;
  }
  if (rewrites == 0) return 0;
  splice_replacements(g, replacement);
  return rewrites;
}

}  // namespace qsmcore::graph
