// Conv on oneDNN: src/dst/weights in the layouts the implementation prefers (format `any`),
// weights packed once at plan time, activations and residual adds fused as post-ops.
//
// A strided channels-last batch-1 3-D conv (stride-1 ones are conv chains), e.g. NeXtQSM's 3³/2
// down-samplings, runs in depth slabs, so that under a budget (issue #16) it
// can read its input and write its output a slab at a time through the spill file: output planes
// z0 … z1 − 1 read input planes s·z0 − pb … s·(z1 − 1) − pb + k − 1 alone, contiguous in
// channels-last. The slab's conv has the whole volume's pads at the faces and reads real planes
// inside. Always in slabs, budget or not, so a budgeted run makes the same calls.
//
// A 3×3×3 stride-1 conv (pad 1, groups 1) on channels-last activations runs on the native
// Winograd F(2³, 3³) (kernels/winograd/) where choice.h predicts it faster (issue #50): same
// layouts, the same fused post-ops, its transformed weights and per-thread scratch reported to
// the plan like a primitive's.
//
// Under conv_precision() Bf16 (ModelOptions::precision, opt-in) every conv runs oneDNN's direct
// convolution on bf16 source and weights with an f32 destination: Winograd stays f32 (its
// transforms would add their own rounding on top of bf16's), so it is never chosen then. The
// weights are packed as bf16 (half the bytes; a different layout, so never shared with an f32
// plan's through the pack cache), and the f32 input is rounded to bf16 into the step's scratch
// before each call (per slab on the depth-slab path): the plan's values all stay f32.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "core/parallel.h"
#include "graph/conv_geometry.h"
#include "graph/passes/passes.h"
#include "kernels/onednn/common.h"
#include "kernels/slab_reader.h"
#include "kernels/winograd/choice.h"
#include "kernels/winograd/conv3d_winograd.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::onednn {
namespace {

class ConvKernel final : public ConvLikeKernel {
 public:
  ConvKernel(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
             LayoutDecision& dec) {
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
    const dt ct = conv_compute_type();  // source and weights: f32, or bf16
    memory::desc src_any(to_dims(x.shape), ct, tag::any);
    memory::desc dst_any(to_dims(y.shape), dt::f32, tag::any);
    memory::desc w_any(wdims, ct, tag::any);
    const bool has_bias = n.in.size() > 2 && n.in[2] >= 0 && (n.post.empty() || n.post[0].sum_input != 2);
    memory::desc b_md({wshape[0]}, dt::f32, tag::a);
    memory::dims strides, dil, pl, pr;
    for (int i = 0; i < spatial; ++i) {
      strides.push_back(geo.strides[static_cast<std::size_t>(i)]);
      dil.push_back(geo.dilations[static_cast<std::size_t>(i)] - 1);
      pl.push_back(geo.pads_begin[static_cast<std::size_t>(i)]);
      pr.push_back(geo.pads_end[static_cast<std::size_t>(i)]);
    }
    const auto make_desc = [&](const memory::desc& src, const memory::desc& dst) {
      const auto pk = dnnl::prop_kind::forward_inference;
      const auto alg = dnnl::algorithm::convolution_direct;
      return has_bias ? dnnl::convolution_forward::desc(pk, alg, src, w_any, b_md, dst, strides, dil, pl, pr)
                      : dnnl::convolution_forward::desc(pk, alg, src, w_any, dst, strides, dil, pl, pr);
    };
    auto desc = make_desc(src_any, dst_any);
    dnnl::convolution_forward::primitive_desc pd(desc, make_attr(n.post), engine());
    // Where oneDNN would pick a blocked layout but the activations are channels-last (AVX2), ask
    // for channels-last, unless only a reference implementation runs it so.
    if (channels_last_asked() && spatial >= 1) {
      const tag nxc = spatial == 1 ? tag::acb : spatial == 2 ? tag::acdb : tag::acdeb;
      auto cl = make_desc(memory::desc(to_dims(x.shape), ct, nxc), memory::desc(to_dims(y.shape), dt::f32, nxc));
      dnnl::convolution_forward::primitive_desc cpd(cl, make_attr(n.post), engine());
      if (std::string(cpd.impl_info_str()).rfind("ref", 0) != 0) {
        desc = cl;
        pd = cpd;
      }
    }
    // bf16 only where a jit kernel runs it: the backend then makes this conv again in f32.
    if (ct == dt::bf16 && std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
      throw dnnl::error(dnnl_unimplemented, "no jit bf16 convolution for this shape");
    set_primitive(dnnl::convolution_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());

    // Weights: plain oi<spatial> (or goi<spatial>) -> packed.
    memory::desc w_plain = groups > 1 ? memory::desc(wdims, dt::f32,
                                                     spatial == 1   ? tag::goiw
                                                     : spatial == 2 ? tag::goihw
                                                                    : tag::goidhw)
                                      : plain_desc(wshape);
    bind_constant(DNNL_ARG_WEIGHTS, *w.constant, w_plain, pd.weights_desc());
    if (has_bias) {
      const auto& b = value(g, n.in[2]);
      bind_constant(DNNL_ARG_BIAS, *b.constant, b_md, b_md);
    }
    (void)producer;
    bf16_ = ct == dt::bf16;
    const memory::desc src_f32 = retyped(pd.src_desc(), dt::f32);  // the plan's input stays f32
    bind_src_dst(n, src_f32, pd.dst_desc(), x.shape, y.shape, dec);
    if (bf16_) stage_src_as_bf16(pd.src_desc());
    Geometry geom{desc,          w_plain,        pd.weights_desc(), *w.constant,     has_bias,
                  geo.kernel[0], geo.strides[0], geo.pads_begin[0], geo.dilations[0]};
    if (spatial == 3 && groups == 1) prepare_depth_slabs(n, pd, geom);
  }

  std::optional<StreamNeed> stream_need(bool output, std::size_t slot) const override {
    if (slab_ == 0 || slot != 0) return std::nullopt;
    const std::size_t planes = static_cast<std::size_t>(output ? slab_ : (slab_ - 1) * stride_ + kernel_);
    return StreamNeed{align64(planes * (output ? out_plane_ : in_plane_)), output ? 0u : 1u};
  }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    if (slab_ == 0) return PrimitiveKernel::run(inputs, outputs, ctx);
    run_slabs(inputs, outputs, ctx);
  }

