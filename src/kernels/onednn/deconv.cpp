// ConvTranspose on oneDNN. oneDNN 2.6 has no fast blocked implementation of the U-Net's
// upsampling deconvolution (kernel = stride, e.g. 2/2), and its generic one asks for a scratchpad
// of twice the output, so that case has its own path: with stride equal to the kernel, every
// output voxel receives exactly one tap, and output sub-lattice (a, b, c) is a 1x1 convolution
// of the input with W[:, :, a, b, c], run on oneDNN's fast jit kernel one sub-lattice at a time
// and scattered into the output's layout. Other shapes use deconvolution_forward. Both fuse
// activations and Sum.
#include <omp.h>

#include <array>
#include <cstring>
#include <map>
#include <optional>

#include "graph/conv_geometry.h"
#include "graph/passes/passes.h"
#include "kernels/onednn/common.h"
#include "kernels/slab_reader.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::onednn {
namespace {

using dt = memory::data_type;
using tag = memory::format_tag;

tag blocked_tag(std::size_t rank, int blk) {
  if (blk == 16) return rank == 3 ? tag::aBc16b : rank == 4 ? tag::aBcd16b : tag::aBcde16b;
  return rank == 3 ? tag::aBc8b : rank == 4 ? tag::aBcd8b : tag::aBcde8b;
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

/// Per spatial axis and output residue r (< stride): which taps reach output o = s·q + r and
/// how. From o + pad_begin = i·s + k: k ≡ r + pad_begin (mod s), so the taps are k0, k0 + s, …
/// (T of them) and i = q + c − t for tap k0 + s·t, c = (r + pad_begin − k0) / s. That is a
/// stride-1 correlation of the input with those taps reversed, left pad T − 1 − c, giving Q =
/// ⌈(O − r) / s⌉ outputs (right pad Q − I + c).
struct Residue {
  std::int64_t k0 = 0, taps = 1, pl = 0, pr = 0, q = 1;
};

bool residue_of(std::int64_t r, std::int64_t s, std::int64_t k, std::int64_t pb, std::int64_t in, std::int64_t out,
                Residue& res) {
  res.k0 = (r + pb) % s;
  if (res.k0 >= k) return false;  // an output residue no tap reaches (kernel < stride)
  res.taps = (k - res.k0 + s - 1) / s;
  const std::int64_t c = (r + pb - res.k0) / s;
  res.q = (out - r + s - 1) / s;
  res.pl = res.taps - 1 - c;
  res.pr = res.q - in + c;
  return res.pl >= 0 && res.pr >= 0 && res.q >= 1;
}

/// ConvTranspose as one stride-1 convolution per output sub-lattice (residues a, b, c < stride):
/// sub-lattice (a, b, c) of Y is the input correlated with the taps that reach it (see Residue)
/// — for kernel = stride a 1x1 conv with W[:, :, a, b, c], for NeXtQSM's 3³/2 adjoints 2³, 2²·1,
/// … sub-kernels. Each runs on oneDNN's fast convolution into a scratch tensor T = [N, Mp, Qa,
/// Qb, Qc] (Mp = M rounded up to the channel block) in the conv's native layout, scattered into
/// its sub-lattice of Y. One sub-lattice at a time keeps the scratch at about |Y| / Π stride;
/// oneDNN's own deconvolution asks for 2 |Y| (xQSM's 4x4x4/4 up-sampling, NeXtQSM's adjoints).
/// Every tap is used once, so the arithmetic is that of the deconvolution. A fused Sum gathers
/// the addend's sub-lattice (already in Y) into T first, so the conv accumulates onto it and the
/// post-op chain applies in order.
class DeconvSubLatticeKernel final : public PrimitiveKernel {
 public:
  DeconvSubLatticeKernel(const graph::TypedGraph& g, const graph::TNode& n, const graph::ConvGeometry& geo,
                         LayoutDecision& dec) {
    const auto& x = value(g, n.in[0]);
    const auto& w = value(g, n.in[1]);
    const auto& y = value(g, n.out[0]);
    const std::size_t rank = x.shape.size();
    const std::size_t sp = rank - 2;
    n_ = x.shape[0];
    c_ = x.shape[1];
    m_ = y.shape[1];
    blk_ = activation_block();
    // Spatial dims padded on the left to 3 (d, h, w) with stride 1, kernel 1 and extent 1.
    std::int64_t kern[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
    for (std::size_t i = 0; i < sp; ++i) {
      stride_[3 - sp + i] = geo.strides[i];
      in_[3 - sp + i] = x.shape[2 + i];
      out_[3 - sp + i] = y.shape[2 + i];
      kern[3 - sp + i] = geo.kernel[i];
      pb[3 - sp + i] = geo.pads_begin[i];
    }
    slab_ = depth_slab(n, sp, kern, pb);
    mp_ = blk_ > 0 ? (m_ + blk_ - 1) / blk_ * blk_ : m_;
    const std::int64_t subs = stride_[0] * stride_[1] * stride_[2];

    const float* bsrc = n.in.size() > 2 && n.in[2] >= 0 ? value(g, n.in[2]).constant->data<float>() : nullptr;
    std::vector<float> tb(static_cast<std::size_t>(mp_), 0.0f);
    for (std::int64_t mi = 0; mi < m_; ++mi) tb[static_cast<std::size_t>(mi)] = bsrc ? bsrc[mi] : 0.0f;
    const memory::desc b_md({mp_}, dt::f32, tag::a);
    bias_ = pack(Tensor::view(DType::F32, {mp_}, tb.data()), b_md, b_md);
    SubContext sc{n, to_dims(x.shape), rank, sp, kern, pb, w.constant->data<float>(), b_md};
    for (std::int64_t si = 0; si < subs; ++si) subs_list_.push_back(make_sub(si, sc));
    scratch_bytes_ = t_bytes_ + conv_scratch_;
    in_binds_.assign(n.in.size(), Bind{-1, {}});  // weights and bias were packed above
    in_binds_[0] = {DNNL_ARG_SRC, *src_md_};
    dec.inputs.assign(n.in.size(), Layout{});
    dec.inputs[0] = to_layout(*src_md_, x.shape);
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

  // Streamed (issue #16), in slabs only: the input's slab (with its halo) is read into a staging
  // block, a Sum addend's straight into the output slab it is added to, and the output's slab
  // is written from a staging block; the calls are those of the in-memory run.
  std::optional<StreamNeed> stream_need(bool output, std::size_t slot) const override {
    if (slab_ == 0) return std::nullopt;
    if (!output && sum_input_ >= 0 && slot == static_cast<std::size_t>(sum_input_)) return StreamNeed{0, 1};
    if (slot != 0) return std::nullopt;
    const std::size_t planes = static_cast<std::size_t>(output ? slab_ * stride_[0] : slab_ + halo_lo_ + halo_hi_);
    return StreamNeed{align_up(planes * (output ? out_plane() : in_plane()) * sizeof(float)), output ? 0u : 1u};
  }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    QSM_ASSERT(ctx.scratch_bytes >= scratch_bytes_, "scratch block smaller than a kernel's scratchpad");
    if (slab_ > 0) return run_slabs(inputs, outputs, ctx);
    float* t = reinterpret_cast<float*>(ctx.scratch);
    float* y = outputs[0].data<float>();
    if (sum_input_ >= 0) {
      const Tensor& addend = inputs[static_cast<std::size_t>(sum_input_)];
      if (addend.raw() != outputs[0].raw()) std::memcpy(outputs[0].raw(), addend.raw(), y_bytes_);
    }
    for (const Sub& sub : subs_list_) {
      if (sum_input_ >= 0) transfer(t, y, sub, /*to_y=*/false);
      std::unordered_map<int, memory> args;
      args.emplace(DNNL_ARG_SRC, memory(*src_md_, engine(), inputs[0].raw()));
      args.emplace(DNNL_ARG_DST, memory(sub.t_md, engine(), t));
      args.emplace(DNNL_ARG_WEIGHTS, sub.weights);
      args.emplace(DNNL_ARG_BIAS, bias_);
      if (conv_scratch_ > 0) {
        memory::desc smd({static_cast<memory::dim>(conv_scratch_)}, dt::u8, tag::a);
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, engine(), ctx.scratch + t_bytes_));
      }
      sub.prim.execute(stream(), args);
      stream().wait();
      transfer(t, y, sub, /*to_y=*/true);
    }
  }

 private:
  // A slab shape's primitive (the first, inner and last slabs may differ in planes and pads).
  struct Variant {
    memory::desc t_md, src_md;
    memory weights;
    dnnl::convolution_forward prim;
  };
  struct Sub {
    std::int64_t r[3] = {0, 0, 0}, q[3] = {1, 1, 1};  // output residues; sub-lattice extents
    Residue depth;                                    // its depth taps (slabs)
    memory::desc t_md;                                // whole volume
    memory weights;
    dnnl::convolution_forward prim;
    std::map<std::array<std::int64_t, 4>, Variant> variants;  // slabs, by DepthSlabCall::key
    std::vector<std::pair<memory::desc, memory>> packed;      // its weights, per layout asked for
  };

  // Depth taps of residue r reach input planes q − pl … q + (T − 1 − pl) of output plane s·q + r.
  // In slabs, a sub-lattice's planes q0 … q1 − 1 of the slab starting at q0 (none past its
  // extent) read input planes q0 − pl … q1 − 1 + (T − 1 − pl).
  DepthSlabCall slab_call(const Sub& sub, std::int64_t q0) const {
    const std::int64_t q1 = std::min(q0 + slab_, sub.depth.q);
    if (q1 <= q0) return {};
    return depth_slab_call(q1 - q0, q0 - sub.depth.pl, q1 - 1 + sub.depth.taps - 1 - sub.depth.pl, in_[0]);
  }
  // The input planes a slab reads (every sub-lattice's reach): [first, first + planes).
  std::pair<std::int64_t, std::int64_t> slab_input(std::int64_t q0) const {
    const std::int64_t first = std::max<std::int64_t>(0, q0 - halo_lo_);
    const std::int64_t end = std::min(in_[0], q0 + slab_ + halo_hi_);
    return {first, end - first};
  }

  // What building each sub-lattice's primitives needs of the node.
  struct SubContext {
    const graph::TNode& n;
    memory::dims x_dims;
    std::size_t rank, sp;
    const std::int64_t* kern;  // per padded axis (d, h, w)
    const std::int64_t* pb;
    const float* wsrc;  // [C, M, kd, kh, kw]
    const memory::desc& b_md;
  };

  // Sub-lattice si (residues a, b, c): its taps' weights, packed for each primitive it runs —
  // the whole volume's, or in slabs one per slab shape the run meets (see slab_call), all made
  // now so that nothing is created while running.
  Sub make_sub(std::int64_t si, const SubContext& sc) {
    const std::int64_t r[3] = {si / (stride_[1] * stride_[2]), (si / stride_[2]) % stride_[1], si % stride_[2]};
    Sub sub;
    Residue res[3];
    for (int i = 0; i < 3; ++i) {
      const bool ok = residue_of(r[i], stride_[i], sc.kern[i], sc.pb[i], in_[i], out_[i], res[i]);
      QSM_ASSERT(ok, "deconvolution sub-lattice outside the supported geometry");
      sub.r[i] = r[i];
      sub.q[i] = res[i].q;
    }
    sub.depth = res[3 - sc.sp];
    // The conv over spatial dims of the original rank (the padded leading ones dropped).
    memory::dims t_dims{n_, mp_}, w_dims{mp_, c_}, pl, pr;
    for (std::size_t i = 3 - sc.sp; i < 3; ++i) {
      t_dims.push_back(res[i].q);
      w_dims.push_back(res[i].taps);
      pl.push_back(res[i].pl);
      pr.push_back(res[i].pr);
    }
    const memory::dims ones(sc.sp, 1), zeros(sc.sp, 0);
    auto make_pd = [&](const memory::desc& src_md, const memory::desc& t_md, const memory::dims& l,
                       const memory::dims& rr) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md,
                                        memory::desc(w_dims, dt::f32, tag::any), sc.b_md, t_md, ones, zeros, l, rr);
      dnnl::convolution_forward::primitive_desc pd(d, make_attr(sc.n.post), engine());
      conv_scratch_ = std::max(conv_scratch_, pd.scratchpad_desc().get_size());
      return pd;
    };
    // W'[m, ci, t'] = W[ci, m, k0 + s·(T − 1 − t')] per axis, zero rows for the padding channels.
    const std::vector<float> wt = sub_weights(sc.wsrc, sc.kern, res);
    const Shape w_shape(w_dims.begin(), w_dims.end());
    auto weights_for = [&](const memory::desc& want) {
      for (const auto& [md, mem] : sub.packed)
        if (md == want) return mem;
      memory mem = pack(Tensor::view(DType::F32, w_shape, const_cast<float*>(wt.data())), plain_desc(w_shape), want);
      sub.packed.emplace_back(want, mem);
      return mem;
    };
    const tag lt = layout_tag(sc.rank, blk_);
    if (slab_ > 0) {
      for (std::int64_t q0 = 0; q0 < q_max_; q0 += slab_) {
        const DepthSlabCall call = slab_call(sub, q0);
        if (call.count == 0 || sub.variants.count(call.key())) continue;
        memory::dims src_dims = sc.x_dims, tv = t_dims, l = pl, rr = pr;
        src_dims[2] = call.src_planes;
        tv[2] = call.count;
        l[0] = call.pad_l;
        rr[0] = call.pad_r;
        Variant v;
        v.t_md = memory::desc(tv, dt::f32, lt);
        v.src_md = memory::desc(src_dims, dt::f32, lt);
        const auto pd = make_pd(v.src_md, v.t_md, l, rr);
        v.prim = dnnl::convolution_forward(pd);
        v.weights = weights_for(pd.weights_desc());
        t_bytes_ = std::max(t_bytes_, align_up(v.t_md.get_size()));
        if (impl_.empty()) impl_ = std::string("qsm:deconv_sublattice_slabs+") + pd.impl_info_str();
        sub.variants.emplace(call.key(), std::move(v));
      }
      if (!src_md_) src_md_ = memory::desc(sc.x_dims, dt::f32, lt);
      return sub;
    }
    sub.t_md = memory::desc(t_dims, dt::f32, lt);
    const memory::desc src_md = src_md_ ? *src_md_ : memory::desc(sc.x_dims, dt::f32, tag::any);
    dnnl::convolution_forward::primitive_desc pd = make_pd(src_md, sub.t_md, pl, pr);
    if (!src_md_) {
      src_md_ = pd.src_desc();
      impl_ = std::string("qsm:deconv_sublattice+") + pd.impl_info_str();
    }
    t_bytes_ = std::max(t_bytes_, align_up(sub.t_md.get_size()));
    sub.weights = weights_for(pd.weights_desc());
    sub.prim = dnnl::convolution_forward(pd);
    return sub;
  }

  std::vector<float> sub_weights(const float* wsrc, const std::int64_t* kern, const Residue* res) const {
    const std::int64_t td = res[0].taps, th = res[1].taps, tw = res[2].taps;
    std::vector<float> wt(static_cast<std::size_t>(mp_ * c_ * td * th * tw), 0.0f);
    for (std::int64_t mi = 0; mi < m_; ++mi)
      for (std::int64_t ci = 0; ci < c_; ++ci)
        for (std::int64_t a = 0; a < td; ++a)
          for (std::int64_t b = 0; b < th; ++b)
            for (std::int64_t e = 0; e < tw; ++e) {
              const std::int64_t kd = res[0].k0 + stride_[0] * (td - 1 - a);
              const std::int64_t kh = res[1].k0 + stride_[1] * (th - 1 - b);
              const std::int64_t kw = res[2].k0 + stride_[2] * (tw - 1 - e);
              wt[static_cast<std::size_t>((((mi * c_ + ci) * td + a) * th + b) * tw + e)] =
                  wsrc[(((ci * m_ + mi) * kern[0] + kd) * kern[1] + kh) * kern[2] + kw];
            }
    return wt;
  }

  // A channels-last batch-1 volume runs over depth slabs of kSlabs-th of its sub-lattice planes
  // (8, or the finer count a budget's plan stamped on the node, where the volume is deep enough
  // for it): output planes s·q0 … s·(q0 + slab) − 1 take input planes q0 − halo_lo … q0 + slab −
  // 1 + halo_hi alone (none beyond an up-sampling's own, kernel = stride; one more on either side
  // for NeXtQSM's 3³/2 adjoints), and in channels-last a slab is contiguous on both sides, so the
  // input can be read from, and the output written to, the spill file a slab at a time (xQSM's
  // full-resolution up-samplings write 1.8 GB; NeXtQSM's last adjoint 648 MiB). Always in slabs,
  // budget or not, so a budgeted run makes the same calls. 0: whole.
  std::int64_t depth_slab(const graph::TNode& n, std::size_t sp, const std::int64_t* kern, const std::int64_t* pb) {
    if (blk_ >= 0 || sp != 3 || n_ != 1 || n.in.empty()) return 0;
    for (std::int64_t r = 0; r < stride_[0]; ++r) {
      Residue res;
      if (!residue_of(r, stride_[0], kern[0], pb[0], in_[0], out_[0], res)) return 0;
      q_max_ = std::max(q_max_, res.q);
      halo_lo_ = std::max(halo_lo_, res.pl);
      halo_hi_ = std::max(halo_hi_, res.taps - 1 - res.pl);
    }
    const std::int64_t finer = n.node.attrs.get_int("qsm_depth_slabs", graph::kDepthSlabs);
    const std::int64_t kSlabs = finer > graph::kDepthSlabs && q_max_ >= 2 * finer ? finer : graph::kDepthSlabs;
    if (q_max_ < 2 * kSlabs) return 0;
    return (q_max_ + kSlabs - 1) / kSlabs;
  }
  std::size_t in_plane() const { return static_cast<std::size_t>(in_[1] * in_[2] * c_); }
  std::size_t out_plane() const { return static_cast<std::size_t>(out_[1] * out_[2] * m_); }

  void run_slabs(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) {
    float* t = reinterpret_cast<float*>(ctx.scratch);
    const StreamedOperand* is = ctx.in_stream(0);
    const StreamedOperand* os = ctx.out_stream(0);
    std::optional<SlabReader> reader;
    if (is) reader.emplace(*is, in_plane() * sizeof(float));
    for (std::int64_t q0 = 0; q0 < q_max_; q0 += slab_) {
      const auto [in_first, in_planes] = slab_input(q0);
      const std::int64_t o0 = q0 * stride_[0], o1 = std::min((q0 + slab_) * stride_[0], out_[0]);
      const std::size_t out_at = static_cast<std::size_t>(o0) * out_plane();
      const std::size_t out_bytes = static_cast<std::size_t>(o1 - o0) * out_plane() * sizeof(float);
      const float* x;  // a streamed input has no place in the arena: no pointer into it is formed
      if (reader) {
        x = reinterpret_cast<const float*>(reader->stage(in_first, in_planes));
      } else {
        x = inputs[0].data<float>() + static_cast<std::size_t>(in_first) * in_plane();
      }
      float* y = os ? reinterpret_cast<float*>(os->staging) : outputs[0].data<float>() + out_at;
      if (sum_input_ >= 0) {  // the addend's planes go where the slab accumulates (there already when shared)
        if (const StreamedOperand* as = ctx.in_stream(static_cast<std::size_t>(sum_input_))) {
          as->read(y, out_at * sizeof(float), out_bytes);
        } else {
          const float* from = inputs[static_cast<std::size_t>(sum_input_)].data<float>() + out_at;
          if (from != y) std::memcpy(y, from, out_bytes);
        }
      }
      for (const Sub& sub : subs_list_) {
        const DepthSlabCall call = slab_call(sub, q0);
        if (call.count == 0) continue;
        const Variant& v = sub.variants.at(call.key());
        if (sum_input_ >= 0) transfer_nxc(t, y, sub, /*to_y=*/false, call.count);
        const float* src = x + static_cast<std::size_t>(call.src_first - in_first) * in_plane();
        std::unordered_map<int, memory> args;
        args.emplace(DNNL_ARG_SRC, memory(v.src_md, engine(), const_cast<float*>(src)));
        args.emplace(DNNL_ARG_DST, memory(v.t_md, engine(), t));
        args.emplace(DNNL_ARG_WEIGHTS, v.weights);
        args.emplace(DNNL_ARG_BIAS, bias_);
        if (conv_scratch_ > 0) {
          memory::desc smd({static_cast<memory::dim>(conv_scratch_)}, dt::u8, tag::a);
          args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, engine(), ctx.scratch + t_bytes_));
        }
        v.prim.execute(stream(), args);
        stream().wait();
        transfer_nxc(t, y, sub, /*to_y=*/true, call.count);
      }
      if (os) os->write(y, out_at * sizeof(float), out_bytes);
    }
  }

  memory pack(const Tensor& plain, const memory::desc& plain_md, const memory::desc& md) {
    return pack_constant(plain, plain_md, md, packed_, packed_bytes_);
  }

  void transfer(float* t, float* y, const Sub& sub, bool to_y) const {
    if (blk_ < 0)
      transfer_nxc(t, y, sub, to_y, sub.q[0]);
    else if (blk_ == 16)
      transfer_blk<16>(t, y, sub, to_y);
    else
      transfer_blk<8>(t, y, sub, to_y);
  }

  // Y[n][mb][sd·d+a][sh·h+b][sw·w+c][j] <-> T[n][mb][d][h][w][j] (B-channel blocks).
  template <int B>
  void transfer_blk(float* t, float* y, const Sub& sub, bool to_y) const {
    const std::int64_t mb_count = mp_ / B;
    const std::int64_t od = out_[0], oh = out_[1], ow = out_[2];
    const std::int64_t qd = sub.q[0], qh = sub.q[1], qw = sub.q[2];
    const std::int64_t rows = n_ * mb_count * qd * qh;
    const int real_last = static_cast<int>(m_ - (mb_count - 1) * B);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t h = r % qh, d = (r / qh) % qd, nmb = r / (qh * qd);
      float* trow = t + r * qw * B;  // T rows are [n, mb, d, h] in this order too
      float* yrow =
          y + ((nmb * od + d * stride_[0] + sub.r[0]) * oh + h * stride_[1] + sub.r[1]) * ow * B + sub.r[2] * B;
      const bool pad_block = nmb % mb_count == mb_count - 1 && real_last < B;
      for (std::int64_t wi = 0; wi < qw; ++wi) {
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

  // Y[n][sd·d+a][sh·h+b][sw·w+c][:M] <-> T[n][d][h][w][:M] (channels-last), qd planes of T
  // (a slab's: y then points at the slab's first output plane, and n is 1).
  void transfer_nxc(float* t, float* y, const Sub& sub, bool to_y, std::int64_t qd) const {
    const std::int64_t od = out_[0], oh = out_[1], ow = out_[2];
    const std::int64_t qh = sub.q[1], qw = sub.q[2];
    const std::size_t px = static_cast<std::size_t>(m_) * sizeof(float);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < n_ * qd * qh; ++r) {
      const std::int64_t h = r % qh, d = (r / qh) % qd, bn = r / (qh * qd);
      float* trow = t + r * qw * m_;
      float* yrow =
          y + ((bn * od + d * stride_[0] + sub.r[0]) * oh + h * stride_[1] + sub.r[1]) * ow * m_ + sub.r[2] * m_;
      for (std::int64_t wi = 0; wi < qw; ++wi) {
        float* yv = yrow + wi * stride_[2] * m_;
        float* tv = trow + wi * m_;
        std::memcpy(to_y ? yv : tv, to_y ? tv : yv, px);
      }
    }
  }

  std::optional<memory::desc> src_md_;
  std::int64_t slab_ = 0;                               // sub-lattice planes per slab; 0: the whole volume at once
  std::int64_t q_max_ = 0, halo_lo_ = 0, halo_hi_ = 0;  // slabs: depth sub-lattice planes, taps' reach
  std::vector<Sub> subs_list_;
  memory bias_;
  std::size_t t_bytes_ = 0, conv_scratch_ = 0, y_bytes_ = 0;
  int blk_ = 8;
  int sum_input_ = -1;
  std::int64_t n_ = 0, c_ = 0, m_ = 0, mp_ = 0;
  std::int64_t stride_[3] = {1, 1, 1}, in_[3] = {1, 1, 1}, out_[3] = {1, 1, 1};
};

// Every output sub-lattice reached by taps and expressible as a padded stride-1 convolution
// (no groups or dilation): kernel = stride, and kernels larger than the stride with pads up to
// the usual (k − 1) / 2 or a cropped end (TF SAME adjoints).
bool sub_lattices_ok(const graph::ConvGeometry& geo, const Shape& x, const Shape& y) {
  if (geo.group != 1) return false;
  for (std::size_t i = 0; i < geo.kernel.size(); ++i) {
    if (geo.dilations[i] != 1 || geo.strides[i] < 1) return false;
    for (std::int64_t r = 0; r < geo.strides[i]; ++r) {
      Residue res;
      if (!residue_of(r, geo.strides[i], geo.kernel[i], geo.pads_begin[i], x[i + 2], y[i + 2], res)) return false;
    }
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
  if (sub_lattices_ok(geo, x.shape, y.shape)) return std::make_unique<DeconvSubLatticeKernel>(g, n, geo, dec);
  return std::make_unique<DeconvKernel>(g, n, geo, dec);
}

}  // namespace qsmcore::kernels::onednn
