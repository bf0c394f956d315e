// The backend-independent half of a "qsm.ConvChain" step (graph/passes/stream_conv_chains.cpp):
// how its nodes group into layers, up-sampling sources and a closing pooling, and the order in
// which depth slabs of each layer are computed. Each backend's kernel (kernels/onednn/conv_chain.cpp,
// kernels/wasm/conv_chain.cpp) supplies the arithmetic of one slab; both walk the same schedule,
// so a plane is computed from the same input planes whichever backend runs it.
//
// Schedule: repeatedly, each layer in order computes up to `slab` new planes, as far as the
// planes its input layer has produced allow (plane z needs input planes up to z + back pad).
// Each intermediate layer keeps a window of planes: the next layer's reach behind plus the newly
// computed slab; consumed planes are dropped from the window's front. Output planes are computed
// exactly once. The same walk runs at construction (dry: sizing the windows) and at run time.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "graph/typed_graph.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels {

// `node` points into the chain step's node: valid while the kernel is built, not after.
struct ChainPart {
  const graph::TNode* node = nullptr;
  int input_pos = -1;   // first layer: position of its activation among the step's inputs
  int source = -1;      // first layer: or the up-sampling source it reads (index)
  int addend_pos = -1;  // a layer with a residual: position of the addend among the inputs
  std::int64_t cin = 0;
};

struct ChainLayer {
  std::vector<ChainPart> parts;  // parts after the first add onto the first's output (Sum)
  std::int64_t m = 0;            // output channels
  std::int64_t pf = 0, pb = 0;   // depth pads (front, back) = reach behind / ahead
  std::int64_t cap = 0;          // planes its window holds (sized by the dry walk)
  int addend_source = -1;        // the last layer: an up-sampling whose planes it adds onto (index)
  int mask_pos = -1;             // Where(mask, output, fill) after it: the mask's position among the inputs
  float mask_fill = 0.0f;        // and the value where the mask is false
  std::int64_t max_out = 0;      // most planes one slab of it writes (sized by the dry walk)
  // Its slabs start and end on even planes (or the volume's end): set by a backend whose kernel
  // computes the layer in 2-plane tiles (the native Winograd F(2³, 3³)), so that every tile lies
  // in one slab and reads real planes, and the output is the same bits whatever the slabs.
  bool even_slabs = false;
};

/// An up-sampling ConvTranspose (kernel = stride) feeding a first-layer part, run a few
/// low-resolution planes at a time into its own window; or (`addend`) adding onto the last
/// layer's output, made by each of its slabs where that layer accumulates (no window: the last
/// layer's slabs are then whole sub-lattice planes).
struct ChainSource {
  const graph::TNode* node = nullptr;
  bool addend = false;
  int input_pos = -1;
  std::int64_t cin = 0, m = 0, s[3] = {1, 1, 1}, ld = 0, lh = 0, lw = 0;  // strides, low-res extent
  std::int64_t cap = 0;
};

/// A pooling over disjoint windows ending the chain.
struct ChainPool {
  const graph::TNode* node = nullptr;
  std::int64_t k[3] = {1, 1, 1};
};

class ChainSchedule {
 public:
  /// Groups the chain node's nodes; the kernel's dry_walk then sizes the windows.
  ChainSchedule(const graph::TypedGraph& g, const graph::TNode& n);

  std::vector<ChainLayer> layers;
  std::vector<ChainSource> sources;
  std::optional<ChainPool> pool;
  std::int64_t slab = 2, d = 0, h = 0, w = 0;

  /// Layers keeping a plane window: every one but the last, and the last too before a pooling.
  std::size_t windows() const { return pool ? layers.size() : layers.size() - 1; }
  /// An input whose bytes the output may take, or -1 (see the definition).
  int shareable_input() const;

  /// One slab of layer j: n_out planes from absolute plane abs_plane, out of n_in input planes
  /// starting at in_plane of its input (window-relative for j > 0; absolute for the first layer,
  /// whose up-sampled inputs start at source_lo[s] in their windows), into out_plane of its
  /// window (absolute for the last layer unless it is pooled). pad_f and pad_b are the depth pads
  /// of this slab: the real ones at the volume's faces, 0 inside.
  struct Slab {
    std::size_t layer;
    std::int64_t n_in, n_out, pad_f, pad_b, in_plane, out_plane, abs_plane;
    const std::vector<std::int64_t>& source_lo;
  };
  /// conv(Slab); shift(j, from, planes): layer j's window drops its first `from` planes, keeping
  /// the next `planes`; source(s, low0, n_low, out_plane) and source_shift(s, from, planes): the
  /// same for an up-sampling source; pool(abs_plane, planes): whole pooling windows of the last
  /// layer's window, from its first plane. All state is local, so concurrent runs of one plan
  /// (tiles in flight) do not share it.
  template <class Conv, class Shift, class Src, class SrcShift, class PoolFn>
  void walk(Conv&& conv, Shift&& shift, Src&& source, SrcShift&& source_shift, PoolFn&& pool_fn, bool dry);
  /// The dry walk: sizes the windows; conv(Slab) sees every slab shape the run will.
  template <class Conv>
  void dry_walk(Conv&& conv) {
    walk(
        conv, [](std::size_t, std::int64_t, std::int64_t) {},
        [](std::size_t, std::int64_t, std::int64_t, std::int64_t) {}, [](std::size_t, std::int64_t, std::int64_t) {},
        [](std::int64_t, std::int64_t) {}, true);
  }

