// MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool on oneDNN pooling_v2 (dilations).
// The source is read in its producer's layout (a blocked conv output stays blocked) and the
// destination takes the layout oneDNN picks for it (the same blocking), so conv -> pool -> conv
// needs no reorder. ceil_mode becomes extra right padding; variants whose semantics oneDNN
// cannot reproduce exactly (Indices output, include-pad averages over ceil overflow) decline.
#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "graph/conv_geometry.h"
#include "graph/passes/passes.h"
#include "kernels/onednn/common.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::onednn {
namespace {

struct PoolParams {
  dnnl::algorithm alg;
  memory::dims strides, kernel, dil, pl, pr;
};

class PoolKernel final : public PrimitiveKernel {
 public:
  PoolKernel(const memory::desc& src, const Shape& y_shape, const PoolParams& p, LayoutDecision& dec, std::size_t n_in,
             std::int64_t slabs) {
    memory::desc dst_any(to_dims(y_shape), memory::data_type::f32, memory::format_tag::any);
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, p.alg, src, dst_any, p.strides, p.kernel, p.dil,
                                     p.pl, p.pr);
    dnnl::pooling_v2_forward::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::pooling_v2_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_.assign(n_in, Bind{-1, {}});
    in_binds_[0] = {DNNL_ARG_SRC, src};
    out_binds_ = {{DNNL_ARG_DST, pd.dst_desc()}};
    dec.outputs = {to_layout(pd.dst_desc(), y_shape)};
    prepare_depth_slabs(src, pd.dst_desc(), p, slabs);
  }

  std::optional<StreamNeed> stream_need(bool output, std::size_t slot) const override {
    if (!slabs_ || slot != 0) return std::nullopt;
    const std::size_t planes = output ? static_cast<std::size_t>(slabs_->per) : slabs_->per_in();
    return StreamNeed{align(planes * (output ? slabs_->out_plane : slabs_->in_plane)), output ? 0u : 1u};
  }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    if (!slabs_) return PrimitiveKernel::run(inputs, outputs, ctx);
    run_depth_slabs(inputs, outputs, ctx, ctx.in_stream(0), ctx.out_stream(0));
  }

 private:
  // Streamed (activation residency, issue #16): a pooling over disjoint depth windows of a
  // channels-last volume pools `per` output planes (k times as many input planes) at a time, so
  // under a budget it reads its input and writes its output a slab at a time through the spill
  // file. It runs in slabs budget or not: an average's sum need not keep its order between a
  // slab's primitive and the whole volume's, but the same slab calls give the same bits every run
  // (xQSM's octave average poolings read 926 MiB of full-resolution input at full size, the most
  // any step held once everything else streamed).
  struct DepthSlabs {
    std::int64_t k = 1, out_d = 0, per = 0;
    std::size_t in_plane = 0, out_plane = 0;                 // bytes per depth plane
    std::map<std::int64_t, dnnl::pooling_v2_forward> prims;  // by output planes per call
    std::map<std::int64_t, std::pair<memory::desc, memory::desc>> mds;
    std::size_t per_in() const { return static_cast<std::size_t>(per * k); }
  };
  static std::size_t align(std::size_t b) { return (b + 63) / 64 * 64; }

  void prepare_depth_slabs(const memory::desc& src, const memory::desc& dst, const PoolParams& p, std::int64_t slabs) {
    const auto x = src.dims(), y = dst.dims();
    if (x.size() != 5 || x[0] != 1) return;
    using tag = memory::format_tag;
    if (!(src == memory::desc(x, memory::data_type::f32, tag::ndhwc)) ||
        !(dst == memory::desc(y, memory::data_type::f32, tag::ndhwc)))
      return;
    if (p.kernel[0] != p.strides[0] || p.pl[0] != 0 || p.pr[0] != 0 || p.dil[0] != 0 || x[2] != y[2] * p.kernel[0])
      return;
    DepthSlabs s;
    s.k = p.kernel[0];
    s.out_d = y[2];
    // `slabs` (8 unless a budget chose finer conv-chain slabs): staging that share of each operand.
    s.per = std::max<std::int64_t>(1, (s.out_d + slabs - 1) / std::max<std::int64_t>(slabs, 1));
    s.in_plane = static_cast<std::size_t>(x[1] * x[3] * x[4]) * sizeof(float);
    s.out_plane = static_cast<std::size_t>(y[1] * y[3] * y[4]) * sizeof(float);
    for (const std::int64_t n : {s.per, s.out_d % s.per}) {
      if (n == 0 || s.prims.count(n)) continue;
      const memory::desc sm({x[0], x[1], n * s.k, x[3], x[4]}, memory::data_type::f32, tag::ndhwc);
      const memory::desc dm({y[0], y[1], n, y[3], y[4]}, memory::data_type::f32, tag::ndhwc);
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, p.alg, sm, dm, p.strides, p.kernel, p.dil,
                                       p.pl, p.pr);
      dnnl::pooling_v2_forward::primitive_desc pd(d, make_attr({}), engine());
      scratch_bytes_ = std::max(scratch_bytes_, pd.scratchpad_desc().get_size());
      s.prims.emplace(n, dnnl::pooling_v2_forward(pd));
      s.mds.emplace(n, std::make_pair(sm, dm));
    }
    slabs_ = std::move(s);
    impl_ = "qsm:pool_depth_slabs+" + impl_;
  }

  void run_depth_slabs(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx,
                       const StreamedOperand* in, const StreamedOperand* out) {
    QSM_ASSERT(slabs_.has_value(), "a pooling streamed without depth slabs");
    QSM_ASSERT(ctx.scratch_bytes >= scratch_bytes_, "scratch block smaller than a kernel's scratchpad");
    const DepthSlabs& s = *slabs_;
    for (std::int64_t z = 0; z < s.out_d; z += s.per) {
      const std::int64_t n = std::min(s.per, s.out_d - z);
      const std::size_t in_at = static_cast<std::size_t>(z * s.k) * s.in_plane;
      const std::size_t out_at = static_cast<std::size_t>(z) * s.out_plane;
      const std::size_t in_bytes = static_cast<std::size_t>(n * s.k) * s.in_plane;
      void* src = in ? static_cast<void*>(in->staging) : static_cast<std::byte*>(inputs[0].raw()) + in_at;
      void* dst = out ? static_cast<void*>(out->staging) : static_cast<std::byte*>(outputs[0].raw()) + out_at;
      if (in) in->read(src, in_at, in_bytes);
      const auto& [sm, dm] = s.mds.at(n);
      std::unordered_map<int, memory> args;
      args.emplace(DNNL_ARG_SRC, memory(sm, engine(), src));
      args.emplace(DNNL_ARG_DST, memory(dm, engine(), dst));
      if (scratch_bytes_ > 0) {
        memory::desc smd({static_cast<memory::dim>(scratch_bytes_)}, memory::data_type::u8, memory::format_tag::a);
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, engine(), ctx.scratch));
      }
      s.prims.at(n).execute(stream(), args);
      stream().wait();
      if (out) out->write(dst, out_at, static_cast<std::size_t>(n) * s.out_plane);
    }
  }

  std::optional<DepthSlabs> slabs_;
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
  return std::make_unique<PoolKernel>(desc_of(producer[0], x.shape), value(g, n.out[0]).shape, p, dec, n.in.size(),
                                      n.node.attrs.get_int("qsm_depth_slabs", graph::kDepthSlabs));
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
