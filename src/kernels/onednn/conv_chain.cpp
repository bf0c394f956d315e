// "qsm.ConvChain" (graph/passes/stream_conv_chains.cpp): a chain of same-size 3-D convolutions
// run as depth slabs, on oneDNN. The schedule of slabs is kernels/conv_chain_schedule.h.
// Activations are channels-last ([n][d][h][w][c]), so a range of depth planes is one contiguous
// block and each call is an ordinary oneDNN convolution over a thin volume: its depth pads are
// the real ones at the volume's faces and 0 inside, where the neighbouring planes are read
// instead. Consumed planes are dropped by moving the rest to the window's front. The dry walk at
// construction creates every primitive shape the run meets, so nothing is created or allocated
// while running.
//
// An up-sampling added onto the last layer (an octave convolution's sum: xQSM's conv of the
// high-frequency part + the up-sampled low-frequency one) is made by the last layer's slabs: its
// planes are written (or added onto a residual's) where the conv then accumulates with a sum
// post-op, so the conv's own output is never a whole volume. Under a budget that saves writing
// it to the spill file and reading it back (xQSM at 1/4 of its peak: 19.5 → 10.7 GB written).
//
// A layer whose parts are all 3×3×3 with pad 1 runs on the native Winograd F(2³, 3³) where
// choice.h picks it (issue #50), as one conv over all its parts (a split concat joined again in
// the transform: one output transform instead of one per part). Each slab is a depth window
// (output planes from the input planes around them, its depth pads those of the slab), which
// Winograd's 2-plane tiles take as they are. Its transformed weights are made once for every slab
// shape; its scratch shares the primitives' scratchpad block (one call runs at a time). The impl
// name carries a letter per layer: w(inograd), d(irect), b(f16 direct).
//
// Under conv_precision() Bf16 (opt-in) every layer's parts run oneDNN's direct convolution on
// bf16 source and weights into f32 planes (Winograd stays f32, so it is not chosen): a part's
// input planes are rounded to bf16 into a staging block after the scratchpad before its call, so
// the windows, residuals, sums and masks stay f32 and only the convolutions' inputs are rounded.
// The up-sampling sources' 1×1 convs (a few percent of the work) stay f32.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>