 private:
  struct Geometry {
    dnnl::convolution_forward::desc desc;
    memory::desc w_plain, w_packed;
    const Tensor& weights;
    bool has_bias;
    std::int64_t kernel, stride, pad_begin, dilation;  // in depth
  };
  struct Variant {
    memory::desc src_md, dst_md;
    memory weights;
    dnnl::convolution_forward prim;
  };
  static std::size_t align64(std::size_t b) { return (b + 63) / 64 * 64; }

  // Output planes z0 … z0 + n − 1 read input planes s·z0 − pb … s·(z0 + n − 1) − pb + k − 1.
  DepthSlabCall slab_call(std::int64_t z0) const {
    const std::int64_t n = std::min(slab_, out_d_ - z0);
    return depth_slab_call(n, z0 * stride_ - pad_begin_, (z0 + n - 1) * stride_ - pad_begin_ + kernel_ - 1, in_d_);
  }

  void prepare_depth_slabs(const graph::TNode& n, const dnnl::convolution_forward::primitive_desc& pd,
                           const Geometry& g) {
    using tag = memory::format_tag;
    const memory::dims x = pd.src_desc().dims(), y = pd.dst_desc().dims();
    // Stride 1 is the conv chains' (graph/passes/stream_conv_chains.cpp; off, nothing streams).
    // Taps shorter than the stride skip planes, which a streamed read would still count.
    if (x.size() != 5 || x[0] != 1 || g.dilation != 1 || g.stride < 2 || g.kernel < g.stride) return;
    if (!(retyped(pd.src_desc(), memory::data_type::f32) == memory::desc(x, memory::data_type::f32, tag::ndhwc)) ||
        !(pd.dst_desc() == memory::desc(y, memory::data_type::f32, tag::ndhwc)))
      return;
    for (const auto& p : n.post)
      if (p.kind == PostOp::Kind::Sum) return;  // an addend would have to stream as well
    const std::int64_t finer = n.node.attrs.get_int("qsm_depth_slabs", graph::kDepthSlabs);
    const std::int64_t slabs = finer > graph::kDepthSlabs && y[2] >= 2 * finer ? finer : graph::kDepthSlabs;
    if (y[2] < 2 * slabs) return;
    in_d_ = x[2];
    out_d_ = y[2];
    kernel_ = g.kernel;
    stride_ = g.stride;
    pad_begin_ = g.pad_begin;
    in_plane_ = static_cast<std::size_t>(x[1] * x[3] * x[4]) * sizeof(float);
    out_plane_ = static_cast<std::size_t>(y[1] * y[3] * y[4]) * sizeof(float);
    slab_ = (out_d_ + slabs - 1) / slabs;
    const dnnl_convolution_desc_t& d = g.desc.data;
    std::size_t scratch = 0;
    for (std::int64_t z0 = 0; z0 < out_d_; z0 += slab_) {
      const DepthSlabCall c = slab_call(z0);
      if (variants_.count(c.key())) continue;
      memory::dims xs = x, ys = y, pl(d.padding[0], d.padding[0] + 3), pr(d.padding[1], d.padding[1] + 3);
      memory::dims strides(d.strides, d.strides + 3), dil(d.dilates, d.dilates + 3);
      xs[2] = c.src_planes;
      ys[2] = c.count;
      pl[0] = c.pad_l;
      pr[0] = c.pad_r;
      Variant v;
      v.src_md = memory::desc(xs, conv_compute_type(), tag::ndhwc);
      v.dst_md = memory::desc(ys, memory::data_type::f32, tag::ndhwc);
      const memory::desc w_any(memory::dims(d.weights_desc.dims, d.weights_desc.dims + 5), conv_compute_type(),
                               tag::any);
      const memory::desc b_md({y[1]}, memory::data_type::f32, tag::a);
      const auto pk = dnnl::prop_kind::forward_inference;
      const auto alg = dnnl::algorithm::convolution_direct;
      auto cd = g.has_bias
                    ? dnnl::convolution_forward::desc(pk, alg, v.src_md, w_any, b_md, v.dst_md, strides, dil, pl, pr)
                    : dnnl::convolution_forward::desc(pk, alg, v.src_md, w_any, v.dst_md, strides, dil, pl, pr);
      dnnl::convolution_forward::primitive_desc cpd(cd, make_attr(n.post), engine());
      scratch = std::max(scratch, cpd.scratchpad_desc().get_size());
      v.prim = dnnl::convolution_forward(cpd);
      v.weights = weights_in(cpd.weights_desc(), g);
      variants_.emplace(c.key(), std::move(v));
    }
    prim_scratch_bytes_ = scratch;
    scratch_bytes_ = scratch;
    if (bf16_) {  // a slab's source, rounded to bf16, after the scratchpad
      bf16_src_off_ = align64(scratch);
      scratch_bytes_ = bf16_src_off_ + static_cast<std::size_t>((slab_ - 1) * stride_ + kernel_) * in_plane_ / 2;
    }
    impl_ = "qsm:conv_depth_slabs+" + impl_;
  }

