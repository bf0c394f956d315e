// Inference BatchNormalization folded into the convolutions that feed it:
//   Conv/ConvTranspose -> BN                    W' = W·s, B' = (B − mean)·s + beta
//   (Conv|ConvT) + (Conv|ConvT) -> Add -> BN    both scaled by s, the shift goes to the first:
//                                               BN(p + q) = (p·s + shift) + q·s
// with s = gamma / sqrt(var + eps) per output channel. The BN's tensor is never built, and the
// Add that remains can then be fused as a Sum post-op of the second convolution
// (fuse_conv_chains), so the octave blocks of xQSM and the decoder steps of IR2QSM run with one
// full-resolution buffer where they had three.
#include <cmath>

#include "graph/passes/passes.h"
#include "graph/passes/rewrite_util.h"

namespace qsmcore::graph {
namespace {

// The unique live node reading value v, or -1.
int sole_reader(const TypedGraph& g, int v) {
  int reader = -1;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const auto& n = g.nodes[i];
    if (n.dead) continue;
    for (int in : n.in) {
      if (in != v) continue;
      if (reader >= 0 && reader != static_cast<int>(i)) return -1;
      reader = static_cast<int>(i);
    }
  }
  return reader;
}

bool const_f32(const TypedGraph& g, int v) {
  return v >= 0 && g.values[static_cast<std::size_t>(v)].is_const() &&
         g.values[static_cast<std::size_t>(v)].dtype == DType::F32;
}

// A convolution whose weights and bias we may rewrite: constant f32 parameters, nothing fused
// yet, read only by `reader`, not a graph output.
bool foldable_conv(const TypedGraph& g, int ni, int reader) {
  if (ni < 0) return false;
  const TNode& c = g.nodes[static_cast<std::size_t>(ni)];
  if (c.node.op_type != "Conv" && c.node.op_type != "ConvTranspose") return false;
  if (!c.post.empty() || c.in.size() < 2 || !const_f32(g, c.in[1])) return false;
  if (c.in.size() > 2 && c.in[2] >= 0 && !const_f32(g, c.in[2])) return false;
  const int y = c.out[0];
  return g.values[static_cast<std::size_t>(y)].graph_output < 0 && sole_reader(g, y) == reader;
}

// An inference BN reading `x` with constant parameters and only its first output used.
bool foldable_bn(const TypedGraph& g, const TNode& bn, int x) {
  if (bn.dead || bn.node.op_type != "BatchNormalization" || bn.in.size() < 5 || bn.in[0] != x) return false;
  for (int k = 1; k < 5; ++k)
    if (!const_f32(g, bn.in[static_cast<std::size_t>(k)])) return false;
  for (std::size_t k = 1; k < bn.out.size(); ++k)
    if (bn.out[k] >= 0) return false;
  return bn.node.attrs.get_int("training_mode", 0) == 0;
}

// Scales conv ci's weights and bias by the BN's s; with `shift`, also applies its shift.
// As derivations, so deferred weights fold the same way when materialised.
void fold_into(TypedGraph& g, std::size_t ci, const TNode& bn, bool shift) {
  TNode& conv = g.nodes[ci];
  const bool transposed = conv.node.op_type == "ConvTranspose";
  const std::int64_t group = conv.node.attrs.get_int("group", 1);
  const float eps = bn.node.attrs.get_float("epsilon", 1e-5f);
  auto scale = [eps](const Tensor& gamma, const Tensor& var, std::int64_t o) {
    return gamma.data<float>()[o] / std::sqrt(var.data<float>()[o] + eps);
  };
  // Conv W is [Cout, Cin/g, k…]: output channel = row. ConvTranspose W is [Cin, Cout/g, k…]:
  // row r belongs to group r / (Cin/g), column j is output channel group·(Cout/g) + j.
  auto fold_w = [scale, transposed, group](std::span<const Tensor> a) {  // W, gamma, var
    Tensor nw = a[0].clone(MemCategory::Weights);
    const std::int64_t rows = nw.dim(0), cols = nw.dim(1);
    const std::int64_t per_row = nw.numel() / rows, per_col = per_row / cols;
    for (std::int64_t r = 0; r < rows; ++r) {
      float* wr = nw.data<float>() + r * per_row;
      if (!transposed) {
        const float s = scale(a[1], a[2], r);
        for (std::int64_t k = 0; k < per_row; ++k) wr[k] *= s;
        continue;
      }
      const std::int64_t o0 = r / (rows / group) * cols;
      for (std::int64_t j = 0; j < cols; ++j) {
        const float s = scale(a[1], a[2], o0 + j);
        for (std::int64_t k = 0; k < per_col; ++k) wr[j * per_col + k] *= s;
      }
    }
    return nw;
  };
  auto fold_b = [scale, shift](std::span<const Tensor> a) {  // gamma, beta, mean, var, bias?
    const std::int64_t cout = a[0].numel();
    Tensor nb = Tensor::empty(DType::F32, {cout}, MemCategory::Weights);
    const float* bias = a[4].raw() ? a[4].data<float>() : nullptr;
    for (std::int64_t o = 0; o < cout; ++o) {
      const float s = scale(a[0], a[3], o);
      const float b = bias ? bias[o] : 0.0f;
      nb.data<float>()[o] = shift ? (b - a[2].data<float>()[o]) * s + a[1].data<float>()[o] : b * s;
    }
    return nb;
  };
  auto val = [&](int v) -> const TValue* { return v < 0 ? nullptr : &g.values[static_cast<std::size_t>(v)]; };
  TValue wv, bv;
  wv.name = conv.node.name + "/W_bnfolded";
  wv.dtype = DType::F32;
  wv.shape = val(conv.in[1])->shape;
  bv.name = conv.node.name + "/B_bnfolded";
  bv.dtype = DType::F32;
  bv.shape = val(bn.in[1])->shape;
  const TValue* wargs[] = {val(conv.in[1]), val(bn.in[1]), val(bn.in[4])};
  // Row-wise (commutes with input-channel slicing) only where rows are output channels.
  set_derived(wv, wargs, fold_w, /*rowwise=*/!transposed);
  const TValue* bargs[] = {val(bn.in[1]), val(bn.in[2]), val(bn.in[3]), val(bn.in[4]),
                           conv.in.size() > 2 ? val(conv.in[2]) : nullptr};
  set_derived(bv, bargs, fold_b);
  g.values.push_back(std::move(wv));
  g.values.push_back(std::move(bv));
  conv.in.resize(3);
  conv.in[1] = static_cast<int>(g.values.size() - 2);
  conv.in[2] = static_cast<int>(g.values.size() - 1);
}

}  // namespace