#include "core/accounted_array.h"
#include "core/parallel.h"
#include "graph/conv_geometry.h"
#include "kernels/conv_chain_schedule.h"
#include "kernels/onednn/common.h"
#include "kernels/winograd/choice.h"
#include "kernels/winograd/conv3d_winograd.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::onednn {
namespace {

using dt = memory::data_type;
using tag = memory::format_tag;

struct Part {
  int input_pos = -1;   // first layer: position of its activation among the node's inputs
  int source = -1;      // first layer: or the up-sampling source it reads (index)
  int addend_pos = -1;  // a layer with a residual: position of the addend among them
  std::int64_t cin = 0;
  const Tensor* w = nullptr;  // plain [M, C, kd, kh, kw]; used while primitives are built
  const Tensor* b = nullptr;
  bool has_bias = false;
  std::vector<PostOp> post;  // Sum (parts after the first) and activations (last part)
  std::int64_t kd = 1, kh = 1, kw = 1, ph0 = 0, ph1 = 0, pw0 = 0, pw1 = 0;
  bool winograd_fits = false;  // 3×3×3, stride 1, dilation 1, pad 1, groups 1
};

struct Layer {
  std::vector<Part> parts;
  int addend_source = -1;      // an up-sampling whose planes are added where the layer accumulates
  int mask_pos = -1;           // a Where masking its output: the mask's position among the node's inputs
  float mask_fill = 0.0f;      // what the output is where the mask is false
  std::int64_t max_out = 0;    // most planes one slab writes
  std::int64_t m = 0;          // output channels
  std::size_t plane = 0;       // floats per output plane (H·W·M)
  std::size_t window_off = 0;  // byte offset of the plane window in scratch
  // Set where chosen: one Winograd conv over all the parts (their inputs side by side, a split
  // concat joined again), in place of oneDNN's conv per part.
  std::unique_ptr<winograd::WinogradConv3d> wg;
};

/// An up-sampling ConvTranspose (kernel = stride) feeding a first-layer part, or adding onto the
/// last layer's output: its output is made a few planes at a time from the low-resolution input,
/// one 1x1 conv per output sub-lattice (as in deconv.cpp) into `t`, scattered into the source's
/// own plane window. An addend's own post-ops after its sum are the last layer's.
struct Source {
  int input_pos = -1;
  std::int64_t cin = 0, m = 0, s[3] = {1, 1, 1}, ld = 0, lh = 0, lw = 0;  // strides, low-res extent
  const Tensor* w = nullptr;                                              // plain [C, M, sd, sh, sw]
  const Tensor* b = nullptr;
  std::vector<PostOp> post;
  std::size_t plane = 0;  // floats per output plane
  std::size_t window_off = 0, t_off = 0;
  std::int64_t t_planes = 0;                                // low-res planes per call (max)
  std::map<std::int64_t, dnnl::convolution_forward> prims;  // by low-res planes per call
  std::vector<memory> weights, bias;                        // per sub-lattice
  memory::desc packed_md;
};

/// A pooling over disjoint windows ending the chain: the last layer writes into a window, and
/// each whole group of `k[0]` planes is pooled into the output as soon as it is there.
struct Pool {
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  std::int64_t k[3] = {1, 1, 1};
  std::size_t plane = 0;                                   // floats per output plane
  std::map<std::int64_t, dnnl::pooling_v2_forward> prims;  // by input planes per call
};

struct Call {
  dnnl::convolution_forward prim;
  memory::desc src, dst;
  int weights = -1;  // index into the part's packed weights
};

class ConvChainKernel final : public Kernel {
 public:
  ConvChainKernel(const graph::TypedGraph& g, const graph::TNode& n, LayoutDecision& dec) : cs_(g, n) {
    d_ = cs_.d, h_ = cs_.h, w_ = cs_.w;
    for (const ChainSource& cso : cs_.sources) {
      const graph::TNode& c = *cso.node;
      Source src;
      src.input_pos = cso.input_pos;
      src.cin = cso.cin;
      src.m = cso.m;
      for (int i = 0; i < 3; ++i) src.s[i] = cso.s[i];
      src.ld = cso.ld, src.lh = cso.lh, src.lw = cso.lw;
      src.w = value(g, c.in[1]).constant.get();
      src.b = c.in.size() > 2 && c.in[2] >= 0 ? value(g, c.in[2]).constant.get() : nullptr;
      QSM_ASSERT(src.w != nullptr, "a streamed up-sampling without its weights");
      src.post = cso.addend ? std::vector<PostOp>{} : c.post;
      src.plane = static_cast<std::size_t>(h_ * w_ * src.m);
      sources_.push_back(std::move(src));
    }
    for (const ChainLayer& cl : cs_.layers) {
      Layer& l = layers_.emplace_back();
      l.m = cl.m;
      l.plane = static_cast<std::size_t>(h_ * w_ * l.m);
      for (const ChainPart& cp : cl.parts) {
        const graph::TNode& c = *cp.node;
        const auto geo = graph::conv_geometry(c.node, value(g, c.in[0]).shape, value(g, c.in[1]).shape);
        Part p;
        p.input_pos = cp.input_pos, p.source = cp.source, p.addend_pos = cp.addend_pos, p.cin = cp.cin;
        p.w = value(g, c.in[1]).constant.get();
        QSM_ASSERT(p.w != nullptr, "a streamed convolution chain without its weights");
        p.has_bias = c.in.size() > 2 && c.in[2] >= 0;
        p.b = p.has_bias ? value(g, c.in[2]).constant.get() : nullptr;
        p.post = c.post;
        p.kd = geo.kernel[0], p.kh = geo.kernel[1], p.kw = geo.kernel[2];
        p.ph0 = geo.pads_begin[1], p.ph1 = geo.pads_end[1], p.pw0 = geo.pads_begin[2], p.pw1 = geo.pads_end[2];
        std::vector<std::int64_t> pads(geo.pads_begin.begin(), geo.pads_begin.end());
        pads.insert(pads.end(), geo.pads_end.begin(), geo.pads_end.end());
        p.winograd_fits = winograd::winograd_fits(geo.kernel, geo.strides, geo.dilations, pads, geo.group);
        l.parts.push_back(std::move(p));
      }
      l.addend_source = cl.addend_source;
      l.mask_pos = cl.mask_pos;
      l.mask_fill = cl.mask_fill;
      if (cl.addend_source >= 0) add_upsampled_addend(l, *cs_.sources[static_cast<std::size_t>(cl.addend_source)].node);
    }
    choose_algorithms();
    bool even = false;  // Winograd's 2-plane tiles: slabs on even planes (conv_chain_schedule.h)
    for (std::size_t j = 0; j < layers_.size(); ++j) {
      cs_.layers[j].even_slabs = layers_[j].wg != nullptr;
      even = even || cs_.layers[j].even_slabs;
    }
    if (cs_.pool) {
      Pool pl;
      pl.alg = cs_.pool->node->node.op_type == "MaxPool" ? dnnl::algorithm::pooling_max
                                                         : dnnl::algorithm::pooling_avg_exclude_padding;  // no pads
      for (int i = 0; i < 3; ++i) pl.k[i] = cs_.pool->k[i];
      pl.plane = static_cast<std::size_t>(h_ / pl.k[1] * (w_ / pl.k[2]) * layers_.back().m);
      pool_ = std::move(pl);
    }
    calls_.resize(layers_.size());
    packed_.resize(layers_.size());
    // Dry walk: create the primitives and size the windows.
    cs_.walk(
        [&](const ChainSchedule::Slab& sl) {
          prepare_call(sl.layer, sl.n_in, sl.n_out, sl.pad_f, sl.pad_b);
          if (const int si = layers_[sl.layer].addend_source; si >= 0) prepare_source(static_cast<std::size_t>(si), 1);
          if (sl.layer == 0) in_planes_ = std::max(in_planes_, sl.n_in);
          if (!pool_ && sl.layer + 1 == layers_.size()) out_planes_ = std::max(out_planes_, sl.n_out);
        },
        [](std::size_t, std::int64_t, std::int64_t) {},
        [&](std::size_t si, std::int64_t, std::int64_t n_low, std::int64_t) { prepare_source(si, n_low); },
        [](std::size_t, std::int64_t, std::int64_t) {},
        [&](std::int64_t, std::int64_t planes) {
          prepare_pool(planes);
          out_planes_ = std::max(out_planes_, planes / pool_->k[0]);
        },
        /*dry=*/true);
    for (std::size_t j = 0; j < layers_.size(); ++j) layers_[j].max_out = cs_.layers[j].max_out;
    std::size_t off = 0;
    for (std::size_t j = 0; j < windows(); ++j) {
      layers_[j].window_off = off;
      off += align(static_cast<std::size_t>(cs_.layers[j].cap) * layers_[j].plane * sizeof(float));
    }
    for (std::size_t si = 0; si < sources_.size(); ++si) {
      Source& src = sources_[si];
      src.window_off = off;
      off += align(static_cast<std::size_t>(cs_.sources[si].cap) * src.plane * sizeof(float));
      src.t_off = off;
      off += align(static_cast<std::size_t>(src.t_planes * src.lh * src.lw * src.m) * sizeof(float));
    }
    // The pass reserved a fixed share of the intermediates for the windows, so the chain's
    // memory is linear in the voxel count; the walk's windows always fit in it. Even slabs (a
    // Winograd layer's) may leave a layer or an up-sampling a few planes more than its share:
    // the step's scratch counts them (so do the plan's figures), a few planes' worth, which grows
    // with the volume slower than its voxels (the registry's line, fitted at 32³-64³, stays above).
    const auto reserved = static_cast<std::size_t>(n.node.attrs.get_int("window_bytes", 0));
    QSM_ASSERT(off <= reserved || reserved == 0 || even, "conv chain windows exceed their reservation");
    prim_scratch_off_ = align(std::max(off, reserved));
    bf16_stage_off_ = prim_scratch_off_ + align(prim_scratch_);
    scratch_bytes_ = bf16_stage_off_ + bf16_stage_;
    for (auto& l : layers_)  // plain weights are not needed after packing
      for (auto& p : l.parts) p.w = p.b = nullptr;
    for (auto& src : sources_) src.w = src.b = nullptr;

    dec.inputs.assign(n.in.size(), Layout{});
    for (const auto& p : layers_.front().parts) {
      if (p.input_pos < 0) continue;
      const auto& x = value(g, n.in[static_cast<std::size_t>(p.input_pos)]);
      dec.inputs[static_cast<std::size_t>(p.input_pos)] = to_layout(nxc(x.shape[1], d_), x.shape);
    }
    for (const auto& src : sources_) {
      const auto& x = value(g, n.in[static_cast<std::size_t>(src.input_pos)]);
      dec.inputs[static_cast<std::size_t>(src.input_pos)] =
          to_layout(memory::desc({1, src.cin, src.ld, src.lh, src.lw}, dt::f32, tag::ndhwc), x.shape);
    }
    for (const auto& l : layers_)
      if (l.parts.front().addend_pos >= 0) {
        const auto& a = value(g, n.in[static_cast<std::size_t>(l.parts.front().addend_pos)]);
        dec.inputs[static_cast<std::size_t>(l.parts.front().addend_pos)] = to_layout(nxc(a.shape[1], d_), a.shape);
      }
    for (const auto& l : layers_)
      if (l.mask_pos >= 0) {
        const auto& mv = value(g, n.in[static_cast<std::size_t>(l.mask_pos)]);
        dec.inputs[static_cast<std::size_t>(l.mask_pos)] =
            to_layout(memory::desc(to_dims(mv.shape), dt::u8, tag::ndhwc), mv.shape);
      }
    const auto& y = value(g, n.out[0]);
    dec.outputs = {to_layout(memory::desc(to_dims(y.shape), dt::f32, tag::ndhwc), y.shape)};
    inplace_ = cs_.shareable_input();
    // "+up": an up-sampling added onto the last layer is made inside; "+mask": Where masks too.
    const bool masked = std::any_of(layers_.begin(), layers_.end(), [](const Layer& l) { return l.mask_pos >= 0; });
    std::string algos;  // per layer: w on Winograd, d on oneDNN's direct conv, b on it in bf16
    for (const auto& l : layers_) {
      algos += l.wg ? 'w' : bf16_ ? 'b' : 'd';
    }
    if (impl_.empty()) impl_ = wg_impl_;
    impl_ = "qsm:conv_chain(" + std::to_string(layers_.size()) + (layers_.back().addend_source >= 0 ? "+up" : "") +
            (masked ? "+mask" : "") + ")[" + algos + "]+" + impl_;
  }