  // The weights in the layout a slab's primitive asks for: the whole volume's when the same.
  memory weights_in(const memory::desc& want, const Geometry& g) {
    for (const auto& [arg, mem] : const_args_)
      if (arg == DNNL_ARG_WEIGHTS && mem.get_desc() == want) return mem;
    for (const auto& [md, mem] : extra_weights_)
      if (md == want) return mem;
    memory mem = pack_constant(g.weights, g.w_plain, want, packed_, packed_bytes_);
    extra_weights_.emplace_back(want, mem);
    return mem;
  }

  void run_slabs(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) {
    QSM_ASSERT(ctx.scratch_bytes >= scratch_bytes_, "scratch block smaller than a kernel's scratchpad");
    const StreamedOperand* is = ctx.in_stream(0);
    const StreamedOperand* os = ctx.out_stream(0);
    std::optional<SlabReader> reader;
    if (is) reader.emplace(*is, in_plane_);
    for (std::int64_t z0 = 0; z0 < out_d_; z0 += slab_) {
      const DepthSlabCall c = slab_call(z0);
      const Variant& v = variants_.at(c.key());
      const std::size_t in_at = static_cast<std::size_t>(c.src_first) * in_plane_;
      const std::size_t out_at = static_cast<std::size_t>(z0) * out_plane_;
      void* src = reader ? static_cast<void*>(reader->stage(c.src_first, c.src_planes))
                         : static_cast<void*>(static_cast<std::byte*>(const_cast<void*>(inputs[0].raw())) + in_at);
      if (bf16_) {
        std::byte* staged = ctx.scratch + bf16_src_off_;
        round_to_bf16(static_cast<const float*>(src), staged,
                      static_cast<std::size_t>(c.src_planes) * in_plane_ / sizeof(float));
        src = staged;
      }
      void* dst =
          os ? static_cast<void*>(os->staging) : static_cast<void*>(static_cast<std::byte*>(outputs[0].raw()) + out_at);
      std::unordered_map<int, memory> args;
      args.emplace(DNNL_ARG_SRC, memory(v.src_md, engine(), src));
      args.emplace(DNNL_ARG_DST, memory(v.dst_md, engine(), dst));
      for (const auto& [arg, mem] : const_args_)
        if (arg != DNNL_ARG_WEIGHTS) args.emplace(arg, mem);
      args.emplace(DNNL_ARG_WEIGHTS, v.weights);
      if (prim_scratch_bytes_ > 0) {
        memory::desc smd({static_cast<memory::dim>(prim_scratch_bytes_)}, memory::data_type::u8, memory::format_tag::a);
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, engine(), ctx.scratch));
      }
      v.prim.execute(stream(), args);
      stream().wait();
      if (os) os->write(dst, out_at, static_cast<std::size_t>(c.count) * out_plane_);
    }
  }

  bool bf16_ = false;      // source and weights in bf16 (conv_precision())
  std::int64_t slab_ = 0;  // output planes per slab; 0: the whole volume in one call
  std::int64_t in_d_ = 0, out_d_ = 0, kernel_ = 1, stride_ = 1, pad_begin_ = 0;
  std::size_t in_plane_ = 0, out_plane_ = 0;  // bytes per depth plane
  std::map<std::array<std::int64_t, 4>, Variant> variants_;
  std::vector<std::pair<memory::desc, memory>> extra_weights_;
};

