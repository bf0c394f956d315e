// "qsm.ConvChain" on SIMD128: a chain of same-size 3-D convolutions (and a closing pooling) run
// as depth slabs on the schedule of kernels/conv_chain_schedule.h, so the wasm heap holds each
// intermediate as a window of a few planes instead of whole volumes (IR2QSM's, QSMnet's and
// LPCNN's blocks). Activations stay channels-first: a layer's window is [channel][plane][h][w],
// `cap` planes per channel, and the chain's input, residuals and output are read and written
// in place through plane views. Each slab is the layer's own SIMD128 Conv computing a range of
// output planes (plane_kernel.h): the same rows, taps and order of accumulation as the
// whole-volume kernel, so a chained run equals an unchained one to the bit.
//
// An up-sampling source (a U-Net decoder's ConvTranspose, kernel = stride) is the SIMD128
// ConvTranspose computing a few planes at a time into its own window, [channel][plane][h][w].
#include <cstring>

#include "kernels/conv_chain_schedule.h"
#include "kernels/wasm/backend.h"
#include "kernels/wasm/common.h"
#include "kernels/wasm/plane_kernel.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::wasm {
namespace {

class ConvChainKernel final : public Kernel {
 public:
  ConvChainKernel(const graph::TypedGraph& g, const graph::TNode& n) : cs_(g, n) {
    hw_ = cs_.h * cs_.w;
    std::size_t work = 0;
    for (const ChainSource& cso : cs_.sources) {
      sources_.push_back(make_deconv_planes(g, *cso.node));
      QSM_ASSERT(sources_.back() != nullptr, "a simd128 conv chain with an up-sampling it cannot run");
      work = std::max(work, sources_.back()->scratch_bytes());
      packed_bytes_ += sources_.back()->packed_bytes();
    }
    for (const ChainLayer& cl : cs_.layers) {
      auto& parts = parts_.emplace_back();
      for (const ChainPart& cp : cl.parts) {
        parts.push_back(make_conv_planes(g, *cp.node));
        // The pass asked before the weights were in memory; only non-finite ones decline now.
        if (parts.back() == nullptr)
          throw Error(ErrorKind::Unsupported, "convolution '" + cp.node->node.name +
                                                  "' has weights the simd128 kernel cannot run (non-finite); "
                                                  "run it without conv chains (--no-conv-chains)");
        work = std::max(work, parts.back()->scratch_bytes());
        packed_bytes_ += parts.back()->packed_bytes();
      }
    }
    if (cs_.pool) {
      pool_ = make_pool_planes(g, *cs_.pool->node);
      QSM_ASSERT(pool_ != nullptr, "a simd128 conv chain with a pooling it cannot run");
      pooled_hw_ = cs_.h / cs_.pool->k[1] * (cs_.w / cs_.pool->k[2]);
    }
    cs_.dry_walk([](const ChainSchedule::Slab&) {});
    std::size_t off = 0;
    for (std::size_t j = 0; j < cs_.windows(); ++j) {
      window_off_.push_back(off);
      off += round64(static_cast<std::size_t>(cs_.layers[j].cap * cs_.layers[j].m * hw_) * sizeof(float));
    }
    for (const ChainSource& cso : cs_.sources) {
      source_off_.push_back(off);
      off += round64(static_cast<std::size_t>(cso.cap * cso.m * hw_) * sizeof(float));
    }
    // The pass reserved a fixed share of the intermediates for the windows, so the chain's
    // memory stays linear in the voxel count; the windows always fit in it.
    const auto reserved = static_cast<std::size_t>(n.node.attrs.get_int("window_bytes", 0));
    QSM_ASSERT(off <= reserved || reserved == 0, "conv chain windows exceed their reservation");
    work_off_ = round64(std::max(off, reserved));
    work_bytes_ = work;
    inplace_ = cs_.shareable_input();
    impl_ = "simd128:conv_chain(" + std::to_string(cs_.layers.size()) + ")";
  }

