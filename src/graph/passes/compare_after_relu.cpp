// A ReLU's adjoint compares the pre-activation with zero (NeXtQSM's VJP: Greater(p, 0) beside
// Relu(p) after each of its 38 convolutions). As p then has two readers, the Relu cannot become
// a post-op of the convolution making p: p is written whole, and the Relu is a step of its own
// that reads and writes it all again (a pure-I/O pass over 648 MiB when a budget streams it
// through the spill file). Comparing Relu(p) instead gives the same bits: for c ≥ 0, p > c
// exactly when max(p, 0) > c (a NaN compares false both ways, -0 is not above 0), so the Relu
// is left as p's only reader and fuses.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite_util.h"

namespace qsmcore::graph {
namespace {

// The single f32 constant of value v, when it is a number ≥ 0.
bool non_negative_scalar(const TypedGraph& g, int v) {
  if (v < 0) return false;
  const TValue& c = g.values[static_cast<std::size_t>(v)];
  if (!c.constant || c.dtype != DType::F32 || c.constant->numel() != 1) return false;
  const float x = c.constant->data<float>()[0];
  return x >= 0.0f;  // false for NaN
}

}  // namespace

int compare_after_relu(TypedGraph& g) {
  int rewritten = 0;
  for (std::size_t gi = 0; gi < g.nodes.size(); ++gi) {
    TNode& cmp = g.nodes[gi];
    if (cmp.dead || cmp.node.op_type != "Greater" || cmp.in.size() != 2 || cmp.in[0] < 0) continue;
    if (!non_negative_scalar(g, cmp.in[1])) continue;
    const int p = cmp.in[0];
    const TValue& pv = g.values[static_cast<std::size_t>(p)];
    if (pv.dtype != DType::F32) continue;
    // A Relu of p made before the comparison, of p's shape (no broadcast changes the elements).
    for (const int r : live_readers(g, p)) {
      const TNode& relu = g.nodes[static_cast<std::size_t>(r)];
      if (relu.node.op_type != "Relu" || relu.in.size() != 1 || relu.out.size() != 1 || relu.out[0] < 0) continue;
      if (static_cast<std::size_t>(r) > gi || g.values[static_cast<std::size_t>(relu.out[0])].shape != pv.shape)
        continue;
      cmp.in[0] = relu.out[0];
      ++rewritten;
      break;
    }
  }
  return rewritten;
}

}  // namespace qsmcore::graph