  std::size_t scratch_bytes() const override { return scratch_bytes_; }
  std::int64_t packed_bytes() const override { return packed_bytes_; }
  std::int64_t derived_bytes() const override { return derived_bytes_; }
  std::string impl_name() const override { return impl_; }
  int inplace_input() const override { return inplace_; }
  // Streamed (issue #16): a first-layer input is read into a window of the planes one slab
  // reads, an addend straight into the planes it is added to, an up-sampling source's
  // low-resolution planes a call's worth at a time, and the output is written a slab at a time
  // from a staging block. The arithmetic is the in-memory run's: the same calls on the same
  // planes, only the addresses differ.
  std::optional<StreamNeed> stream_need(bool output, std::size_t slot) const override {
    if (output) {
      if (slot != 0) return std::nullopt;
      return StreamNeed{align(static_cast<std::size_t>(out_planes_) * out_plane_floats() * sizeof(float)), 0};
    }
    StreamNeed need;
    for (const auto& l : layers_)  // a mask: read a slab at a time into staging, as its layer writes
      if (static_cast<std::size_t>(l.mask_pos) == slot) {
        need.staging = std::max(need.staging, align(static_cast<std::size_t>(l.max_out) * l.plane));
        ++need.reads;
      }
    if (need.reads > 0) return need;
    for (const auto& src : sources_)
      if (static_cast<std::size_t>(src.input_pos) == slot) {
        if (need.reads > 0) return std::nullopt;  // two sources on one slot: not met, not handled
        need.staging = align(static_cast<std::size_t>(src.t_planes * src.lh * src.lw * src.cin) * sizeof(float));
        need.reads = 1;
      }
    if (need.reads > 0) {
      for (const auto& p : layers_.front().parts)
        if (p.input_pos >= 0 && static_cast<std::size_t>(p.input_pos) == slot) return std::nullopt;
      for (const auto& l : layers_)
        if (static_cast<std::size_t>(l.parts.front().addend_pos) == slot) return std::nullopt;
      return need;
    }
    for (const auto& p : layers_.front().parts)
      if (p.input_pos >= 0 && static_cast<std::size_t>(p.input_pos) == slot && need.reads == 0) {
        // One window per slot: parts reading the same slot read the same planes of it.
        need.staging = align(static_cast<std::size_t>(in_planes_ * h_ * w_ * p.cin) * sizeof(float));
        need.reads = 1;
      }
    for (const auto& l : layers_)
      if (l.parts.front().addend_pos >= 0 && static_cast<std::size_t>(l.parts.front().addend_pos) == slot) ++need.reads;
    if (need.reads == 0) return std::nullopt;
    return need;
  }
  bool reads_input(std::size_t i) const override {
    for (const auto& p : layers_.front().parts)
      if (p.input_pos >= 0 && static_cast<std::size_t>(p.input_pos) == i) return true;
    for (const auto& src : sources_)
      if (static_cast<std::size_t>(src.input_pos) == i) return true;
    for (const auto& l : layers_)
      if (static_cast<std::size_t>(l.parts.front().addend_pos) == i || static_cast<std::size_t>(l.mask_pos) == i)
        return true;
    return false;  // weights were packed
  }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    const std::size_t to_output = pool_ ? layers_.size() : layers_.size() - 1;  // the layer writing it
    QSM_ASSERT(ctx.scratch_bytes >= scratch_bytes_, "scratch block smaller than a kernel's scratchpad");
    auto window = [&](std::size_t j) { return reinterpret_cast<float*>(ctx.scratch + layers_[j].window_off); };
    const StreamedOperand* out_stream = ctx.out_stream(0);
    float* out = out_stream ? reinterpret_cast<float*>(out_stream->staging) : outputs[0].data<float>();
    std::vector<InputWindow> in_windows(inputs.size());
    cs_.walk(
        [&](const ChainSchedule::Slab& sl) {
          const std::size_t j = sl.layer;
          const std::int64_t n_out = sl.n_out, src_plane = sl.in_plane, dst_plane = sl.out_plane,
                             abs_plane = sl.abs_plane;
          const auto& source_lo = sl.source_lo;
          const Layer& l = layers_[j];
          const bool streamed_out = j == to_output && out_stream;
          float* dst = j == to_output && !out_stream ? out + static_cast<std::size_t>(dst_plane) * l.plane
                       : streamed_out                ? out
                                                     : window(j) + static_cast<std::size_t>(dst_plane) * l.plane;
          const auto& calls = calls_[j].at(key(sl.n_in, n_out, sl.pad_f, sl.pad_b));
          const std::size_t slab_bytes = static_cast<std::size_t>(n_out) * l.plane * sizeof(float);
          if (const int a = l.parts.front().addend_pos; a >= 0) {
            // The residual's planes go where the conv accumulates (already there when shared).
            const std::size_t at = static_cast<std::size_t>(abs_plane) * l.plane;
            if (const StreamedOperand* as = ctx.in_stream(static_cast<std::size_t>(a))) {
              as->read(dst, at * sizeof(float), slab_bytes);
            } else {
              const float* from = inputs[static_cast<std::size_t>(a)].data<float>() + at;
              if (from != dst) std::memcpy(dst, from, slab_bytes);
            }
          }
          if (l.addend_source >= 0) {
            // The up-sampled planes go there too (onto the residual's, when there is one), one
            // low-resolution plane at a time.
            const auto si = static_cast<std::size_t>(l.addend_source);
            const std::int64_t s0 = sources_[si].s[0];
            for (std::int64_t z = 0; z < n_out; z += s0)
              run_source(si, inputs, ctx, (abs_plane + z) / s0, 1, dst + static_cast<std::size_t>(z) * l.plane,
                         l.parts.front().addend_pos >= 0);
          }
          std::vector<winograd::WinogradConv3d::Input> wg_in;
          for (std::size_t k = 0; k < l.parts.size(); ++k) {
            const Part& p = l.parts[k];
            const float* src;
            if (j == 0 && p.source >= 0) {
              const Source& so = sources_[static_cast<std::size_t>(p.source)];
              src = reinterpret_cast<const float*>(ctx.scratch + so.window_off) +
                    static_cast<std::size_t>(src_plane - source_lo[static_cast<std::size_t>(p.source)]) * so.plane;
            } else if (j == 0) {
              const auto pos = static_cast<std::size_t>(p.input_pos);
              const auto plane_floats = static_cast<std::size_t>(h_ * w_ * p.cin);
              if (const StreamedOperand* is = ctx.in_stream(pos))
                src = in_windows[pos].planes(*is, src_plane, sl.n_in, plane_floats);
              else
                src = inputs[pos].data<float>() + static_cast<std::size_t>(src_plane) * plane_floats;
            } else {
              src = window(j - 1) + static_cast<std::size_t>(src_plane) * layers_[j - 1].plane;
            }
            if (l.wg) {  // gathered, then one call for all parts
              wg_in.push_back({src, static_cast<int>(p.cin)});
              continue;
            }
            const Call& c = calls[k];
            std::unordered_map<int, memory> args;
            if (bf16_) {
              std::byte* staged = ctx.scratch + bf16_stage_off_;
              round_to_bf16(src, staged, c.src.get_size() / sizeof(std::uint16_t));
              args.emplace(DNNL_ARG_SRC, memory(c.src, engine(), staged));
            } else {
              args.emplace(DNNL_ARG_SRC, memory(c.src, engine(), const_cast<float*>(src)));
            }
            args.emplace(DNNL_ARG_DST, memory(c.dst, engine(), dst));
            args.emplace(DNNL_ARG_WEIGHTS, packed_[j][k][static_cast<std::size_t>(c.weights)].second);
            if (p.has_bias) args.emplace(DNNL_ARG_BIAS, bias_[j][k]);
            if (prim_scratch_ > 0) {
              memory::desc smd({static_cast<memory::dim>(prim_scratch_)}, dt::u8, tag::a);
              args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, engine(), ctx.scratch + prim_scratch_off_));
            }
            c.prim.execute(stream(), args);
            stream().wait();
          }
          if (l.wg) run_winograd(l, wg_in, sl, dst, ctx);
          if (l.mask_pos >= 0) apply_mask(l, inputs, ctx, abs_plane, n_out, dst);
          if (streamed_out)
            out_stream->write(out, static_cast<std::size_t>(dst_plane) * l.plane * sizeof(float), slab_bytes);
        },
        [&](std::size_t j, std::int64_t from, std::int64_t planes) {
          float* base = window(j);
          std::memmove(base, base + static_cast<std::size_t>(from) * layers_[j].plane,
                       static_cast<std::size_t>(planes) * layers_[j].plane * sizeof(float));
        },
        [&](std::size_t si, std::int64_t low0, std::int64_t n_low, std::int64_t dst_plane) {
          float* win = reinterpret_cast<float*>(ctx.scratch + sources_[si].window_off);
          run_source(si, inputs, ctx, low0, n_low, win + static_cast<std::size_t>(dst_plane) * sources_[si].plane,
                     false);
        },
        [&](std::size_t si, std::int64_t from, std::int64_t planes) {
          const Source& so = sources_[si];
          float* base = reinterpret_cast<float*>(ctx.scratch + so.window_off);
          std::memmove(base, base + static_cast<std::size_t>(from) * so.plane,
                       static_cast<std::size_t>(planes) * so.plane * sizeof(float));
        },
        [&](std::int64_t abs_plane, std::int64_t planes) {
          const std::int64_t m = layers_.back().m;
          std::unordered_map<int, memory> args;
          args.emplace(DNNL_ARG_SRC, memory(nxc(m, planes), engine(), window(layers_.size() - 1)));
          const std::size_t at = static_cast<std::size_t>(abs_plane / pool_->k[0]) * pool_->plane;
          args.emplace(DNNL_ARG_DST, memory(pooled_desc(planes), engine(), out_stream ? out : out + at));
          if (prim_scratch_ > 0) {
            memory::desc smd({static_cast<memory::dim>(prim_scratch_)}, dt::u8, tag::a);
            args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, engine(), ctx.scratch + prim_scratch_off_));
          }
          pool_->prims.at(planes).execute(stream(), args);
          stream().wait();
          if (out_stream)
            out_stream->write(out, at * sizeof(float),
                              static_cast<std::size_t>(planes / pool_->k[0]) * pool_->plane * sizeof(float));
        },
        /*dry=*/false);
  }

 private:
  static std::size_t align(std::size_t b) { return (b + 63) / 64 * 64; }
  std::size_t out_plane_floats() const { return pool_ ? pool_->plane : layers_.back().plane; }

  // A streamed first-layer input: the planes [lo, hi) of it last read, at the front of its
  // staging block. Slabs read forward, so each plane is read from the file once.
  struct InputWindow {
    std::int64_t lo = 0, hi = 0;
    const float* planes(const StreamedOperand& s, std::int64_t first, std::int64_t n, std::size_t plane_floats) {
      auto* base = reinterpret_cast<float*>(s.staging);
      const std::size_t plane_bytes = plane_floats * sizeof(float);
      QSM_ASSERT(first >= lo && static_cast<std::size_t>(n) * plane_bytes <= s.staging_bytes,
                 "conv chain streamed input read out of order");
      if (first > lo) {
        const std::int64_t keep = std::max<std::int64_t>(0, hi - first);
        if (keep > 0)
          std::memmove(base, base + static_cast<std::size_t>(first - lo) * plane_floats,
                       static_cast<std::size_t>(keep) * plane_bytes);
        lo = first;
        hi = lo + keep;
      }
      if (first + n > hi) {
        s.read(base + static_cast<std::size_t>(hi - lo) * plane_floats, static_cast<std::size_t>(hi) * plane_bytes,
               static_cast<std::size_t>(first + n - hi) * plane_bytes);
        hi = first + n;
      }
      return base;
    }
  };

  // Where(mask, y, fill) on the slab of planes [abs_plane, abs_plane + n_out) the layer just
  // wrote at dst: the mask's planes are the same bytes per plane (u8, channels-last).
  void apply_mask(const Layer& l, std::span<const Tensor> inputs, ExecContext& ctx, std::int64_t abs_plane,
                  std::int64_t n_out, float* dst) const {
    const auto pos = static_cast<std::size_t>(l.mask_pos);
    const std::size_t at = static_cast<std::size_t>(abs_plane) * l.plane;
    const std::size_t n = static_cast<std::size_t>(n_out) * l.plane;
    const std::uint8_t* m;
    if (const StreamedOperand* ms = ctx.in_stream(pos)) {
      QSM_ASSERT(n <= ms->staging_bytes, "conv chain mask slab larger than its staging");
      ms->read(ms->staging, at, n);
      m = reinterpret_cast<const std::uint8_t*>(ms->staging);
    } else {
      m = inputs[pos].data<std::uint8_t>() + at;
    }
    const float fill = l.mask_fill;
    const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) dst[i] = m[i] ? dst[i] : fill;
  }

  // The layer adds an up-sampling's output (node `up`, whose first post-op is that sum) onto
  // its own: its first part accumulates onto planes holding the up-sampled ones, and its last
  // applies what `up` applied after the sum. The pass took only layers without activations.
  static void add_upsampled_addend(Layer& l, const graph::TNode& up) {
    auto& front = l.parts.front().post;
    if (l.parts.front().addend_pos < 0) front.insert(front.begin(), PostOp{PostOp::Kind::Sum, 0.0f, 0.0f, -1});
    auto& last = l.parts.back().post;
    last.insert(last.end(), up.post.begin() + 1, up.post.end());
  }

  // A slab call's shape: input planes, output planes, depth pads.
  using CallKey = std::array<std::int64_t, 4>;
  static CallKey key(std::int64_t n_in, std::int64_t n_out, std::int64_t pf, std::int64_t pb) {
    return {n_in, n_out, pf, pb};
  }
  memory::desc nxc(std::int64_t c, std::int64_t depth, dt t = dt::f32) const {
    return memory::desc({1, c, depth, h_, w_}, t, tag::ndhwc);
  }
  memory::desc pooled_desc(std::int64_t planes) const {
    return memory::desc({1, layers_.back().m, planes / pool_->k[0], h_ / pool_->k[1], w_ / pool_->k[2]}, dt::f32,
                        tag::ndhwc);
  }
  std::size_t windows() const {
    return cs_.windows();
  }

  void prepare_pool(std::int64_t planes) {
    if (pool_->prims.count(planes)) return;
    const memory::dims k{pool_->k[0], pool_->k[1], pool_->k[2]}, zero{0, 0, 0};
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, pool_->alg, nxc(layers_.back().m, planes),
                                     pooled_desc(planes), k, k, zero, zero, zero);
    dnnl::pooling_v2_forward::primitive_desc pd(d, make_attr({}), engine());
    prim_scratch_ = std::max(prim_scratch_, pd.scratchpad_desc().get_size());
    pool_->prims.emplace(planes, dnnl::pooling_v2_forward(pd));
  }

  // Per layer, Winograd or oneDNN's direct conv (choice.h: QSM_CONV_ALGO, else the measured
  // table, for all its input channels: parts over a split concat are one Winograd conv).
  void choose_algorithms() {
    wg_threads_ = max_threads();
    if (bf16_) return;  // every layer direct in bf16 (see the top)
    for (auto& l : layers_) {
      std::int64_t c = 0;
      bool fits = true;
      for (const auto& p : l.parts) c += p.cin, fits = fits && p.winograd_fits;
      std::vector<PostOp> post;
      if (!fits || !joined_post_ops(l, post) || winograd::choose_conv_algo(c, l.m) != winograd::ConvAlgo::Winograd)
        continue;
      // The parts' weights side by side along the input channels (accounted: a layer's whole
      // weights, held while its Winograd weights are derived), their biases added.
      AccountedArray<float> w(static_cast<std::size_t>(l.m * c * 27), MemCategory::Weights);
      std::vector<float> b(static_cast<std::size_t>(l.m), 0.0f);
      bool has_bias = false;
      std::int64_t c0 = 0;
      for (const auto& p : l.parts) {
        const float* pw = p.w->data<float>();
        for (std::int64_t oc = 0; oc < l.m; ++oc)
          std::copy(pw + oc * p.cin * 27, pw + (oc + 1) * p.cin * 27, w.data() + (oc * c + c0) * 27);
        if (p.has_bias)
          for (std::int64_t oc = 0; oc < l.m; ++oc) b[static_cast<std::size_t>(oc)] += p.b->data<float>()[oc];
        has_bias = has_bias || p.has_bias;
        c0 += p.cin;
      }
      const winograd::Conv3dShape s{1,
                                    static_cast<int>(c),
                                    static_cast<int>(l.m),
                                    static_cast<int>(d_),
                                    static_cast<int>(h_),
                                    static_cast<int>(w_)};
      l.wg = std::make_unique<winograd::WinogradConv3d>(s, w.data(), has_bias ? b.data() : nullptr, std::move(post));
      packed_bytes_ += l.wg->packed_bytes();
      derived_bytes_ = std::max<std::int64_t>(
          derived_bytes_, l.wg->derived_bytes() + static_cast<std::int64_t>(w.size() * sizeof(float)));
      prim_scratch_ = std::max(prim_scratch_, l.wg->scratch_bytes(wg_threads_));
      if (wg_impl_.empty()) wg_impl_ = l.wg->impl_name();
    }
  }

  // The post-ops of a layer's parts as one conv's: a Sum where the first part adds onto planes
  // already there (a residual, an up-sampling), then the last part's after its own Sum. False
  // where the parts are not so (a part in between with more than its Sum).
  static bool joined_post_ops(const Layer& l, std::vector<PostOp>& post) {
    const auto is_sum = [](const PostOp& o) { return o.kind == PostOp::Kind::Sum; };
    const auto& first = l.parts.front().post;
    if (l.parts.size() == 1) {
      post = first;
      return true;
    }
    for (std::size_t k = 0; k + 1 < l.parts.size(); ++k)
      if (!std::all_of(l.parts[k].post.begin(), l.parts[k].post.end(), is_sum)) return false;
    for (std::size_t k = 1; k < l.parts.size(); ++k)
      if (l.parts[k].post.empty() || !is_sum(l.parts[k].post.front())) return false;
    if (first.size() > 1) return false;
    post = first;
    const auto& last = l.parts.back().post;
    post.insert(post.end(), last.begin() + 1, last.end());
    return true;
  }

  // The layer's Winograd conv on one slab: its parts' input planes, into dst (onto what is
  // there where it has a Sum).
  void run_winograd(const Layer& l, const std::vector<winograd::WinogradConv3d::Input>& in,
                    const ChainSchedule::Slab& sl, float* dst, ExecContext& ctx) const {
    const bool sum = std::any_of(l.parts.front().post.begin(), l.parts.front().post.end(),
                                 [](const PostOp& o) { return o.kind == PostOp::Kind::Sum; });
    const winograd::DepthWindow win{static_cast<int>(sl.n_out), static_cast<int>(sl.n_in), static_cast<int>(sl.pad_f)};
    l.wg->run_window(in, sum ? dst : nullptr, dst, win, ctx.scratch + prim_scratch_off_, prim_scratch_,
                     std::min(wg_threads_, max_threads()));
  }

  // One convolution per part for this slab shape; weights packed once per weights layout.
  void prepare_call(std::size_t j, std::int64_t n_in, std::int64_t n_out, std::int64_t pad_f, std::int64_t pad_b) {
    auto& calls = calls_[j];
    const CallKey k = key(n_in, n_out, pad_f, pad_b);
    if (calls.count(k)) return;
    Layer& l = layers_[j];
    if (bias_.size() < layers_.size()) bias_.resize(layers_.size());
    if (bias_[j].size() < l.parts.size()) bias_[j].resize(l.parts.size());
    packed_[j].resize(l.parts.size());
    std::vector<Call> cs;
    for (std::size_t pi = 0; pi < l.parts.size(); ++pi) {
      const Part& p = l.parts[pi];
      if (l.wg) {  // a depth window: the input planes are the outputs' and their halo, less the pads
        QSM_ASSERT(n_in == n_out + 2 - pad_f - pad_b && pad_f <= 1 && pad_b <= 1,
                   "conv chain slab is not a Winograd depth window");
        cs.push_back(Call{});
        continue;
      }
      const memory::desc src = nxc(p.cin, n_in, conv_compute_type()), dst = nxc(l.m, n_out);
      const memory::desc w_any({l.m, p.cin, p.kd, p.kh, p.kw}, conv_compute_type(), tag::any);
      if (bf16_)  // the part's input planes, rounded to bf16 before its call
        bf16_stage_ = std::max(bf16_stage_, src.get_size());
      const memory::desc b_md({l.m}, dt::f32, tag::a);
      const memory::dims strides{1, 1, 1}, dil{0, 0, 0}, pl{pad_f, p.ph0, p.pw0}, pr{pad_b, p.ph1, p.pw1};
      auto make_pd = [&](const memory::desc& w_md) {
        auto desc = p.has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                                 dnnl::algorithm::convolution_direct, src, w_md, b_md,
                                                                 dst, strides, dil, pl, pr)
                               : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                                 dnnl::algorithm::convolution_direct, src, w_md, dst,
                                                                 strides, dil, pl, pr);
        return dnnl::convolution_forward::primitive_desc(desc, make_attr(p.post), engine());
      };
      auto& packs = packed_[j][pi];
      dnnl::convolution_forward::primitive_desc pd = make_pd(w_any);
      if (!packs.empty() && !(pd.weights_desc() == packs.front().first)) {
        // A thin edge slab may prefer another weights layout: ask for the one already packed
        // rather than hold the weights twice, unless only the reference kernel takes it.
        try {
          auto forced = make_pd(packs.front().first);
          if (std::string(forced.impl_info_str()).find("ref") == std::string::npos) pd = forced;
        } catch (const dnnl::error&) {
        }
      }
      // bf16 only where a jit kernel runs it: the backend then makes the chain again in f32.
      if (bf16_ && std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
        throw dnnl::error(dnnl_unimplemented, "no jit bf16 convolution for a conv chain's slab");
      prim_scratch_ = std::max(prim_scratch_, pd.scratchpad_desc().get_size());
      if (impl_.empty()) impl_ = std::string("onednn:") + pd.impl_info_str();
      Call c{dnnl::convolution_forward(pd), src, dst, -1};
      for (std::size_t q = 0; q < packs.size() && c.weights < 0; ++q)
        if (packs[q].first == pd.weights_desc()) c.weights = static_cast<int>(q);
      if (c.weights < 0) {
        c.weights = static_cast<int>(packs.size());
        packs.emplace_back(
            pd.weights_desc(),
            pack(*p.w, memory::desc({l.m, p.cin, p.kd, p.kh, p.kw}, dt::f32, tag::oidhw), pd.weights_desc()));
      }
      if (p.has_bias && !bias_[j][pi]) bias_[j][pi] = pack(*p.b, b_md, b_md);
      cs.push_back(std::move(c));
    }
    calls.emplace(k, std::move(cs));
  }

  // The 1x1 conv of one sub-lattice over n_low low-resolution planes, weights packed once.
  void prepare_source(std::size_t si, std::int64_t n_low) {
    Source& so = sources_[si];
    so.t_planes = std::max(so.t_planes, n_low);
    if (so.prims.count(n_low)) return;
    const memory::desc src({1, so.cin, n_low, so.lh, so.lw}, dt::f32, tag::ndhwc);
    const memory::desc dst({1, so.m, n_low, so.lh, so.lw}, dt::f32, tag::ndhwc);
    const memory::desc b_md({so.m}, dt::f32, tag::a);
    const memory::dims one{1, 1, 1}, zero{0, 0, 0};
    auto make_pd = [&](const memory::desc& w_md) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                        w_md, b_md, dst, one, zero, zero, zero);
      return dnnl::convolution_forward::primitive_desc(d, make_attr(so.post), engine());
    };
    dnnl::convolution_forward::primitive_desc pd =
        so.weights.empty() ? make_pd(memory::desc({so.m, so.cin, 1, 1, 1}, dt::f32, tag::any)) : make_pd(so.packed_md);
    prim_scratch_ = std::max(prim_scratch_, pd.scratchpad_desc().get_size());
    so.prims.emplace(n_low, dnnl::convolution_forward(pd));
    if (!so.weights.empty()) return;
    // Sub-lattice (a, b, c): W[:, :, a, b, c] transposed to [M, C, 1, 1, 1]; the same bias.
    so.packed_md = pd.weights_desc();
    const std::int64_t subs = so.s[0] * so.s[1] * so.s[2];
    std::vector<float> tw(static_cast<std::size_t>(so.m * so.cin));
    const float* w = so.w->data<float>();  // [C, M, sd, sh, sw]
    for (std::int64_t sub = 0; sub < subs; ++sub) {
      for (std::int64_t mi = 0; mi < so.m; ++mi)
        for (std::int64_t ci = 0; ci < so.cin; ++ci)
          tw[static_cast<std::size_t>(mi * so.cin + ci)] = w[(ci * so.m + mi) * subs + sub];
      so.weights.push_back(pack(Tensor::view(DType::F32, {so.m, so.cin, 1, 1, 1}, tw.data()),
                                memory::desc({so.m, so.cin, 1, 1, 1}, dt::f32, tag::oidhw), so.packed_md));
    }
    std::vector<float> zeros(static_cast<std::size_t>(so.m), 0.0f);
    const Tensor bias = so.b ? *so.b : Tensor::view(DType::F32, {so.m}, zeros.data());
    so.bias.push_back(pack(bias, b_md, b_md));
  }

  // The up-sampled planes of low-res planes [low0, low0 + n_low), written (or, with `add`,
  // added) from `out` on: its window's planes, or where the last layer accumulates.
  void run_source(std::size_t si, std::span<const Tensor> inputs, ExecContext& ctx, std::int64_t low0,
                  std::int64_t n_low, float* out, bool add) const {
    const Source& so = sources_[si];
    float* t = reinterpret_cast<float*>(ctx.scratch + so.t_off);
    const auto low_at = static_cast<std::size_t>(low0 * so.lh * so.lw * so.cin);
    const float* x;
    if (const StreamedOperand* xs = ctx.in_stream(static_cast<std::size_t>(so.input_pos))) {
      // Each low-resolution plane is asked for once, in order: read straight into staging.
      const auto bytes = static_cast<std::size_t>(n_low * so.lh * so.lw * so.cin) * sizeof(float);
      QSM_ASSERT(bytes <= xs->staging_bytes, "conv chain streamed source larger than its staging");
      xs->read(xs->staging, low_at * sizeof(float), bytes);
      x = reinterpret_cast<const float*>(xs->staging);
    } else {
      x = inputs[static_cast<std::size_t>(so.input_pos)].data<float>() + low_at;
    }
    const auto& prim = so.prims.at(n_low);
    const memory::desc src({1, so.cin, n_low, so.lh, so.lw}, dt::f32, tag::ndhwc);
    const memory::desc dst({1, so.m, n_low, so.lh, so.lw}, dt::f32, tag::ndhwc);
    const std::int64_t subs = so.s[0] * so.s[1] * so.s[2];
    const std::size_t px = static_cast<std::size_t>(so.m) * sizeof(float);
    for (std::int64_t sub = 0; sub < subs; ++sub) {
      std::unordered_map<int, memory> args;
      args.emplace(DNNL_ARG_SRC, memory(src, engine(), const_cast<float*>(x)));
      args.emplace(DNNL_ARG_DST, memory(dst, engine(), t));
      args.emplace(DNNL_ARG_WEIGHTS, so.weights[static_cast<std::size_t>(sub)]);
      args.emplace(DNNL_ARG_BIAS, so.bias.front());
      if (prim_scratch_ > 0) {
        memory::desc smd({static_cast<memory::dim>(prim_scratch_)}, dt::u8, tag::a);
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, engine(), ctx.scratch + prim_scratch_off_));
      }
      prim.execute(stream(), args);
      stream().wait();
      const std::int64_t a = sub / (so.s[1] * so.s[2]), b = (sub / so.s[2]) % so.s[1], c = sub % so.s[2];
