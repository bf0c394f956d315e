// MatMul and Gemm on oneDNN matmul, plain activations. A constant B (the usual case: a
// linear layer's weights) is packed once into the layout the implementation prefers; Gemm's
// alpha is folded into a constant B and beta into a constant C, which becomes the bias.
// Anything else oneDNN cannot express directly (1-D promotion, alpha on computed B, computed
// C) stays on the reference path.
#include <vector>

#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

using tag = memory::format_tag;
using dt = memory::data_type;

struct MatMulSpec {
  memory::desc a, b, y;          // a, y: as bound; b: plain layout of the B value
  memory::desc bias;             // zero desc when absent
  std::shared_ptr<const Tensor> b_const, bias_const;  // constants to pack
};

class MatMulKernel final : public PrimitiveKernel {
 public:
  explicit MatMulKernel(const MatMulSpec& s) {
    memory::desc b_md = s.b;
    if (s.b_const) b_md = memory::desc(s.b.dims(), dt::f32, tag::any);
    const bool has_bias = s.bias != memory::desc();
    auto d = has_bias ? dnnl::matmul::desc(s.a, b_md, s.bias, s.y) : dnnl::matmul::desc(s.a, b_md, s.y);
    dnnl::matmul::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::matmul(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_ = {{DNNL_ARG_SRC, s.a}, {DNNL_ARG_WEIGHTS, s.b}};
    if (s.b_const) {
      bind_constant(DNNL_ARG_WEIGHTS, *s.b_const, s.b, pd.weights_desc());
      in_binds_[1].arg = -1;
    }
    if (has_bias) {
      bind_constant(DNNL_ARG_BIAS, *s.bias_const, s.bias, s.bias);
      in_binds_.push_back({-1, {}});
    }
    out_binds_ = {{DNNL_ARG_DST, s.y}};
  }
};

/// Dims left-padded with ones to `rank`.
memory::dims padded(const Shape& s, std::size_t rank) {
  memory::dims d(rank - s.size(), 1);
  d.insert(d.end(), s.begin(), s.end());
  return d;
}

memory::desc dense(const memory::dims& d) {
  static const tag tags[] = {tag::undef, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  return memory::desc(d, dt::f32, tags[d.size()]);
}

std::shared_ptr<const Tensor> scaled_copy(const Tensor& t, float k) {
  auto c = std::make_shared<Tensor>(Tensor::empty(DType::F32, t.shape(), MemCategory::Weights));
  const float* s = t.data<float>();
  float* d = c->data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) d[i] = s[i] * k;
  return c;
}

}  // namespace

std::unique_ptr<Kernel> make_matmul(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>&,
                                    LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() != 2 || n.in[0] < 0 || n.in[1] < 0 || !n.post.empty()) return nullptr;
  const auto& a = value(g, n.in[0]);
  const auto& b = value(g, n.in[1]);
  const auto& y = value(g, n.out[0]);
  // 1-D operands change the output rank (numpy promotion): rare in CNNs, left to the reference.
  if (a.shape.size() < 2 || b.shape.size() < 2 || numel(y.shape) == 0 || numel(a.shape) == 0 || numel(b.shape) == 0) return nullptr;
  const std::size_t rank = y.shape.size();
  if (rank > 6) return nullptr;
  MatMulSpec s;
  s.a = dense(padded(a.shape, rank));
  s.b = dense(padded(b.shape, rank));
  s.y = dense(padded(y.shape, rank));
  if (b.is_const()) s.b_const = b.constant;
  dec.inputs = {Layout{}, Layout{}};
  dec.outputs = {Layout{}};
  return std::make_unique<MatMulKernel>(s);
}

std::unique_ptr<Kernel> make_gemm(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>&,
                                  LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() < 2 || n.in.size() > 3 || n.in[0] < 0 || n.in[1] < 0 || !n.post.empty()) return nullptr;
  const auto& a = value(g, n.in[0]);
  const auto& b = value(g, n.in[1]);
  const auto& y = value(g, n.out[0]);
  if (a.shape.size() != 2 || b.shape.size() != 2 || numel(y.shape) == 0 || numel(a.shape) == 0 || numel(b.shape) == 0) return nullptr;
  const bool ta = n.node.attrs.get_int("transA", 0) != 0, tb = n.node.attrs.get_int("transB", 0) != 0;
  const float alpha = n.node.attrs.get_float("alpha", 1.0f), beta = n.node.attrs.get_float("beta", 1.0f);
  const std::int64_t m = y.shape[0], nn = y.shape[1], k = ta ? a.shape[0] : a.shape[1];
  MatMulSpec s;
  // A transposed operand is the same bytes read column-major (format `ba`).
  s.a = memory::desc({m, k}, dt::f32, ta ? tag::ba : tag::ab);
  s.b = memory::desc({k, nn}, dt::f32, tb ? tag::ba : tag::ab);
  s.y = dense({m, nn});
  if (alpha != 1.0f) {
    if (!b.is_const()) return nullptr;
    s.b_const = scaled_copy(*b.constant, alpha);
  } else if (b.is_const()) {
    s.b_const = b.constant;
  }
  const bool has_c = n.in.size() == 3 && n.in[2] >= 0 && beta != 0.0f;
  if (has_c) {
    const auto& c = value(g, n.in[2]);
    if (!c.is_const() || c.shape.size() > 2) return nullptr;
    const memory::dims cd = padded(c.shape, 2);
    if ((cd[0] != 1 && cd[0] != m) || (cd[1] != 1 && cd[1] != nn)) return nullptr;
    s.bias = dense(cd);
    s.bias_const = beta == 1.0f ? c.constant : scaled_copy(*c.constant, beta);
  }
  dec.inputs.assign(n.in.size(), Layout{});
  dec.outputs = {Layout{}};
  return std::make_unique<MatMulKernel>(s);
}

}  // namespace qsmcore::kernels::onednn
