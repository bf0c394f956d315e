// Conv on oneDNN: src/dst/weights in the layouts the implementation prefers (format `any`),
// weights packed once at plan time, activations and residual adds fused as post-ops.
#include <cstring>

#include "graph/conv_geometry.h"
#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

class ConvKernel final : public ConvLikeKernel {
 public:
  ConvKernel(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer, LayoutDecision& dec) {
    const auto& x = value(g, n.in[0]);
    const auto& w = value(g, n.in[1]);
    const auto& y = value(g, n.out[0]);
    const auto geo = graph::conv_geometry(n.node, x.shape, w.shape);
    const int spatial = static_cast<int>(x.shape.size()) - 2;
    const std::int64_t groups = geo.group;

    Shape wshape = w.shape;  // [M, C/g, k...]
    memory::dims wdims;
    if (groups > 1) {
      wdims.push_back(groups);
      wdims.push_back(wshape[0] / groups);
      for (std::size_t i = 1; i < wshape.size(); ++i) wdims.push_back(wshape[i]);
    } else {
      wdims = to_dims(wshape);
    }
    using dt = memory::data_type;
    using tag = memory::format_tag;
    memory::desc src_any(to_dims(x.shape), dt::f32, tag::any);
    memory::desc dst_any(to_dims(y.shape), dt::f32, tag::any);
    memory::desc w_any(wdims, dt::f32, tag::any);
    const bool has_bias = n.in.size() > 2 && n.in[2] >= 0 && (n.post.empty() || n.post[0].sum_input != 2);
    memory::desc b_md({wshape[0]}, dt::f32, tag::a);
    memory::dims strides, dil, pl, pr;
    for (int i = 0; i < spatial; ++i) {
      strides.push_back(geo.strides[static_cast<std::size_t>(i)]);
      dil.push_back(geo.dilations[static_cast<std::size_t>(i)] - 1);
      pl.push_back(geo.pads_begin[static_cast<std::size_t>(i)]);
      pr.push_back(geo.pads_end[static_cast<std::size_t>(i)]);
    }
    auto desc = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                           dnnl::algorithm::convolution_direct, src_any, w_any,
                                                           b_md, dst_any, strides, dil, pl, pr)
                         : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                           dnnl::algorithm::convolution_direct, src_any, w_any,
                                                           dst_any, strides, dil, pl, pr);
    dnnl::convolution_forward::primitive_desc pd(desc, make_attr(n.post), engine());
    set_primitive(dnnl::convolution_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());

    // Weights: plain oi<spatial> (or goi<spatial>) -> packed.
    memory::desc w_plain = groups > 1 ? memory::desc(wdims, dt::f32, spatial == 1 ? tag::goiw : spatial == 2 ? tag::goihw : tag::goidhw)
                                      : plain_desc(wshape);
    bind_constant(DNNL_ARG_WEIGHTS, *w.constant, w_plain, pd.weights_desc());
    if (has_bias) {
      const auto& b = value(g, n.in[2]);
      bind_constant(DNNL_ARG_BIAS, *b.constant, b_md, b_md);
    }
    (void)producer;
    bind_src_dst(n, pd.src_desc(), pd.dst_desc(), x.shape, y.shape, dec);
  }
};

}  // namespace

std::unique_ptr<Kernel> make_conv(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                                  LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() < 2 || !value(g, n.in[1]).is_const()) return nullptr;
  if (n.in.size() > 2 && n.in[2] >= 0 && !value(g, n.in[2]).is_const()) {
    // Bias slot holding a computed value can only be a Sum addend appended at index >= 3.
    return nullptr;
  }
  const auto rank = value(g, n.in[0]).shape.size();
  if (rank < 3 || rank > 5) return nullptr;
  return std::make_unique<ConvKernel>(g, n, producer, dec);
}

}  // namespace qsmcore::kernels::onednn