  std::size_t scratch_bytes() const override { return work_off_ + work_bytes_; }
  std::int64_t packed_bytes() const override { return packed_bytes_; }
  void relocate_packed() override {
    for (auto& s : sources_) s->relocate_packed();
    for (auto& parts : parts_)
      for (auto& p : parts) p->relocate_packed();
    if (pool_) pool_->relocate_packed();
  }
  std::string impl_name() const override { return impl_; }
  int inplace_input() const override { return inplace_; }
  bool reads_input(std::size_t i) const override {
    for (const auto& p : cs_.layers.front().parts)
      if (p.input_pos >= 0 && static_cast<std::size_t>(p.input_pos) == i) return true;
    for (const auto& so : cs_.sources)
      if (static_cast<std::size_t>(so.input_pos) == i) return true;
    for (const auto& l : cs_.layers)
      if (l.parts.front().addend_pos >= 0 && static_cast<std::size_t>(l.parts.front().addend_pos) == i) return true;
    return false;  // weights were packed
  }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    QSM_ASSERT(ctx.scratch_bytes >= scratch_bytes(), "scratch block smaller than a kernel's scratchpad");
    const std::size_t to_output = cs_.pool ? cs_.layers.size() : cs_.layers.size() - 1;  // the layer writing it
    const std::int64_t whole = cs_.d * hw_;                                              // a volume's channel stride
    ExecContext work = ctx;
    work.scratch = ctx.scratch + work_off_;
    work.scratch_bytes = work_bytes_;
    auto window = [&](std::size_t j) { return reinterpret_cast<float*>(ctx.scratch + window_off_[j]); };
    auto source_window = [&](std::size_t s) { return reinterpret_cast<float*>(ctx.scratch + source_off_[s]); };
    // Drops the first `from` planes of a window of `cap` planes per channel, keeping `planes`.
    auto shift = [&](float* win, std::int64_t channels, std::int64_t cap, std::int64_t from, std::int64_t planes) {
      for (std::int64_t c = 0; c < channels; ++c) {
        float* base = win + static_cast<std::ptrdiff_t>(c * cap * hw_);
        std::memmove(base, base + static_cast<std::ptrdiff_t>(from * hw_),
                     static_cast<std::size_t>(planes * hw_) * sizeof(float));
      }
    };
    auto tensor = [&](int pos) {
      return PlaneView{const_cast<float*>(inputs[static_cast<std::size_t>(pos)].data<float>()), whole, 0};
    };
    float* out = outputs[0].data<float>();
    cs_.walk(
        [&](const ChainSchedule::Slab& sl) {
          const std::size_t j = sl.layer;
          const ChainLayer& l = cs_.layers[j];
          // Window-relative plane i holds absolute plane z0 + i.
          const PlaneView y = j == to_output ? PlaneView{out, whole, 0}
                                             : PlaneView{window(j), l.cap * hw_, sl.abs_plane - sl.out_plane};
          const std::int64_t in_lo = std::max<std::int64_t>(0, sl.abs_plane - l.pf);
          const auto od0 = static_cast<int>(sl.abs_plane), od1 = static_cast<int>(sl.abs_plane + sl.n_out);
          for (std::size_t k = 0; k < l.parts.size(); ++k) {
            const ChainPart& p = l.parts[k];
            PlaneView x;
            if (j > 0) {
              x = {window(j - 1), cs_.layers[j - 1].cap * hw_, in_lo - sl.in_plane};
            } else if (p.source >= 0) {
              const auto s = static_cast<std::size_t>(p.source);
              x = {source_window(s), cs_.sources[s].cap * hw_, sl.source_lo[s]};
            } else {
              x = tensor(p.input_pos);
            }
            // A later part adds onto the first's output; a layer's residual comes from its input.
            const PlaneView add = k > 0 ? y : p.addend_pos >= 0 ? tensor(p.addend_pos) : PlaneView{};
            parts_[j][k]->run_planes(x, add, y, od0, od1, work);
          }
        },
        [&](std::size_t j, std::int64_t from, std::int64_t planes) {
          shift(window(j), cs_.layers[j].m, cs_.layers[j].cap, from, planes);
        },
        [&](std::size_t s, std::int64_t low0, std::int64_t n_low, std::int64_t out_plane) {
          const ChainSource& so = cs_.sources[s];
          const PlaneView x{const_cast<float*>(inputs[static_cast<std::size_t>(so.input_pos)].data<float>()),
                            so.ld * so.lh * so.lw, 0};
          const std::int64_t od0 = low0 * so.s[0];
          const PlaneView y{source_window(s), so.cap * hw_, od0 - out_plane};
          sources_[s]->run_planes(x, {}, y, static_cast<int>(od0), static_cast<int>(od0 + n_low * so.s[0]), work);
        },
        [&](std::size_t s, std::int64_t from, std::int64_t planes) {
          shift(source_window(s), cs_.sources[s].m, cs_.sources[s].cap, from, planes);
        },
        [&](std::int64_t abs_plane, std::int64_t planes) {
          const ChainLayer& l = cs_.layers.back();
          const std::int64_t k0 = cs_.pool->k[0];
          const PlaneView x{window(cs_.layers.size() - 1), l.cap * hw_, abs_plane};
          const PlaneView y{out, cs_.d / k0 * pooled_hw_, 0};
          pool_->run_planes(x, {}, y, static_cast<int>(abs_plane / k0), static_cast<int>((abs_plane + planes) / k0),
                            work);
        },
        /*dry=*/false);
  }

