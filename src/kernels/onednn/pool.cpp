// MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool on oneDNN pooling_v2 (dilations).
// The source is read in its producer's layout (a blocked conv output stays blocked) and the
// destination takes the layout oneDNN picks for it (the same blocking), so conv -> pool -> conv
// needs no reorder. ceil_mode becomes extra right padding; variants whose semantics oneDNN
// cannot reproduce exactly (Indices output, include-pad averages over ceil overflow) decline.
#include <algorithm>

#include "graph/conv_geometry.h"
#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

struct PoolParams {
  dnnl::algorithm alg;
  memory::dims strides, kernel, dil, pl, pr;
};

class PoolKernel final : public PrimitiveKernel {
 public:
  PoolKernel(const memory::desc& src, const Shape& y_shape, const PoolParams& p, LayoutDecision& dec, std::size_t n_in) {
    memory::desc dst_any(to_dims(y_shape), memory::data_type::f32, memory::format_tag::any);
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, p.alg, src, dst_any, p.strides, p.kernel, p.dil,
                                     p.pl, p.pr);
    dnnl::pooling_v2_forward::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::pooling_v2_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_.assign(n_in, Bind{-1, {}});
    in_binds_[0] = {DNNL_ARG_SRC, src};
    out_binds_ = {{DNNL_ARG_DST, pd.dst_desc()}};
    dec.outputs = {to_layout(pd.dst_desc(), y_shape)};
  }
};

bool pool_supported(const graph::TypedGraph& g, const graph::TNode& n) {
  if (!all_f32(g, n) || n.in.empty() || n.in[0] < 0 || !n.post.empty()) return false;
  // MaxPool's Indices output (and with it storage_order) has no oneDNN counterpart.
  for (std::size_t i = 1; i < n.out.size(); ++i)
    if (n.out[i] >= 0) return false;
  const auto& x = value(g, n.in[0]);
  return x.shape.size() >= 3 && x.shape.size() <= 5 && numel(x.shape) > 0;
}

std::unique_ptr<Kernel> finish(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                               LayoutDecision& dec, const PoolParams& p) {
  const auto& x = value(g, n.in[0]);
  dec.inputs.assign(n.in.size(), Layout{});
  dec.inputs[0] = producer[0];
  return std::make_unique<PoolKernel>(desc_of(producer[0], x.shape), value(g, n.out[0]).shape, p, dec, n.in.size());
}

}  // namespace

std::unique_ptr<Kernel> make_pool(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                                  LayoutDecision& dec) {
  if (!pool_supported(g, n)) return nullptr;
  const auto& x = value(g, n.in[0]);
  const bool is_max = n.node.op_type == "MaxPool";
  const auto geo = graph::pool_geometry(n.node, x.shape);
  const bool include_pad = !is_max && n.node.attrs.get_int("count_include_pad", 0) != 0;
  PoolParams p;
  p.alg = is_max ? dnnl::algorithm::pooling_max
                 : include_pad ? dnnl::algorithm::pooling_avg_include_padding : dnnl::algorithm::pooling_avg_exclude_padding;
  for (std::size_t i = 0; i < geo.kernel.size(); ++i) {
    const std::int64_t eff = (geo.kernel[i] - 1) * geo.dilations[i] + 1;
    // oneDNN derives the output size by floor division: ceil_mode's extra window comes from
    // more right padding. Max ignores padding and exclude-pad averages do not count it, so only
    // include-pad averages would see the difference (ONNX counts only the explicit pads).
    const std::int64_t need = (geo.out_spatial[i] - 1) * geo.strides[i] + eff - x.shape[i + 2] - geo.pads_begin[i];
    const std::int64_t pr = std::max(need, geo.pads_end[i]);
    if (include_pad && pr != geo.pads_end[i]) return nullptr;
    p.strides.push_back(geo.strides[i]);
    p.kernel.push_back(geo.kernel[i]);
    p.dil.push_back(geo.dilations[i] - 1);
    p.pl.push_back(geo.pads_begin[i]);
    p.pr.push_back(pr);
  }
  return finish(g, n, producer, dec, p);
}

std::unique_ptr<Kernel> make_global_pool(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                                         LayoutDecision& dec) {
  if (!pool_supported(g, n)) return nullptr;
  const auto& x = value(g, n.in[0]);
  PoolParams p;
  p.alg = n.node.op_type == "GlobalMaxPool" ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  for (std::size_t i = 2; i < x.shape.size(); ++i) {
    p.strides.push_back(1);
    p.kernel.push_back(x.shape[i]);
    p.dil.push_back(0);
    p.pl.push_back(0);
    p.pr.push_back(0);
  }
  return finish(g, n, producer, dec, p);
}

}  // namespace qsmcore::kernels::onednn
