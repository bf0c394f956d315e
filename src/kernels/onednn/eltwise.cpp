// Elementwise ops on oneDNN: unary activations run in whatever layout their input is in (so a
// blocked tensor stays blocked), in place when the input dies here; same-shape binary ops
// likewise. Broadcasting binaries fall back to the reference kernel.
//
// Under a budget (issue #16) a large operand may be streamed: the op then runs on 1-D chunks of
// the buffers (kernels/element_chunks.h), one primitive per chunk size, made with the kernel.
// Only ops that give every element the same bits whatever vector lane or call it falls in
// (exactly rounded arithmetic, max/min, sign flips) and map zero to zero stream: a chunk of a
// channel-padded buffer covers its padding lanes, which must stay zero. Transcendentals (exp,
// tanh, ...) run on approximations whose tail handling may differ, so they are held whole.
#include <map>

#include "kernels/element_chunks.h"
#include "kernels/onednn/common.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::onednn {
namespace {

memory::desc flat(std::int64_t n) {
  return memory::desc({static_cast<memory::dim>(n)}, memory::data_type::f32, memory::format_tag::a);
}

// The primitives of a chunked run: one per chunk size (the common one and the last's).
class ChunkedPrimitives {
 public:
  template <typename Make>
  void build(const ElementChunks& c, Make&& make) {
    chunks_ = c;
    if (!c.streams()) return;
    for (const std::int64_t n : {c.per, c.elements % c.per})
      if (n > 0 && !prims_.count(n)) prims_.emplace(n, make(flat(n)));
  }
  const ElementChunks& chunks() const { return chunks_; }
  /// Runs the chunks, binding SRC/SRC_0, SRC_1 (binary) and DST for each.
  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ExecContext& ctx,
           const std::vector<int>& in_args) const {
    const std::vector<std::size_t> bytes(inputs.size(), sizeof(float));
    const std::vector<bool> full(inputs.size(), true);
    walk_element_chunks(chunks_, inputs, outputs, bytes, full, sizeof(float), ctx, [&](const ElementChunk& ch) {
      const memory::desc md = flat(ch.count);
      std::unordered_map<int, memory> args;
      for (std::size_t i = 0; i < in_args.size(); ++i)
        args.emplace(in_args[i], memory(md, engine(), const_cast<void*>(ch.in[i])));
      args.emplace(DNNL_ARG_DST, memory(md, engine(), ch.out));
      prims_.at(ch.count).execute(stream(), args);
      stream().wait();
    });
  }

 private:
  ElementChunks chunks_;
  std::map<std::int64_t, dnnl::primitive> prims_;
};

bool streamed(const ExecContext& ctx) {
  return !ctx.streamed_in.empty() || !ctx.streamed_out.empty();
}

std::int64_t physical_floats(const memory::desc& md) {
  return static_cast<std::int64_t>(md.get_size() / sizeof(float));
}

class EltwiseKernel final : public PrimitiveKernel {
 public:
  EltwiseKernel(const memory::desc& md, dnnl::algorithm alg, float alpha, float beta, bool exact) {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
    dnnl::eltwise_forward::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::eltwise_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_ = {{DNNL_ARG_SRC, md}};
    out_binds_ = {{DNNL_ARG_DST, md}};
    if (!exact) return;
    chunked_.build(ElementChunks::of(physical_floats(md)), [&](const memory::desc& cmd) {
      dnnl::eltwise_forward::desc cd(dnnl::prop_kind::forward_inference, alg, cmd, alpha, beta);
      dnnl::eltwise_forward::primitive_desc cpd(cd, make_attr({}), engine());
      QSM_ASSERT(cpd.scratchpad_desc().get_size() == 0, "a chunked eltwise asks for a scratchpad");
      return dnnl::primitive(dnnl::eltwise_forward(cpd));
    });
  }
  int inplace_input() const override { return 0; }
  std::optional<StreamNeed> stream_need(bool output, std::size_t slot) const override {
    if (slot != 0) return std::nullopt;
    return chunked_.chunks().need(sizeof(float), output);
  }
  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    if (!streamed(ctx)) return PrimitiveKernel::run(inputs, outputs, ctx);
    chunked_.run(inputs, outputs, ctx, {DNNL_ARG_SRC});
  }

 private:
  ChunkedPrimitives chunked_;
};