int fold_batchnorm(TypedGraph& g) {
  int folds = 0;
  for (std::size_t ni = 0; ni < g.nodes.size(); ++ni) {
    TNode& n = g.nodes[ni];
    if (n.dead || n.out.empty() || n.out[0] < 0) continue;
    const int y = n.out[0];
    if (g.values[static_cast<std::size_t>(y)].graph_output >= 0) continue;
    const int bi = sole_reader(g, y);
    if (bi < 0 || !foldable_bn(g, g.nodes[static_cast<std::size_t>(bi)], y)) continue;
    TNode& bn = g.nodes[static_cast<std::size_t>(bi)];
    if (foldable_conv(g, static_cast<int>(ni), bi)) {
      fold_into(g, ni, bn, /*shift=*/true);
      n.out[0] = bn.out[0];
    } else if (n.node.op_type == "Add" && n.in.size() == 2 && n.in[0] != n.in[1] && n.post.empty()) {
      const int p = producer_of(g, n.in[0]), q = producer_of(g, n.in[1]);
      const auto& shape = g.values[static_cast<std::size_t>(y)].shape;
      if (!foldable_conv(g, p, static_cast<int>(ni)) || !foldable_conv(g, q, static_cast<int>(ni)) ||
          g.values[static_cast<std::size_t>(n.in[0])].shape != shape ||
          g.values[static_cast<std::size_t>(n.in[1])].shape != shape)
        continue;
      fold_into(g, static_cast<std::size_t>(p), bn, /*shift=*/true);
      fold_into(g, static_cast<std::size_t>(q), bn, /*shift=*/false);
      n.out[0] = bn.out[0];
    } else {
      continue;
    }
    bn.dead = true;
    ++folds;
  }
  return folds;
}

}  // namespace qsmcore::graph
