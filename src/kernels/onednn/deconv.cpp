// ConvTranspose on oneDNN. oneDNN 2.6 has no fast blocked implementation of the U-Net's
// upsampling deconvolution (kernel = stride, e.g. 2/2), and its generic one asks for a scratchpad
// of twice the output, so that case has its own path: with stride equal to the kernel, every
// output voxel receives exactly one tap, and output sub-lattice (a, b, c) is a 1x1 convolution
// of the input with W[:, :, a, b, c], run on oneDNN's fast jit kernel one sub-lattice at a time
// and scattered into the output's layout. Other shapes use deconvolution_forward. Both fuse
// activations and Sum.
#include <omp.h>

#include <cstring>

#include "graph/conv_geometry.h"
#include "kernels/onednn/common.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::onednn {
namespace {

using dt = memory::data_type;
using tag = memory::format_tag;

tag blocked_tag(std::size_t rank, int blk) {
  if (blk == 16) return rank == 3 ? tag::aBc16b : rank == 4 ? tag::aBcd16b : tag::aBcde16b;
  return rank == 3 ? tag::aBc8b : rank == 4 ? tag::aBcd8b : tag::aBcde8b;
}

/// The activation layout oneDNN's convolutions use on this CPU, asked once of a typical
/// 3x3x3 conv: the channel block (8 with AVX2 jit, 16 with AVX-512 jit), or -1 for
/// channels-last (brgconv on AVX-512). Our deconv output must match it or every deconv would
/// be followed by a reorder.
int native_block() {
  static const int blk = [] {
    try {
      const memory::dims x{1, 32, 8, 8, 8}, w{32, 32, 3, 3, 3}, one{1, 1, 1}, zero{0, 0, 0};
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        memory::desc(x, dt::f32, tag::any), memory::desc(w, dt::f32, tag::any),
                                        memory::desc(x, dt::f32, tag::any), one, zero, one, one);
      dnnl::convolution_forward::primitive_desc pd(d, engine());
      const memory::desc dst = pd.dst_desc();
      if (dst == memory::desc(x, dt::f32, tag::aBcde16b)) return 16;
      if (dst == memory::desc(x, dt::f32, tag::acdeb)) return -1;
    } catch (const dnnl::error&) {
    }
    return 8;
  }();
  return blk;
}

tag layout_tag(std::size_t rank, int blk) {
  if (blk < 0) return rank == 3 ? tag::acb : rank == 4 ? tag::acdb : tag::acdeb;
  return blocked_tag(rank, blk);
}

class DeconvKernel final : public ConvLikeKernel {
 public:
  DeconvKernel(const graph::TypedGraph& g, const graph::TNode& n, const graph::ConvGeometry& geo, LayoutDecision& dec) {
    const auto& x = value(g, n.in[0]);
    const auto& w = value(g, n.in[1]);
    const auto& y = value(g, n.out[0]);
    const std::size_t rank = x.shape.size();
    const std::int64_t groups = geo.group, c = x.shape[1], m = y.shape[1];
    // ONNX weights are [C, M/g, k...]: oneDNN's (o, i, k...) dims read in "io" order.
    memory::dims wdims;
    memory::desc w_plain;
    if (groups == 1) {
      wdims = {m, c};
      wdims.insert(wdims.end(), w.shape.begin() + 2, w.shape.end());
      w_plain = memory::desc(wdims, dt::f32, rank == 3 ? tag::bac : rank == 4 ? tag::bacd : tag::bacde);
    } else {
      wdims = {groups, m / groups, c / groups};
      wdims.insert(wdims.end(), w.shape.begin() + 2, w.shape.end());
      w_plain = memory::desc(wdims, dt::f32, rank == 3 ? tag::acbd : rank == 4 ? tag::acbde : tag::acbdef);
    }
    memory::desc src_any(to_dims(x.shape), dt::f32, tag::any);
    memory::desc dst_any(to_dims(y.shape), dt::f32, tag::any);
    memory::desc w_any(wdims, dt::f32, tag::any);
    const bool has_bias = n.in.size() > 2 && n.in[2] >= 0 && (n.post.empty() || n.post[0].sum_input != 2);
    memory::desc b_md({m}, dt::f32, tag::a);
    memory::dims strides, dil, pl, pr;
    for (std::size_t i = 0; i < rank - 2; ++i) {
      strides.push_back(geo.strides[i]);
      dil.push_back(geo.dilations[i] - 1);
      pl.push_back(geo.pads_begin[i]);
      pr.push_back(geo.pads_end[i]);
    }
    using D = dnnl::deconvolution_forward;
    const auto pk = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::deconvolution_direct;
    auto desc = has_bias ? D::desc(pk, alg, src_any, w_any, b_md, dst_any, strides, dil, pl, pr)
                         : D::desc(pk, alg, src_any, w_any, dst_any, strides, dil, pl, pr);
    D::primitive_desc pd(desc, make_attr(n.post), engine());
    set_primitive(D(pd), pd.scratchpad_desc(), pd.impl_info_str());
    bind_constant(DNNL_ARG_WEIGHTS, *w.constant, w_plain, pd.weights_desc());
    if (has_bias) bind_constant(DNNL_ARG_BIAS, *value(g, n.in[2]).constant, b_md, b_md);
    bind_src_dst(n, pd.src_desc(), pd.dst_desc(), x.shape, y.shape, dec);
  }
};

