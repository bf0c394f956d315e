#include <cmath>

#include "graph/passes/passes.h"

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

}  // namespace

int fold_batchnorm(TypedGraph& g) {
  int folds = 0;
  for (std::size_t ci = 0; ci < g.nodes.size(); ++ci) {
    TNode& conv = g.nodes[ci];
    if (conv.dead || conv.node.op_type != "Conv" || !conv.post.empty() || conv.in.size() < 2) continue;
    if (!const_f32(g, conv.in[1]) || (conv.in.size() > 2 && conv.in[2] >= 0 && !const_f32(g, conv.in[2]))) continue;
    const int y = conv.out[0];
    if (g.values[static_cast<std::size_t>(y)].graph_output >= 0) continue;
    const int bi = sole_reader(g, y);
    if (bi < 0) continue;
    TNode& bn = g.nodes[static_cast<std::size_t>(bi)];
    if (bn.node.op_type != "BatchNormalization" || bn.in.size() < 5 || bn.in[0] != y) continue;
    bool params_const = true;
    for (int k = 1; k < 5; ++k) params_const = params_const && const_f32(g, bn.in[static_cast<std::size_t>(k)]);
    bool extra_outputs = false;
    for (std::size_t k = 1; k < bn.out.size(); ++k) extra_outputs = extra_outputs || bn.out[k] >= 0;
    if (!params_const || extra_outputs || bn.node.attrs.get_int("training_mode", 0) != 0) continue;

    // W' = W * s and B' = (B - mean) * s + beta with s = gamma / sqrt(var + eps), per output
    // channel. As derivations, so deferred weights fold the same way when materialised.
    const float eps = bn.node.attrs.get_float("epsilon", 1e-5f);
    auto scale = [eps](const Tensor& gamma, const Tensor& var, std::int64_t o) {
      return gamma.data<float>()[o] / std::sqrt(var.data<float>()[o] + eps);
    };
    auto fold_w = [scale](std::span<const Tensor> a) {  // W, gamma, var
      Tensor nw = a[0].clone(MemCategory::Weights);
      const std::int64_t cout = nw.dim(0);
      const std::int64_t per_out = nw.numel() / cout;
      for (std::int64_t o = 0; o < cout; ++o) {
        const float s = scale(a[1], a[2], o);
        float* wo = nw.data<float>() + o * per_out;
        for (std::int64_t k = 0; k < per_out; ++k) wo[k] *= s;
      }
      return nw;
    };
    auto fold_b = [scale](std::span<const Tensor> a) {  // gamma, beta, mean, var, bias?
      const std::int64_t cout = a[0].numel();
      Tensor nb = Tensor::empty(DType::F32, {cout}, MemCategory::Weights);
      const float* bias = a[4].raw() ? a[4].data<float>() : nullptr;
      for (std::int64_t o = 0; o < cout; ++o) {
        const float s = scale(a[0], a[3], o);
        nb.data<float>()[o] = ((bias ? bias[o] : 0.0f) - a[2].data<float>()[o]) * s + a[1].data<float>()[o];
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
    bv.shape = {wv.shape[0]};
    const TValue* wargs[] = {val(conv.in[1]), val(bn.in[1]), val(bn.in[4])};
    set_derived(wv, wargs, fold_w, /*rowwise=*/true);
    const TValue* bargs[] = {val(bn.in[1]), val(bn.in[2]), val(bn.in[3]), val(bn.in[4]),
                             conv.in.size() > 2 ? val(conv.in[2]) : nullptr};
    set_derived(bv, bargs, fold_b);
    g.values.push_back(std::move(wv));
    g.values.push_back(std::move(bv));
    conv.in.resize(3);
    conv.in[1] = static_cast<int>(g.values.size() - 2);
    conv.in[2] = static_cast<int>(g.values.size() - 1);
    conv.out[0] = bn.out[0];
    bn.dead = true;
    ++folds;
  }
  return folds;
}

}  // namespace qsmcore::graph
