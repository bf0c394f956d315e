// Resize on oneDNN resampling, in the producer's layout. oneDNN's linear uses
// half-pixel coordinates with the in/out size ratio, and its nearest rounds the half-pixel
// coordinate; they match ONNX exactly only in these cases, everything else declines:
//  - linear: half_pixel (or pytorch_half_pixel with every output extent > 1) when out = in * scale
//    exactly, so that the size ratio is the ONNX scale;
//  - nearest: integer upscale factors with asymmetric+floor or half_pixel+round_prefer_* (for an
//    integer factor those all pick floor(o / k), and no half-pixel coordinate is a tie).
#include <cmath>

#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

class ResampleKernel final : public PrimitiveKernel {
 public:
  ResampleKernel(const memory::desc& src, const Shape& y_shape, dnnl::algorithm alg, LayoutDecision& dec, std::size_t n_in) {
    memory::desc dst_any(to_dims(y_shape), memory::data_type::f32, memory::format_tag::any);
    dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, alg, src, dst_any);
    dnnl::resampling_forward::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::resampling_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_.assign(n_in, Bind{-1, {}});
    in_binds_[0] = {DNNL_ARG_SRC, src};
    out_binds_ = {{DNNL_ARG_DST, pd.dst_desc()}};
    dec.outputs = {to_layout(pd.dst_desc(), y_shape)};
  }
};

/// The constant float vector at input i, or empty.
std::vector<float> const_floats(const graph::TypedGraph& g, const graph::TNode& n, std::size_t i) {
  if (i >= n.in.size() || n.in[i] < 0) return {};
  const auto& v = value(g, n.in[i]);
  if (!v.is_const() || v.dtype != DType::F32) return {};
  const float* p = v.constant->data<float>();
  return std::vector<float>(p, p + v.constant->numel());
}

}  // namespace

std::unique_ptr<Kernel> make_resize(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                                    LayoutDecision& dec) {
  if (n.in.empty() || n.in[0] < 0 || !n.post.empty() || n.out.size() != 1) return nullptr;
  const auto& x = value(g, n.in[0]);
  const auto& y = value(g, n.out[0]);
  if (x.dtype != DType::F32 || y.dtype != DType::F32) return nullptr;
  const std::size_t rank = x.shape.size();
  if (rank < 3 || rank > 5 || numel(x.shape) == 0 || y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1]) return nullptr;
  const auto& a = n.node.attrs;
  const bool upsample = n.node.op_type == "Upsample";
  const bool legacy = upsample || n.in.size() <= 2;  // Upsample and Resize-10: asymmetric
  std::string mode = a.get_string("mode", "nearest");
  if (mode == "bilinear" || mode == "trilinear") mode = "linear";
  const std::string coord = legacy ? "asymmetric" : a.get_string("coordinate_transformation_mode", "half_pixel");
  const std::string nearest = legacy ? "simple" : a.get_string("nearest_mode", "round_prefer_floor");
  if (a.get_int("antialias", 0) != 0) return nullptr;
  // Scales as given (Resize-10 / Upsample: input 1 or attribute; Resize-11+: input 2).
  std::vector<float> scales = upsample && n.in.size() < 2 ? a.get_floats("scales") : const_floats(g, n, legacy ? 1 : 2);
  if (!scales.empty() && scales.size() != rank) return nullptr;
  dnnl::algorithm alg;
  if (mode == "linear") {
    bool ok = coord == "half_pixel";
    if (coord == "pytorch_half_pixel") {
      ok = true;
      for (std::size_t i = 2; i < rank; ++i) ok = ok && y.shape[i] > 1;
    }
    if (!ok) return nullptr;
    for (std::size_t i = 2; i < rank && !scales.empty(); ++i)
      if (static_cast<double>(x.shape[i]) * scales[i] != static_cast<double>(y.shape[i])) return nullptr;
    alg = dnnl::algorithm::resampling_linear;
  } else if (mode == "nearest") {
    const bool asym_floor = coord == "asymmetric" && nearest == "floor";
    const bool half_round = coord == "half_pixel" && (nearest == "round_prefer_floor" || nearest == "round_prefer_ceil");
    if (!asym_floor && !half_round) return nullptr;
    for (std::size_t i = 2; i < rank; ++i) {
      if (y.shape[i] % x.shape[i] != 0) return nullptr;
      if (!scales.empty() && static_cast<double>(scales[i]) != static_cast<double>(y.shape[i] / x.shape[i])) return nullptr;
    }
    alg = dnnl::algorithm::resampling_nearest;
  } else {
    return nullptr;
  }
  dec.inputs.assign(n.in.size(), Layout{});
  dec.inputs[0] = producer[0];
  return std::make_unique<ResampleKernel>(desc_of(producer[0], x.shape), y.shape, alg, dec, n.in.size());
}

}  // namespace qsmcore::kernels::onednn
