// Elementwise ops on oneDNN: unary activations run in whatever layout their input is in (so a
// blocked tensor stays blocked), in place when the input dies here; same-shape binary ops
// likewise. Broadcasting binaries fall back to the reference kernel.
#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

class EltwiseKernel final : public PrimitiveKernel {
 public:
  EltwiseKernel(const memory::desc& md, dnnl::algorithm alg, float alpha, float beta) {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
    dnnl::eltwise_forward::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::eltwise_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_ = {{DNNL_ARG_SRC, md}};
    out_binds_ = {{DNNL_ARG_DST, md}};
  }
  int inplace_input() const override { return 0; }
};

class BinaryKernel final : public PrimitiveKernel {
 public:
  BinaryKernel(const memory::desc& md, dnnl::algorithm alg) {
    dnnl::binary::desc d(alg, md, md, md);
    dnnl::binary::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::binary(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_ = {{DNNL_ARG_SRC_0, md}, {DNNL_ARG_SRC_1, md}};
    out_binds_ = {{DNNL_ARG_DST, md}};
  }
  int inplace_input() const override { return 0; }
};

bool scalar_const(const graph::TypedGraph& g, int v, float& out) {
  if (v < 0) return false;
  const auto& tv = value(g, v);
  if (!tv.is_const() || tv.constant->numel() != 1 || tv.dtype != DType::F32) return false;
  out = tv.constant->data<float>()[0];
  return true;
}

}  // namespace

std::unique_ptr<Kernel> make_eltwise(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                                     LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.empty() || n.in[0] < 0) return nullptr;
  const std::string& op = n.node.op_type;
  using A = dnnl::algorithm;
  A alg;
  float alpha = 0.0f, beta = 0.0f;
  if (op == "Relu") alg = A::eltwise_relu;
  else if (op == "LeakyRelu") { alg = A::eltwise_relu; alpha = n.node.attrs.get_float("alpha", 0.01f); }
  else if (op == "Elu") { alg = A::eltwise_elu; alpha = n.node.attrs.get_float("alpha", 1.0f); }
  else if (op == "Sigmoid") alg = A::eltwise_logistic;
  else if (op == "Tanh") alg = A::eltwise_tanh;
  else if (op == "Abs") alg = A::eltwise_abs;
  else if (op == "Exp") alg = A::eltwise_exp;
  else if (op == "Sqrt") alg = A::eltwise_sqrt;
  else if (op == "Neg") { alg = A::eltwise_linear; alpha = -1.0f; }
  else if (op == "Clip") {
    alg = A::eltwise_clip;
    alpha = n.node.attrs.get_float("min", -3.402823e38f);
    beta = n.node.attrs.get_float("max", 3.402823e38f);
    if (n.in.size() > 1 && n.in[1] >= 0 && !scalar_const(g, n.in[1], alpha)) return nullptr;
    if (n.in.size() > 2 && n.in[2] >= 0 && !scalar_const(g, n.in[2], beta)) return nullptr;
  } else {
    return nullptr;
  }
  const auto& x = value(g, n.in[0]);
  if (x.shape.empty() || x.shape.size() > 6 || numel(x.shape) == 0) return nullptr;
  const memory::desc md = desc_of(producer[0], x.shape);
  dec.inputs.assign(n.in.size(), Layout{});
  dec.inputs[0] = producer[0];
  dec.outputs = {producer[0]};
  return std::make_unique<EltwiseKernel>(md, alg, alpha, beta);
}

std::unique_ptr<Kernel> make_binary(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                                    LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() != 2 || n.in[0] < 0 || n.in[1] < 0) return nullptr;
  const std::string& op = n.node.op_type;
  using A = dnnl::algorithm;
  A alg;
  if (op == "Add") alg = A::binary_add;
  else if (op == "Sub") alg = A::binary_sub;
  else if (op == "Mul") alg = A::binary_mul;
  else if (op == "Div") alg = A::binary_div;
  else if (op == "Max") alg = A::binary_max;
  else if (op == "Min") alg = A::binary_min;
  else return nullptr;
  const auto& a = value(g, n.in[0]);
  const auto& b = value(g, n.in[1]);
  if (a.shape != b.shape || a.is_const() || b.is_const() || a.shape.empty() || a.shape.size() > 6 || numel(a.shape) == 0)
    return nullptr;
  // Both operands in the first operand's layout (the second is reordered if it differs).
  const memory::desc md = desc_of(producer[0], a.shape);
  dec.inputs = {producer[0], producer[0]};
  dec.outputs = {producer[0]};
  return std::make_unique<BinaryKernel>(md, alg);
}

}  // namespace qsmcore::kernels::onednn