 private:
  ChainSchedule cs_;
  std::vector<std::vector<std::unique_ptr<PlaneKernel>>> parts_;  // per layer, per part
  std::vector<std::unique_ptr<PlaneKernel>> sources_;             // per up-sampling source
  std::unique_ptr<PlaneKernel> pool_;
  std::vector<std::size_t> window_off_;  // per windowed layer: byte offset in scratch
  std::vector<std::size_t> source_off_;  // per source: byte offset of its window
  std::int64_t hw_ = 0, pooled_hw_ = 0;
  std::size_t work_off_ = 0, work_bytes_ = 0;  // the parts' shared scratch, after the windows
  std::int64_t packed_bytes_ = 0;
  int inplace_ = -1;
  std::string impl_;
};

}  // namespace

bool can_run_conv_chain(const graph::TypedGraph& g, const graph::TNode& n) {
  // One convolution alone gains only the streaming of its operands under a budget (issue #16),
  // which this backend does not do: it runs on the whole volume.
  const ChainSchedule cs(g, n);
  if (cs.layers.size() == 1 && !cs.pool) return false;
  // An up-sampling added onto the last layer (the pass makes those for oneDNN only).
  for (const auto& so : cs.sources)
    if (so.addend) return false;
  for (const auto& c : n.chain) {
    if (c.node.op_type == "Conv") {
      if (!conv_planes_supported(g, c)) return false;
    } else if (c.node.op_type == "MaxPool" || c.node.op_type == "AveragePool") {
      if (!make_pool_planes(g, c)) return false;  // a pooling kernel holds no weights: cheap to ask
    } else if (!deconv_planes_supported(g, c)) {  // an up-sampling source
      return false;
    }
  }
  return true;
}

void register_conv_chain_kernel(KernelTable& table) {
  table["qsm.ConvChain"] = [](const graph::TypedGraph& g, const graph::TNode& n) -> std::unique_ptr<Kernel> {
    if (n.chain.empty() || !can_run_conv_chain(g, n)) return nullptr;
    return std::make_unique<ConvChainKernel>(g, n);
  };
}

}  // namespace qsmcore::kernels::wasm