#pragma omp parallel for schedule(static)
      for (std::int64_t r = 0; r < n_low * so.lh; ++r) {
        const std::int64_t z = r / so.lh, y = r % so.lh;
        const float* trow = t + static_cast<std::size_t>(r * so.lw * so.m);
        float* wrow = out + static_cast<std::size_t>(((z * so.s[0] + a) * h_ + y * so.s[1] + b) * w_ * so.m);
        for (std::int64_t xx = 0; xx < so.lw; ++xx) {
          float* to = wrow + (xx * so.s[2] + c) * so.m;
          const float* from = trow + xx * so.m;
          if (add)
            for (std::int64_t k = 0; k < so.m; ++k) to[k] += from[k];
          else
            std::memcpy(to, from, px);
        }
      }
    }
  }

  memory pack(const Tensor& plain, const memory::desc& plain_md, const memory::desc& md) {
    return pack_constant(plain, plain_md, md, buffers_, packed_bytes_);
  }

  ChainSchedule cs_;
  std::vector<Layer> layers_;
  std::vector<Source> sources_;
  std::optional<Pool> pool_;
  std::vector<std::map<CallKey, std::vector<Call>>> calls_;                        // per layer
  std::vector<std::vector<std::vector<std::pair<memory::desc, memory>>>> packed_;  // layer, part
  std::vector<std::vector<memory>> bias_;                                          // layer, part
  std::vector<std::shared_ptr<Buffer>> buffers_;
  std::int64_t d_ = 0, h_ = 0, w_ = 0;
  std::size_t scratch_bytes_ = 0, prim_scratch_ = 0, prim_scratch_off_ = 0;
  bool bf16_ = conv_precision() == ConvPrecision::Bf16;  // parts in bf16 (see the top)
  std::size_t bf16_stage_ = 0, bf16_stage_off_ = 0;      // a part's input planes in bf16
  std::int64_t in_planes_ = 0, out_planes_ = 0;  // most planes one slab reads of the input, writes of the output
  std::int64_t packed_bytes_ = 0;
  std::int64_t derived_bytes_ = 0;  // a Winograd layer's joined and transformed weights while it packs
  int inplace_ = -1;
  int wg_threads_ = 1;  // the Winograd parts' scratch is sized for this many workers
  std::string impl_, wg_impl_;
};

}  // namespace

std::unique_ptr<Kernel> make_conv_chain(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>&,
                                        LayoutDecision& dec) {
  if (n.chain.empty()) return nullptr;
  return std::make_unique<ConvChainKernel>(g, n, dec);
}

}  // namespace qsmcore::kernels::onednn
