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

    const Tensor& w = *g.values[static_cast<std::size_t>(conv.in[1])].constant;
    const std::int64_t cout = w.dim(0);
    const std::int64_t per_out = w.numel() / cout;
    auto param = [&](int k) { return g.values[static_cast<std::size_t>(bn.in[static_cast<std::size_t>(k)])].constant->data<float>(); };
    const float* gamma = param(1);
    const float* beta = param(2);
    const float* mean = param(3);
    const float* var = param(4);
    const float eps = bn.node.attrs.get_float("epsilon", 1e-5f);
    const float* bias = conv.in.size() > 2 && conv.in[2] >= 0
                            ? g.values[static_cast<std::size_t>(conv.in[2])].constant->data<float>() : nullptr;

    Tensor nw = w.clone(MemCategory::Weights);
    Tensor nb = Tensor::empty(DType::F32, {cout}, MemCategory::Weights);
    for (std::int64_t o = 0; o < cout; ++o) {
      const float s = gamma[o] / std::sqrt(var[o] + eps);
      float* wo = nw.data<float>() + o * per_out;
      for (std::int64_t k = 0; k < per_out; ++k) wo[k] *= s;
      nb.data<float>()[o] = ((bias ? bias[o] : 0.0f) - mean[o]) * s + beta[o];
    }
    auto add_const = [&](const std::string& name, Tensor t) {
      TValue v;
      v.name = name;
      v.dtype = DType::F32;
      v.shape = t.shape();
      v.constant = std::make_shared<const Tensor>(std::move(t));
      g.values.push_back(std::move(v));
      return static_cast<int>(g.values.size() - 1);
    };
    conv.in.resize(3);
    conv.in[1] = add_const(conv.node.name + "/W_bnfolded", std::move(nw));
    conv.in[2] = add_const(conv.node.name + "/B_bnfolded", std::move(nb));
    conv.out[0] = bn.out[0];
    bn.dead = true;
    ++folds;
  }
  return folds;
}

}  // namespace qsmcore::graph