constexpr std::size_t kAlign = 64;
std::size_t align_up(std::size_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

/// Kernel = stride (no pads, dilation or groups): every output voxel receives exactly one tap, so
/// output sub-lattice s = (a, b, c) (a < stride_d, …) is a 1x1 conv of the input with
/// W[:, :, a, b, c]. One 1x1 conv primitive (Mp = M rounded up to the channel block B) runs per
/// sub-lattice into a scratch tensor T_s = [N, Mp, D, H, W] in the conv's native layout, and T_s
/// is scattered into its sub-lattice of Y. One sub-lattice at a time keeps the scratch at
/// |Y| / Π stride instead of |Y| (oneDNN's own deconvolution asks for 2 |Y| of scratch for
/// xQSM's 4x4x4/4 upsampling), for the price of reading the (smaller) input Π stride times.
/// A fused Sum gathers the addend's sub-lattice (already in Y) into T_s first, so the 1x1 conv
/// accumulates onto it and the post-op chain applies in order.
class DeconvKeqSKernel final : public PrimitiveKernel {
 public:
  DeconvKeqSKernel(const graph::TypedGraph& g, const graph::TNode& n, const graph::ConvGeometry& geo,
                   LayoutDecision& dec) {
    const auto& x = value(g, n.in[0]);
    const auto& w = value(g, n.in[1]);
    const auto& y = value(g, n.out[0]);
    const std::size_t rank = x.shape.size();
    const std::size_t sp = rank - 2;
    n_ = x.shape[0];
    c_ = x.shape[1];
    m_ = y.shape[1];
    blk_ = native_block();
    mp_ = blk_ > 0 ? (m_ + blk_ - 1) / blk_ * blk_ : m_;
    // Spatial dims padded on the left to 3 (d, h, w) with stride 1 and extent 1.
    for (std::size_t i = 0; i < sp; ++i) {
      stride_[3 - sp + i] = geo.strides[i];
      in_[3 - sp + i] = x.shape[2 + i];
    }
    subs_ = stride_[0] * stride_[1] * stride_[2];

    Shape t_shape = x.shape;
    t_shape[1] = mp_;
    t_md_ = memory::desc(to_dims(t_shape), dt::f32, layout_tag(rank, blk_));
    Shape tw_shape{mp_, c_};
    tw_shape.resize(rank, 1);
    memory::desc src_any(to_dims(x.shape), dt::f32, tag::any);
    memory::desc w_any(to_dims(tw_shape), dt::f32, tag::any);
    memory::desc b_md({mp_}, dt::f32, tag::a);
    const memory::dims ones(sp, 1), zeros(sp, 0);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_any,
                                      w_any, b_md, t_md_, ones, zeros, zeros, zeros);
    dnnl::convolution_forward::primitive_desc pd(d, make_attr(n.post), engine());
    set_primitive(dnnl::convolution_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());
    impl_ = "qsm:deconv_k=s+" + impl_;
    conv_scratch_ = scratch_bytes_;
    t_bytes_ = align_up(t_md_.get_size());
    scratch_bytes_ = t_bytes_ + conv_scratch_;

    // Per sub-lattice: 1x1 weights [Mp, C, 1...] and bias [Mp]; padding channels are zero.
    const float* wsrc = w.constant->data<float>();  // [C, M, kd, kh, kw]
    const float* bsrc = n.in.size() > 2 && n.in[2] >= 0 ? value(g, n.in[2]).constant->data<float>() : nullptr;
    std::vector<float> tw(static_cast<std::size_t>(mp_ * c_)), tb(static_cast<std::size_t>(mp_));
    for (std::int64_t s = 0; s < subs_; ++s) {
      std::fill(tw.begin(), tw.end(), 0.0f);
      std::fill(tb.begin(), tb.end(), 0.0f);
      for (std::int64_t mi = 0; mi < m_; ++mi) {
        for (std::int64_t ci = 0; ci < c_; ++ci)
          tw[static_cast<std::size_t>(mi * c_ + ci)] = wsrc[(ci * m_ + mi) * subs_ + s];
        tb[static_cast<std::size_t>(mi)] = bsrc ? bsrc[mi] : 0.0f;
      }
      weights_.push_back(pack(Tensor::view(DType::F32, tw_shape, tw.data()), plain_desc(tw_shape), pd.weights_desc()));
      biases_.push_back(pack(Tensor::view(DType::F32, {mp_}, tb.data()), b_md, b_md));
    }
    src_md_ = pd.src_desc();
    in_binds_.assign(n.in.size(), Bind{-1, {}});  // weights and bias were packed above
    in_binds_[0] = {DNNL_ARG_SRC, src_md_};
    dec.inputs.assign(n.in.size(), Layout{});
    dec.inputs[0] = to_layout(src_md_, x.shape);
    const memory::desc y_md(to_dims(y.shape), dt::f32, layout_tag(rank, blk_));
    dec.outputs = {to_layout(y_md, y.shape)};
    for (const auto& p : n.post) {
      if (p.kind != PostOp::Kind::Sum) continue;
      sum_input_ = p.sum_input;
      dec.inputs[static_cast<std::size_t>(p.sum_input)] = dec.outputs[0];
      y_bytes_ = y_md.get_size();
    }
  }

  int inplace_input() const override { return sum_input_; }
  bool reads_input(std::size_t i) const override {
    return i == 0 || (sum_input_ >= 0 && i == static_cast<std::size_t>(sum_input_));
  }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    QSM_ASSERT(ctx.scratch_bytes >= scratch_bytes_, "scratch block smaller than a kernel's scratchpad");
    float* t = reinterpret_cast<float*>(ctx.scratch);
    float* y = outputs[0].data<float>();
    if (sum_input_ >= 0) {
      const Tensor& addend = inputs[static_cast<std::size_t>(sum_input_)];
      if (addend.raw() != outputs[0].raw()) std::memcpy(outputs[0].raw(), addend.raw(), y_bytes_);
    }
    for (std::int64_t s = 0; s < subs_; ++s) {
      const std::int64_t a = s / (stride_[1] * stride_[2]), b = (s / stride_[2]) % stride_[1], c = s % stride_[2];
      if (sum_input_ >= 0) transfer(t, y, a, b, c, /*to_y=*/false);
      std::unordered_map<int, memory> args;
      args.emplace(DNNL_ARG_SRC, memory(src_md_, engine(), inputs[0].raw()));
      args.emplace(DNNL_ARG_DST, memory(t_md_, engine(), t));
      args.emplace(DNNL_ARG_WEIGHTS, weights_[static_cast<std::size_t>(s)]);
      args.emplace(DNNL_ARG_BIAS, biases_[static_cast<std::size_t>(s)]);
      if (conv_scratch_ > 0) {
        memory::desc smd({static_cast<memory::dim>(conv_scratch_)}, dt::u8, tag::a);
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, engine(), ctx.scratch + t_bytes_));
      }
      prim_.execute(stream(), args);
      stream().wait();
      transfer(t, y, a, b, c, /*to_y=*/true);
    }
  }

 private:
  memory pack(const Tensor& plain, const memory::desc& plain_md, const memory::desc& md) {
    return pack_constant(plain, plain_md, md, packed_, packed_bytes_);
  }

  void transfer(float* t, float* y, std::int64_t a, std::int64_t b, std::int64_t c, bool to_y) const {
    if (blk_ < 0)
      transfer_nxc(t, y, a, b, c, to_y);
    else if (blk_ == 16)
      transfer_blk<16>(t, y, a, b, c, to_y);
    else
      transfer_blk<8>(t, y, a, b, c, to_y);
  }

  // Y[n][mb][sd·d+a][sh·h+b][sw·w+c][j] <-> T[n][mb][d][h][w][j] (B-channel blocks).
  template <int B>
  void transfer_blk(float* t, float* y, std::int64_t a, std::int64_t b, std::int64_t c, bool to_y) const {
    const std::int64_t mb_count = mp_ / B;
    const std::int64_t ow = in_[2] * stride_[2], oh = in_[1] * stride_[1], od = in_[0] * stride_[0];
    const std::int64_t rows = n_ * mb_count * in_[0] * in_[1];
    const int real_last = static_cast<int>(m_ - (mb_count - 1) * B);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t h = r % in_[1], d = (r / in_[1]) % in_[0], nmb = r / (in_[1] * in_[0]);
      float* trow = t + r * in_[2] * B;  // T rows are [n, mb, d, h] in this order too
      float* yrow = y + ((nmb * od + d * stride_[0] + a) * oh + h * stride_[1] + b) * ow * B + c * B;
      const bool pad_block = nmb % mb_count == mb_count - 1 && real_last < B;
      for (std::int64_t wi = 0; wi < in_[2]; ++wi) {
        float* yv = yrow + wi * stride_[2] * B;
        float* tv = trow + wi * B;
        if (!to_y) {
          for (int j = 0; j < B; ++j) tv[j] = yv[j];
          continue;
        }
        for (int j = 0; j < B; ++j) yv[j] = tv[j];
        // Padding lanes got act(0) from the conv (e.g. sigmoid's 0.5): the layout wants zeros.
        if (pad_block)
          for (int j = real_last; j < B; ++j) yv[j] = 0.0f;
      }
    }
  }

  // Y[n][sd·d+a][sh·h+b][sw·w+c][:M] <-> T[n][d][h][w][:M] (channels-last).
  void transfer_nxc(float* t, float* y, std::int64_t a, std::int64_t b, std::int64_t c, bool to_y) const {
    const std::int64_t ow = in_[2] * stride_[2], oh = in_[1] * stride_[1], od = in_[0] * stride_[0];
    const std::size_t px = static_cast<std::size_t>(m_) * sizeof(float);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < n_ * in_[0] * in_[1]; ++r) {
      const std::int64_t h = r % in_[1], d = (r / in_[1]) % in_[0], bn = r / (in_[1] * in_[0]);
      float* trow = t + r * in_[2] * m_;
      float* yrow = y + ((bn * od + d * stride_[0] + a) * oh + h * stride_[1] + b) * ow * m_ + c * m_;
      for (std::int64_t wi = 0; wi < in_[2]; ++wi) {
        float* yv = yrow + wi * stride_[2] * m_;
        float* tv = trow + wi * m_;
        std::memcpy(to_y ? yv : tv, to_y ? tv : yv, px);
      }
    }
  }

  memory::desc src_md_, t_md_;
  std::vector<memory> weights_, biases_;
  std::size_t t_bytes_ = 0, conv_scratch_ = 0, y_bytes_ = 0;
  int blk_ = 8;
  int sum_input_ = -1;
  std::int64_t n_ = 0, c_ = 0, m_ = 0, mp_ = 0, subs_ = 1;
  std::int64_t stride_[3] = {1, 1, 1}, in_[3] = {1, 1, 1};
};