class BinaryKernel final : public PrimitiveKernel {
 public:
  BinaryKernel(const memory::desc& md, dnnl::algorithm alg) {
    dnnl::binary::desc d(alg, md, md, md);
    dnnl::binary::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::binary(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_ = {{DNNL_ARG_SRC_0, md}, {DNNL_ARG_SRC_1, md}};
    out_binds_ = {{DNNL_ARG_DST, md}};
    if (alg == dnnl::algorithm::binary_div) return;  // 0 / 0 in a padding lane is not zero
    chunked_.build(ElementChunks::of(physical_floats(md)), [&](const memory::desc& cmd) {
      dnnl::binary::desc cd(alg, cmd, cmd, cmd);
      dnnl::binary::primitive_desc cpd(cd, make_attr({}), engine());
      QSM_ASSERT(cpd.scratchpad_desc().get_size() == 0, "a chunked binary op asks for a scratchpad");
      return dnnl::primitive(dnnl::binary(cpd));
    });
  }
  int inplace_input() const override { return 0; }
  std::optional<StreamNeed> stream_need(bool output, std::size_t slot) const override {
    if (slot > (output ? 0u : 1u)) return std::nullopt;
    return chunked_.chunks().need(sizeof(float), output);
  }
  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    if (!streamed(ctx)) return PrimitiveKernel::run(inputs, outputs, ctx);
    chunked_.run(inputs, outputs, ctx, {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1});
  }

 private:
  ChunkedPrimitives chunked_;
};

bool scalar_const(const graph::TypedGraph& g, int v, float& out) {
  if (v < 0) return false;
  const auto& tv = value(g, v);
  if (!tv.is_const() || tv.constant->numel() != 1 || tv.dtype != DType::F32) return false;
  out = tv.constant->data<float>()[0];
  return true;
}

}  // namespace

std::unique_ptr<Kernel> make_eltwise(const graph::TypedGraph& g, const graph::TNode& n,
                                     const std::vector<Layout>& producer, LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.empty() || n.in[0] < 0) return nullptr;
  const std::string& op = n.node.op_type;
  using A = dnnl::algorithm;
  A alg;
  float alpha = 0.0f, beta = 0.0f;
  bool exact = false;  // the same bits per element in any chunk, and zero to zero (see above)
  if (op == "Relu")
    alg = A::eltwise_relu, exact = true;
  else if (op == "LeakyRelu") {
    alg = A::eltwise_relu;
    alpha = n.node.attrs.get_float("alpha", 0.01f);
    exact = true;
  } else if (op == "Elu") {
    alg = A::eltwise_elu;
    alpha = n.node.attrs.get_float("alpha", 1.0f);
  } else if (op == "Sigmoid")
    alg = A::eltwise_logistic;
  else if (op == "Tanh")
    alg = A::eltwise_tanh;
  else if (op == "Abs")
    alg = A::eltwise_abs, exact = true;
  else if (op == "Exp")
    alg = A::eltwise_exp;
  else if (op == "Sqrt")
    alg = A::eltwise_sqrt;
  else if (op == "Neg") {
    alg = A::eltwise_linear;
    alpha = -1.0f;
  } else if (op == "Clip") {
    alg = A::eltwise_clip;
    alpha = n.node.attrs.get_float("min", -3.402823e38f);
    beta = n.node.attrs.get_float("max", 3.402823e38f);
    if (n.in.size() > 1 && n.in[1] >= 0 && !scalar_const(g, n.in[1], alpha)) return nullptr;
    if (n.in.size() > 2 && n.in[2] >= 0 && !scalar_const(g, n.in[2], beta)) return nullptr;
    exact = alpha <= 0.0f && beta >= 0.0f;
  } else {
    return nullptr;
  }
  const auto& x = value(g, n.in[0]);
  if (x.shape.empty() || x.shape.size() > 6 || numel(x.shape) == 0) return nullptr;
  const memory::desc md = desc_of(producer[0], x.shape);
  dec.inputs.assign(n.in.size(), Layout{});
  dec.inputs[0] = producer[0];
  dec.outputs = {producer[0]};
  return std::make_unique<EltwiseKernel>(md, alg, alpha, beta, exact);
}

std::unique_ptr<Kernel> make_binary(const graph::TypedGraph& g, const graph::TNode& n,
                                    const std::vector<Layout>& producer, LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() != 2 || n.in[0] < 0 || n.in[1] < 0) return nullptr;
  const std::string& op = n.node.op_type;
  using A = dnnl::algorithm;
  A alg;
  if (op == "Add")
    alg = A::binary_add;
  else if (op == "Sub")
    alg = A::binary_sub;
  else if (op == "Mul")
    alg = A::binary_mul;
  else if (op == "Div")
    alg = A::binary_div;
  else if (op == "Max")
    alg = A::binary_max;
  else if (op == "Min")
    alg = A::binary_min;
  else
    return nullptr;
  const auto& a = value(g, n.in[0]);
  const auto& b = value(g, n.in[1]);
  if (a.shape != b.shape || a.is_const() || b.is_const() || a.shape.empty() || a.shape.size() > 6 ||
      numel(a.shape) == 0)
    return nullptr;
  // Both operands in the first operand's layout (the second is reordered if it differs).
  const memory::desc md = desc_of(producer[0], a.shape);
  dec.inputs = {producer[0], producer[0]};
  dec.outputs = {producer[0]};
  return std::make_unique<BinaryKernel>(md, alg);
}

}  // namespace qsmcore::kernels::onednn