 private:
  // The constructor's steps, per node of the chain in order.
  void add_pool(const graph::TNode& c, const std::vector<std::int64_t>& in_shape);
  void add_source(const graph::TypedGraph& g, const graph::TNode& n, const graph::TNode& c);
  void add_conv(const graph::TypedGraph& g, const graph::TNode& n, const graph::TNode& c, int prev_out,
                const std::vector<int>& source_out);
};

template <class Conv, class Shift, class Src, class SrcShift, class PoolFn>
void ChainSchedule::walk(Conv&& conv, Shift&& shift, Src&& source, SrcShift&& source_shift, PoolFn&& pool_fn,
                         bool dry) {
  const std::size_t nl = layers.size();
  std::vector<std::int64_t> hi(nl + 1, 0), lo(nl + 1, 0);
  std::vector<std::int64_t> shi(sources.size(), 0), slo(sources.size(), 0);
  hi[0] = d;
  while (hi[nl] < d) {
    bool progressed = false;
    for (std::size_t j = 1; j <= nl; ++j) {
      ChainLayer& l = layers[j - 1];
      const std::int64_t limit = hi[j - 1] == d ? d : hi[j - 1] - l.pb;
      // Even slabs take 2 planes where a budget's finest slab is 1 (else they would never move).
      const std::int64_t step = l.even_slabs ? std::max<std::int64_t>(slab, 2) : slab;
      std::int64_t target = std::min({limit, hi[j] + step, d});
      // A last layer adding an up-sampling's planes computes whole sub-lattice planes of it.
      if (j == nl && l.addend_source >= 0 && target < d) {
        const std::int64_t s = sources[static_cast<std::size_t>(l.addend_source)].s[0];
        target = target / s * s;
      }
      if (l.even_slabs && target < d) target = target / 2 * 2;
      if (target <= hi[j]) continue;
      const std::int64_t in_lo = std::max<std::int64_t>(0, hi[j] - l.pf);
      const std::int64_t in_hi = std::min(d, target + l.pb);
      const std::int64_t pad_f = in_lo - (hi[j] - l.pf), pad_b = target + l.pb - in_hi;
      if (j == 1) {
        for (std::size_t si = 0; si < sources.size(); ++si) {
          ChainSource& so = sources[si];
          if (so.addend) continue;  // made by the last layer's slabs themselves
          // Planes before in_lo are never read again; new planes in whole low-res planes.
          const std::int64_t keep = std::min(shi[si], std::max(slo[si], in_lo));
          if (keep > slo[si] && shi[si] > keep) source_shift(si, keep - slo[si], shi[si] - keep);
          slo[si] = keep;
          if (shi[si] < slo[si]) shi[si] = slo[si];
          const std::int64_t need = std::min(d, (in_hi + so.s[0] - 1) / so.s[0] * so.s[0]);
          if (need > shi[si]) {
            if (dry) so.cap = std::max(so.cap, need - slo[si]);
            QSM_ASSERT(need - slo[si] <= so.cap, "conv chain source window overflow");
            source(si, shi[si] / so.s[0], (need - shi[si]) / so.s[0], shi[si] - slo[si]);
            shi[si] = need;
          }
        }
      }
      if (j < nl) {
        // Planes of layer j the next layer no longer reaches back to are dropped.
        const std::int64_t keep = std::min(hi[j], std::max(lo[j], hi[j + 1] - layers[j].pf));
        if (keep > lo[j] && hi[j] > keep) shift(j - 1, keep - lo[j], hi[j] - keep);
        lo[j] = keep;
        if (dry) l.cap = std::max(l.cap, target - lo[j]);
        QSM_ASSERT(target - lo[j] <= l.cap, "conv chain window overflow");
      }
      if (j == nl && pool) {
        if (dry) l.cap = std::max(l.cap, target - lo[j]);
        QSM_ASSERT(target - lo[j] <= l.cap, "conv chain window overflow");
      }
      if (dry) l.max_out = std::max(l.max_out, target - hi[j]);
      conv(Slab{j - 1, in_hi - in_lo, target - hi[j], pad_f, pad_b, in_lo - lo[j - 1], hi[j] - lo[j], hi[j], slo});
      hi[j] = target;
      progressed = true;
      if (j == nl && pool) {
        // Whole pooling windows go to the output; a part of one stays for the next slab.
        const std::int64_t whole = target / pool->k[0] * pool->k[0];
        if (whole > lo[j]) {
          pool_fn(lo[j], whole - lo[j]);
          if (target > whole) shift(j - 1, whole - lo[j], target - whole);
          lo[j] = whole;
        }
      }
    }
    QSM_ASSERT(progressed, "conv chain schedule stalled");
  }
}

}  // namespace qsmcore::kernels