// Kernel equal to stride in every dim, no pads/dilation/groups, output exactly stride × input.
bool kernel_is_stride(const graph::ConvGeometry& geo, const Shape& x, const Shape& y) {
  if (geo.group != 1) return false;
  for (std::size_t i = 0; i < geo.kernel.size(); ++i) {
    if (geo.kernel[i] != geo.strides[i] || geo.dilations[i] != 1 || geo.pads_begin[i] != 0 || geo.pads_end[i] != 0)
      return false;
    if (y[i + 2] != geo.strides[i] * x[i + 2]) return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<Kernel> make_deconv(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>&,
                                    LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() < 2 || n.in[0] < 0 || n.in[1] < 0 || !value(g, n.in[1]).is_const()) return nullptr;
  // Input 2 is the bias (constant) unless it is absent; a Sum addend sits at index >= 3.
  if (n.in.size() > 2 && n.in[2] >= 0 && !value(g, n.in[2]).is_const()) return nullptr;
  const auto& x = value(g, n.in[0]);
  const auto& y = value(g, n.out[0]);
  const auto rank = x.shape.size();
  if (rank < 3 || rank > 5 || numel(x.shape) == 0 || numel(y.shape) == 0) return nullptr;
  const auto geo = graph::conv_transpose_geometry(n.node, x.shape, value(g, n.in[1]).shape);
  if (kernel_is_stride(geo, x.shape, y.shape)) return std::make_unique<DeconvKeqSKernel>(g, n, geo, dec);
  return std::make_unique<DeconvKernel>(g, n, geo, dec);
}

}  // namespace qsmcore::kernels::onednn
