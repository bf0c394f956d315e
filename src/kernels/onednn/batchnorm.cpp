// BatchNormalization (inference) on oneDNN, for the BNs the fold pass could not merge into a
// conv (e.g. BN after a pool or a concat). It runs in the producer's layout, in place when the
// input dies here. The per-channel vectors are bound as ordinary (plain) inputs so computed
// statistics work too.
#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

class BatchNormKernel final : public PrimitiveKernel {
 public:
  BatchNormKernel(const memory::desc& md, std::int64_t channels, float eps) {
    using F = dnnl::normalization_flags;
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md, eps,
                                              F::use_global_stats | F::use_scale | F::use_shift);
    dnnl::batch_normalization_forward::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::batch_normalization_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());
    const memory::desc vec({channels}, memory::data_type::f32, memory::format_tag::a);
    // ONNX input order: X, scale, B, mean, var.
    in_binds_ = {{DNNL_ARG_SRC, md}, {DNNL_ARG_SCALE, vec}, {DNNL_ARG_SHIFT, vec}, {DNNL_ARG_MEAN, vec}, {DNNL_ARG_VARIANCE, vec}};
    out_binds_ = {{DNNL_ARG_DST, md}};
  }
  int inplace_input() const override { return 0; }
};

}  // namespace

std::unique_ptr<Kernel> make_batchnorm(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                                       LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() != 5 || !n.post.empty()) return nullptr;
  for (int v : n.in)
    if (v < 0) return nullptr;
  // Training mode and the optional running-statistics outputs stay on the reference path.
  if (n.node.attrs.get_int("training_mode", 0) != 0) return nullptr;
  for (std::size_t i = 1; i < n.out.size(); ++i)
    if (n.out[i] >= 0) return nullptr;
  const auto& x = value(g, n.in[0]);
  if (x.shape.size() < 2 || x.shape.size() > 5 || numel(x.shape) == 0) return nullptr;
  const std::int64_t c = x.shape[1];
  for (std::size_t i = 1; i < 5; ++i)
    if (value(g, n.in[i]).shape != Shape{c}) return nullptr;
  dec.inputs.assign(n.in.size(), Layout{});
  dec.inputs[0] = producer[0];
  dec.outputs = {producer[0]};
  return std::make_unique<BatchNormKernel>(desc_of(producer[0], x.shape), c, n.node.attrs.get_float("epsilon", 1e-5f));
}

}  // namespace qsmcore::kernels::onednn