/// The native Winograd F(2³, 3³) in place of oneDNN's primitive: channels-last source and
/// destination, a Sum addend copied into dst first (ConvLikeKernel::prepare) and added back by
/// the output transform, as oneDNN's sum post-op reads dst.
class WinogradConvKernel final : public ConvLikeKernel {
 public:
  WinogradConvKernel(const graph::TypedGraph& g, const graph::TNode& n, LayoutDecision& dec) {
    const auto& x = value(g, n.in[0]);
    const auto& w = value(g, n.in[1]);
    const auto& y = value(g, n.out[0]);
    const bool has_bias = n.in.size() > 2 && n.in[2] >= 0 && (n.post.empty() || n.post[0].sum_input != 2);
    const float* bias = has_bias ? value(g, n.in[2]).constant->data<float>() : nullptr;
    const winograd::Conv3dShape s{static_cast<int>(x.shape[0]), static_cast<int>(x.shape[1]),
                                  static_cast<int>(y.shape[1]), static_cast<int>(x.shape[2]),
                                  static_cast<int>(x.shape[3]), static_cast<int>(x.shape[4])};
    for (const auto& p : n.post) sum_ = sum_ || p.kind == PostOp::Kind::Sum;
    wg_ = std::make_unique<winograd::WinogradConv3d>(s, w.constant->data<float>(), bias, n.post);
    threads_ = max_threads();
    const auto ndhwc = [](const Shape& sh) {
      return memory::desc(to_dims(sh), memory::data_type::f32, memory::format_tag::ndhwc);
    };
    bind_src_dst(n, ndhwc(x.shape), ndhwc(y.shape), x.shape, y.shape, dec);
    scratch_bytes_ = wg_->scratch_bytes(threads_);
    packed_bytes_ = wg_->packed_bytes();
    impl_ = wg_->impl_name();
  }

  std::int64_t derived_bytes() const override { return wg_->derived_bytes(); }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    QSM_ASSERT(ctx.scratch_bytes >= scratch_bytes_, "scratch block smaller than a kernel's scratchpad");
    prepare(inputs, outputs);
    float* y = outputs[0].data<float>();
    wg_->run(inputs[0].data<float>(), sum_ ? y : nullptr, y, ctx.scratch, ctx.scratch_bytes,
             std::min(threads_, max_threads()));
  }

 private:
  std::unique_ptr<winograd::WinogradConv3d> wg_;
  bool sum_ = false;
  int threads_ = 1;
};

/// Whether node n (f32, constant weights and bias) is a conv Winograd computes, on activations
/// kept channels-last, and the choice (QSM_CONV_ALGO, else the measured table) takes it.
bool winograd_chosen(const graph::TypedGraph& g, const graph::TNode& n) {
  const auto& x = value(g, n.in[0]);
  const auto& w = value(g, n.in[1]);
  if (x.shape.size() != 5 || activation_block() >= 0 || !w.constant) return false;
  if (conv_precision() == ConvPrecision::Bf16) return false;  // bf16 runs direct (see the top)
  const auto geo = graph::conv_geometry(n.node, x.shape, w.shape);
  std::vector<std::int64_t> pads(geo.pads_begin.begin(), geo.pads_begin.end());
  pads.insert(pads.end(), geo.pads_end.begin(), geo.pads_end.end());
  if (!winograd::winograd_fits(geo.kernel, geo.strides, geo.dilations, pads, geo.group)) return false;
  const auto& y = value(g, n.out[0]);
  if (y.shape.size() != 5 || y.shape[2] != x.shape[2] || y.shape[3] != x.shape[3] || y.shape[4] != x.shape[4])
    return false;
  return winograd::choose_conv_algo(x.shape[1], y.shape[1]) == winograd::ConvAlgo::Winograd;
}

}  // namespace

std::unique_ptr<Kernel> make_conv(const graph::TypedGraph& g, const graph::TNode& n,
                                  const std::vector<Layout>& producer, LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() < 2 || !value(g, n.in[1]).is_const()) return nullptr;
  if (n.in.size() > 2 && n.in[2] >= 0 && !value(g, n.in[2]).is_const()) {
    // Bias slot holding a computed value can only be a Sum addend appended at index >= 3.
    return nullptr;
  }
  const auto rank = value(g, n.in[0]).shape.size();
  if (rank < 3 || rank > 5) return nullptr;
  if (winograd_chosen(g, n)) return std::make_unique<WinogradConvKernel>(g, n, dec);
  return std::make_unique<ConvKernel>(g, n, producer, dec);
}

}  // namespace qsmcore::kernels::onednn
