// Chains of same-size 3-D convolutions run as one step that streams depth slabs through them
// (the kernel: kernels/onednn/conv_chain.cpp). Layer-by-layer execution holds each layer's
// whole input and output; a chain holds its input and output plus, per intermediate, only the
// few depth planes the next convolution's window still needs. LPCNN's 17-conv proximal network
// at 64³ drops from two 32-channel volumes to 3 planes per layer; a U-Net's full-resolution
// decoder keeps its skip and up-sampled inputs and nothing else.
//
// A chain is layers l1 … lL (L ≥ 1), each a Conv with stride 1, dilation 1, one group, constant
// weights, output the size of its input, batch 1, and activation post-ops; l1 may be a Sum
// chain (one conv per concatenated input, from split_concat_convs) reading several full
// tensors; l(j+1) reads l(j)'s output, which nothing else reads, and may add a residual computed
// before the chain (LPCNN's and ResNet-style blocks: conv, conv + block input). A pooling over
// disjoint windows may end a chain (a U-Net's down-sampling), or, on oneDNN, an up-sampling
// adding onto the last layer's output (an octave convolution's sum, xQSM). On oneDNN a layer's
// output may also be masked by a Where (a ReLU's backward: NeXtQSM's VJP), slab by slab.
//
// Every other such convolution is a chain of one part, whose Sum (a split concatenation's
// partial sum) is then a residual read plane by plane. In memory it holds what a whole-volume
// primitive holds, but run as depth slabs it can stream its input, residual and output through
// the spill file under a budget (issue #16: xQSM's and NeXtQSM's largest steps are single
// convolutions). It is a chain whether or not a budget asks for that, so a budgeted run makes
// the same calls on the same planes as an unbudgeted one and its output is the same to the bit.
#include <algorithm>
#include <map>

#include "graph/conv_geometry.h"
#include "graph/passes/passes.h"
#include "graph/passes/rewrite_util.h"

namespace qsmcore::graph {
namespace {

// Each intermediate keeps a window of (slab + kd − 1) depth planes. The slab is sized so every
// window is at most 1/share of its intermediate (share: kChainWindowShare unless a budget asks
// for finer slabs), and the kernel reserves exactly that share: the chain's memory stays linear
// in the voxel count (what NetworkMemory's fixed + per-voxel model assumes) while the slabs are
// as thick as that allows. Volumes thinner than share · (kd + 1) planes are not streamed.

// A live node of this op on a batch-1 f32 3-D volume with constant f32 weights and bias: what
// both a chain layer and an absorbed up-sampling must be.
bool volume_op_with_constant_weights(const TypedGraph& g, const TNode& n, const char* op) {
  if (n.dead || n.node.op_type != op || n.in.size() < 2 || n.in[0] < 0 || !n.chain.empty()) return false;
  const TValue& x = g.values[static_cast<std::size_t>(n.in[0])];
  const TValue& w = g.values[static_cast<std::size_t>(n.in[1])];
  if (x.shape.size() != 5 || x.shape[0] != 1 || x.dtype != DType::F32 || !w.is_const() || w.dtype != DType::F32)
    return false;
  return n.in.size() < 3 || n.in[2] < 0 || g.values[static_cast<std::size_t>(n.in[2])].is_const();
}

bool slab_conv(const TypedGraph& g, const TNode& n) {
  if (!volume_op_with_constant_weights(g, n, "Conv")) return false;
  const TValue& x = g.values[static_cast<std::size_t>(n.in[0])];
  const TValue& w = g.values[static_cast<std::size_t>(n.in[1])];
  const TValue& y = g.values[static_cast<std::size_t>(n.out[0])];
  const ConvGeometry geo = conv_geometry(n.node, x.shape, w.shape);
  if (geo.group != 1) return false;
  for (std::size_t i = 0; i < 3; ++i) {
    if (geo.strides[i] != 1 || geo.dilations[i] != 1 || y.shape[2 + i] != x.shape[2 + i]) return false;
    if (geo.pads_begin[i] + geo.pads_end[i] != geo.kernel[i] - 1) return false;
  }
  return true;
}

bool sum_index(const TNode& n, int& addend) {
  addend = -1;
  for (const auto& p : n.post)
    if (p.kind == PostOp::Kind::Sum) addend = n.in[static_cast<std::size_t>(p.sum_input)];
  return addend >= 0;
}

// An up-sampling ConvTranspose (kernel = stride, no pads) the chain can run a few planes at a
// time from its low-resolution input.
bool slab_upsampling(const TypedGraph& g, const TNode& n) {
  if (!volume_op_with_constant_weights(g, n, "ConvTranspose")) return false;
  const TValue& x = g.values[static_cast<std::size_t>(n.in[0])];
  const TValue& w = g.values[static_cast<std::size_t>(n.in[1])];
  const TValue& y = g.values[static_cast<std::size_t>(n.out[0])];
  for (const auto& p : n.post)
    if (p.kind == PostOp::Kind::Sum) return false;
  const ConvGeometry geo = conv_transpose_geometry(n.node, x.shape, w.shape);
  if (geo.group != 1) return false;
  for (std::size_t i = 0; i < 3; ++i)
    if (geo.kernel[i] != geo.strides[i] || geo.dilations[i] != 1 || geo.pads_begin[i] != 0 || geo.pads_end[i] != 0 ||
        y.shape[2 + i] != geo.strides[i] * x.shape[2 + i])
      return false;
  return true;
}

// An up-sampling (as above, but adding onto `y` as its first post-op) the chain making `y` can
// run too: it makes the up-sampled planes of a slab and adds them where its last layer
// accumulates (an octave convolution's high-frequency output, xQSM's conv + up-sampled sum).
bool slab_upsampling_onto(const TypedGraph& g, const TNode& n, int y) {
  if (n.post.empty() || n.post.front().kind != PostOp::Kind::Sum || n.in[0] == y ||
      n.in[static_cast<std::size_t>(n.post.front().sum_input)] != y)
    return false;
  TNode bare = n;  // the other post-ops follow the sum; the chain's last layer applies them
  bare.post.erase(bare.post.begin());
  return slab_upsampling(g, bare);
}

// A layer output a following sum may take: no activation between the convolution and the sum.
bool no_activation(const TNode& n) {
  return std::all_of(n.post.begin(), n.post.end(), [](const PostOp& p) { return p.kind == PostOp::Kind::Sum; });
}

// A pooling over whole, disjoint windows (kernel = stride, no pads, dividing the volume) of a
// batch-1 f32 3-D volume: a chain ending in it pools each group of planes as soon as the last
// layer has made it, so the full-resolution map before a U-Net's down-sampling is never whole.
bool slab_pooling(const TypedGraph& g, const TNode& n) {
  if (n.dead || (n.node.op_type != "MaxPool" && n.node.op_type != "AveragePool") || n.in.empty() || n.in[0] < 0 ||
      !n.post.empty() || !n.chain.empty())
    return false;
  for (std::size_t i = 1; i < n.out.size(); ++i)
    if (n.out[i] >= 0) return false;  // MaxPool's Indices
  const TValue& x = g.values[static_cast<std::size_t>(n.in[0])];
  if (x.shape.size() != 5 || x.shape[0] != 1 || x.dtype != DType::F32) return false;
  const ConvGeometry geo = pool_geometry(n.node, x.shape);
  for (std::size_t i = 0; i < 3; ++i)
    if (geo.kernel[i] != geo.strides[i] || geo.dilations[i] != 1 || geo.pads_begin[i] != 0 || geo.pads_end[i] != 0 ||
        geo.out_spatial[i] * geo.strides[i] != x.shape[2 + i])
      return false;
  return true;
}

// Where(mask, y, c) with a bool mask of y's shape and a constant scalar c: a ReLU's backward
// (NeXtQSM's VJP keeps the gradient where the forward activation was positive). A chain applies
// it to each slab its layer writes, so the masked full-resolution gradient between two backward
// convolutions stays a few planes of a window instead of a whole tensor written, read, masked,
// written and read again (under a budget, 1.3 GB of spill traffic per such Where in NeXtQSM).
bool masks_value(const TypedGraph& g, const TNode& n, int y) {
  if (n.dead || n.node.op_type != "Where" || n.in.size() != 3 || n.out.empty() || n.in[1] != y || n.in[0] < 0 ||
      n.in[2] < 0 || n.in[0] == y)
    return false;
  const TValue& m = g.values[static_cast<std::size_t>(n.in[0])];
  const TValue& c = g.values[static_cast<std::size_t>(n.in[2])];
  const TValue& yv = g.values[static_cast<std::size_t>(y)];
  const TValue& out = g.values[static_cast<std::size_t>(n.out[0])];
  return m.dtype == DType::Bool && m.shape == yv.shape && !m.is_const() && c.is_const() && c.dtype == DType::F32 &&
         c.constant && c.constant->numel() == 1 && out.dtype == DType::F32 && out.shape == yv.shape;
}

std::int64_t weight_bytes(const TypedGraph& g, const TNode& n) {
  std::int64_t b = 0;
  for (std::size_t k = 1; k < 3 && k < n.in.size(); ++k)
    if (n.in[k] >= 0) b += static_cast<std::int64_t>(g.values[static_cast<std::size_t>(n.in[k])].plain_bytes());
  return b;
}

}  // namespace

int stream_conv_chains(TypedGraph& g, std::uint64_t max_weight_bytes, const ChainFilter& accept,
                       std::int64_t window_share, bool upsampled_addends, bool masks) {
  const std::int64_t share = std::max<std::int64_t>(window_share, 1);
  const std::size_t n_nodes = g.nodes.size();
  std::vector<int> producer(g.values.size(), -1);
  std::vector<int> readers(g.values.size(), 0);
  for (std::size_t i = 0; i < n_nodes; ++i) {
    if (g.nodes[i].dead) continue;
    for (int o : g.nodes[i].out)
      if (o >= 0) producer[static_cast<std::size_t>(o)] = static_cast<int>(i);
    std::vector<int> seen;
    for (int x : g.nodes[i].in)
      if (x >= 0 && std::find(seen.begin(), seen.end(), x) == seen.end())
        seen.push_back(x), ++readers[static_cast<std::size_t>(x)];
  }
  auto single_use = [&](int v) {
    return readers[static_cast<std::size_t>(v)] == 1 && g.values[static_cast<std::size_t>(v)].graph_output < 0;
  };
  // The masking Where (masks_value) that alone reads y, where the backend applies masks.
  auto mask_after = [&](int y) {
    if (!masks || !single_use(y)) return -1;
    for (std::size_t j = static_cast<std::size_t>(producer[static_cast<std::size_t>(y)]) + 1; j < n_nodes; ++j)
      if (!g.nodes[j].dead && std::find(g.nodes[j].in.begin(), g.nodes[j].in.end(), y) != g.nodes[j].in.end())
        return masks_value(g, g.nodes[j], y) ? static_cast<int>(j) : -1;
    return -1;
  };
  // A layer ending at node e: e and the Sum chain before it (parts in order).
  auto layer_of = [&](int e, std::vector<int>& parts) {
    parts.assign(1, e);
    int addend = -1;
    while (sum_index(g.nodes[static_cast<std::size_t>(parts.front())], addend)) {
      const int p = producer[static_cast<std::size_t>(addend)];
      if (p < 0 || !slab_conv(g, g.nodes[static_cast<std::size_t>(p)]) || !single_use(addend)) return false;
      parts.insert(parts.begin(), p);
    }
    return true;
  };
  // A later layer reads the previous output as its data input; a Sum it may have adds a tensor
  // computed before the chain (a residual), read plane by plane like the chain's input.
  auto later_layer_ok = [&](int ni, int prev_out) {
    int addend = -1;
    if (!sum_index(g.nodes[static_cast<std::size_t>(ni)], addend)) return true;
    return addend != prev_out &&
           g.values[static_cast<std::size_t>(addend)].shape ==
               g.values[static_cast<std::size_t>(g.nodes[static_cast<std::size_t>(ni)].out[0])].shape;
  };

  int chains = 0;
  std::vector<bool> taken(n_nodes, false);
  std::vector<std::vector<TNode>> replacement(n_nodes);
  std::vector<std::pair<int, TNode>> late;  // chains placed after the other chains at their place
  // Chain from node i (a convolution): its layer and the ones it feeds; with `single`, node i
  // alone (and a pooling after it).
  auto try_chain = [&](std::size_t i, bool single) {
    if (taken[i] || !slab_conv(g, g.nodes[i])) return;
    std::vector<int> first;
    if (single)
      first.assign(1, static_cast<int>(i));  // one part: a Sum onto another part's output is a residual
    else if (!layer_of(static_cast<int>(i), first))
      return;
    bool first_free = true;
    for (int p : first) first_free = first_free && !taken[static_cast<std::size_t>(p)];
    if (!first_free) return;
    // Extend with single-part layers reading the previous output.
    std::vector<int> rest;
    std::int64_t wbytes = 0;
    for (int p : first) wbytes += weight_bytes(g, g.nodes[static_cast<std::size_t>(p)]);
    int tail = static_cast<int>(i);
    // Layers whose output a masking Where takes (layer's last node → the Where).
    std::map<int, int> where_of;
    auto absorb_mask = [&](int conv) {
      if (const int wh = mask_after(g.nodes[static_cast<std::size_t>(conv)].out[0]); wh >= 0) where_of[conv] = wh;
    };
    auto layer_out = [&](int conv) {
      const auto it = where_of.find(conv);
      return g.nodes[static_cast<std::size_t>(it == where_of.end() ? conv : it->second)].out[0];
    };
    absorb_mask(tail);
    while (!single) {
      const int y = layer_out(tail);
      if (!single_use(y)) break;
      int next = -1;
      for (std::size_t j = static_cast<std::size_t>(tail) + 1; j < n_nodes && next < 0; ++j)
        if (!g.nodes[j].dead && std::find(g.nodes[j].in.begin(), g.nodes[j].in.end(), y) != g.nodes[j].in.end())
          next = static_cast<int>(j);
      if (next < 0 || taken[static_cast<std::size_t>(next)] || !slab_conv(g, g.nodes[static_cast<std::size_t>(next)]) ||
          g.nodes[static_cast<std::size_t>(next)].in[0] != y || !later_layer_ok(next, y))
        break;
      const std::int64_t wb = weight_bytes(g, g.nodes[static_cast<std::size_t>(next)]);
      if (max_weight_bytes > 0 && static_cast<std::uint64_t>(wbytes + wb) > max_weight_bytes) break;
      wbytes += wb;
      rest.push_back(next);
      tail = next;
      absorb_mask(tail);
    }
    // A pooling reading the last layer's output ends the chain.
    int pool = -1;
    if (const int y = layer_out(tail); single_use(y))
      for (std::size_t j = static_cast<std::size_t>(tail) + 1; j < n_nodes && pool < 0; ++j)
        if (!g.nodes[j].dead && !g.nodes[j].in.empty() && g.nodes[j].in[0] == y && !taken[j] &&
            slab_pooling(g, g.nodes[j]))
          pool = static_cast<int>(j);
    // Or an up-sampling adding onto it ends the chain (the chain's output is then the sum). Not
    // onto a masked output: the kernel adds the up-sampled planes before its last layer's sum.
    int addend_up = -1;
    if (const int y = g.nodes[static_cast<std::size_t>(tail)].out[0];
        upsampled_addends && pool < 0 && where_of.count(tail) == 0 && single_use(y) &&
        no_activation(g.nodes[static_cast<std::size_t>(tail)]))
      for (std::size_t j = static_cast<std::size_t>(tail) + 1; j < n_nodes && addend_up < 0; ++j)
        if (!g.nodes[j].dead && !taken[j] && slab_upsampling_onto(g, g.nodes[j], y)) {
          const std::int64_t wb = weight_bytes(g, g.nodes[j]);
          if (max_weight_bytes > 0 && static_cast<std::uint64_t>(wbytes + wb) > max_weight_bytes) break;
          wbytes += wb;
          addend_up = static_cast<int>(j);
        }
    if (rest.empty() && pool < 0 && addend_up < 0 && !single) return;
    // First-layer inputs made by an up-sampling only for this layer are made inside the chain,
    // a few planes at a time (a U-Net decoder then holds its skip and the half-resolution
    // tensor, not the up-sampled one).
    std::vector<int> sources;
    std::int64_t source_bytes = 0, source_low = 0, smax = 1;
    for (int p : first) {
      const int v = g.nodes[static_cast<std::size_t>(p)].in[0];
      const int t = producer[static_cast<std::size_t>(v)];
      if (t < 0 || taken[static_cast<std::size_t>(t)] || !single_use(v) ||
          !slab_upsampling(g, g.nodes[static_cast<std::size_t>(t)]))
        continue;
      const std::int64_t wb = weight_bytes(g, g.nodes[static_cast<std::size_t>(t)]);
      if (max_weight_bytes > 0 && static_cast<std::uint64_t>(wbytes + wb) > max_weight_bytes) continue;
      wbytes += wb;
      sources.push_back(t);
      const TValue& up = g.values[static_cast<std::size_t>(v)];
      const TValue& low = g.values[static_cast<std::size_t>(g.nodes[static_cast<std::size_t>(t)].in[0])];
      source_bytes += static_cast<std::int64_t>(up.plain_bytes());
      // Its per-call scratch: up to a quarter of the output's depth in low-resolution planes.
      source_low += static_cast<std::int64_t>(up.plain_bytes() / (up.shape[2] / low.shape[2])) * 2 * low.shape[3] *
                    low.shape[4] / (up.shape[3] * up.shape[4]);
      smax = std::max(smax, up.shape[2] / low.shape[2]);
    }
    // The slab: windows of slab + kd − 1 (+ stride − 1 for an up-sampled input) planes within
    // depth / share.
    std::int64_t kmax = 1, saved = source_bytes;
    for (int l : rest)
      kmax = std::max(kmax, g.values[static_cast<std::size_t>(g.nodes[static_cast<std::size_t>(l)].in[1])].shape[2]);
    if (!sources.empty())
      for (int l : first)
        kmax = std::max(kmax, g.values[static_cast<std::size_t>(g.nodes[static_cast<std::size_t>(l)].in[1])].shape[2]);
    std::vector<int> layers_end{static_cast<int>(i)};
    layers_end.insert(layers_end.end(), rest.begin(), rest.end());
    for (std::size_t l = 0; l + (pool < 0 ? 1 : 0) < layers_end.size(); ++l)
      saved += static_cast<std::int64_t>(
          g.values[static_cast<std::size_t>(g.nodes[static_cast<std::size_t>(layers_end[l])].out[0])].plain_bytes());
    const std::int64_t depth = g.values[static_cast<std::size_t>(g.nodes[i].out[0])].shape[2];
    // The pooled layer's window keeps up to a pooling window − 1 planes besides the slab.
    const std::int64_t pool_back =
        pool < 0
            ? 0
            : pool_geometry(g.nodes[static_cast<std::size_t>(pool)].node,
                            g.values[static_cast<std::size_t>(g.nodes[static_cast<std::size_t>(pool)].in[0])].shape)
                      .kernel[0] -
                  1;
    // An added up-sampling's planes go straight where the last layer accumulates, one
    // low-resolution plane per call: no window, that plane's scratch; the last layer's slabs
    // are whole sub-lattice planes of it.
    std::int64_t addend_stride = 1, addend_scratch = 0;
    if (addend_up >= 0) {
      const TValue& up = g.values[static_cast<std::size_t>(g.nodes[static_cast<std::size_t>(addend_up)].out[0])];
      const TValue& low = g.values[static_cast<std::size_t>(g.nodes[static_cast<std::size_t>(addend_up)].in[0])];
      addend_stride = up.shape[2] / low.shape[2];
      addend_scratch = up.shape[1] * low.shape[3] * low.shape[4] * static_cast<std::int64_t>(sizeof(float)) + 64;
    }
    // Those slabs lag the previous layer's by up to a stride − 1 planes more.
    const std::int64_t reach = std::max(kmax - 1, pool_back) + (smax - 1) + (addend_stride - 1);
    // The chains and what each absorbs are the default share's whatever the share, so a budgeted
    // run makes the same calls as an unbudgeted one: a chain needs slabs of 2 planes there.
    const std::int64_t default_slab = depth / kChainWindowShare - reach;
    if (default_slab < 2) return;
    if (default_slab < addend_stride) {  // too thin for whole sub-lattice planes: the up-sampling runs alone
      if (rest.empty() && pool < 0 && !single) return;
      addend_up = -1;
      addend_stride = 1;
    }
    // Finer slabs never cost a chain: one too thin for them takes its thinnest slab (1 plane,
    // whole sub-lattice planes under an absorbed up-sampling), its windows a larger share. One
    // plane is the least a window can gain on: QSMnet's head at 1/48 holds 4 planes per
    // window, not 5 (−16.5 MB at 181×217×181).
    std::int64_t slab = share > kChainWindowShare ? depth / share - reach : default_slab;
    std::int64_t window_share = share;
    if (slab < addend_stride) {
      slab = addend_stride;
      window_share = depth / (slab + reach);
    }

    TNode chain;
    chain.node.name = g.nodes[static_cast<std::size_t>(tail)].node.name + "/chain";
    chain.node.op_type = "qsm.ConvChain";
    chain.op = nullptr;  // no OpDef: only a backend kernel runs it
    auto int_attr = [&](const char* name, std::int64_t v) {
      Attribute a;
      a.name = name;
      a.kind = Attribute::Kind::Int;
      a.i = v;
      chain.node.attrs.items.push_back(a);
    };
    int_attr("slab", slab);
    // The windows' reservation: the share of the intermediates (+ 64 B alignment per window).
    // Only at the default share: that keeps a chain's memory linear in the voxel count, which
    // the measured tables assume. A finer share is a budget asking for the least a chain can
    // hold, so there the kernel reserves exactly the windows its walk uses (0: no reservation;
    // QSMnet's head at 1/48: 79.8 MB of windows against a share's 127.2 MB).
    int_attr("window_bytes",
             share > kChainWindowShare
                 ? 0
                 : saved / window_share + source_low / window_share +
                       64 * static_cast<std::int64_t>(layers_end.size() - (pool < 0 ? 1 : 0) + 2 * sources.size()) +
                       (addend_up >= 0 ? addend_scratch : 0));
    auto add_in = [&](int v) {
      if (v >= 0 && std::find(chain.in.begin(), chain.in.end(), v) == chain.in.end()) chain.in.push_back(v);
    };
    std::vector<int> source_outs;
    source_outs.reserve(sources.size());
    for (int t : sources) source_outs.push_back(g.nodes[static_cast<std::size_t>(t)].out[0]);
    for (int p : first) {  // activations first
      const int v = g.nodes[static_cast<std::size_t>(p)].in[0];
      const auto it = std::find(source_outs.begin(), source_outs.end(), v);
      add_in(
          it == source_outs.end()
              ? v
              : g.nodes[static_cast<std::size_t>(sources[static_cast<std::size_t>(it - source_outs.begin())])].in[0]);
    }
    if (addend_up >= 0) add_in(g.nodes[static_cast<std::size_t>(addend_up)].in[0]);
    std::vector<int> all = sources;  // sources first: the kernel reads them before the layers
    for (int p : first) all.push_back(p);
    if (where_of.count(static_cast<int>(i))) all.push_back(where_of[static_cast<int>(i)]);  // each after its layer
    for (int p : rest) {
      all.push_back(p);
      if (where_of.count(p)) all.push_back(where_of[p]);
    }
    if (pool >= 0) all.push_back(pool);            // the pooling last
    if (addend_up >= 0) all.push_back(addend_up);  // or the up-sampling adding onto the last layer
    std::vector<int> inside;                       // values the chain computes itself (partial sums, intermediates)
    inside.reserve(all.size());
    for (int p : all) inside.push_back(g.nodes[static_cast<std::size_t>(p)].out[0]);
    for (int p : all) {
      const TNode& n = g.nodes[static_cast<std::size_t>(p)];
      if (n.node.op_type == "Where") add_in(n.in[0]);  // the mask; then its constant below
      for (std::size_t k = 1; k < n.in.size(); ++k)    // weights, bias, residual
        if (std::find(inside.begin(), inside.end(), n.in[k]) == inside.end()) add_in(n.in[k]);
      chain.chain.push_back(n);
    }
    const int end = addend_up >= 0 ? addend_up : pool >= 0 ? pool : where_of.count(tail) ? where_of[tail] : tail;
    chain.out = {g.nodes[static_cast<std::size_t>(end)].out[0]};
    chain.dead = false;
    if (accept && !accept(g, chain)) return;
    for (int p : all) {
      taken[static_cast<std::size_t>(p)] = true;
      g.nodes[static_cast<std::size_t>(p)].dead = true;
    }
    // The chain runs where its last input is ready: an absorbed up-sampling's low-resolution
    // input may be made well before the up-sampling ran, and holding the chain's other inputs
    // until then would cost what the up-sampling's absorption saves.
    // (After whatever else takes that place: the input's producer may become a chain itself.)
    if (addend_up >= 0) {
      const int low = g.nodes[static_cast<std::size_t>(addend_up)].in[0];
      late.emplace_back(std::max(tail, producer[static_cast<std::size_t>(low)]), std::move(chain));
    } else {
      replacement[static_cast<std::size_t>(end)].push_back(std::move(chain));
    }
    ++chains;
  };
  // Longer chains first: a convolution that is one part of a later layer (a split
  // concatenation's first part) or feeds one is taken by that layer's chain, not alone. Then
  // each convolution left is a chain of one part, so the parts of a split concatenation still
  // run as steps of their own, each holding two volumes (one of them the partial sum it adds
  // onto, in place), not all of the concatenation's inputs at once.
  for (std::size_t i = 0; i < n_nodes; ++i) try_chain(i, false);
  for (std::size_t i = 0; i < n_nodes; ++i) try_chain(i, true);
  for (auto& [at, chain] : late) replacement[static_cast<std::size_t>(at)].push_back(std::move(chain));
  // The kernels that run poolings, up-samplings and strided convs in depth slabs (kDepthSlabs)
  // take as many more as the chains' slabs are finer.
  if (share > kChainWindowShare)
    for (auto& n : g.nodes)
      if (!n.dead && (slab_pooling(g, n) || n.node.op_type == "ConvTranspose" || n.node.op_type == "Conv")) {
        Attribute a;
        a.name = "qsm_depth_slabs";
        a.kind = Attribute::Kind::Int;
        a.i = kDepthSlabs * share / kChainWindowShare;
        n.node.attrs.items.push_back(a);
      }
  if (chains == 0) return 0;
  // Dead nodes stay in place (remove_dead_nodes ignores them); the chain takes its tail's place.
  for (std::size_t i = 0; i < n_nodes; ++i)
    if (!replacement[i].empty()) replacement[i].insert(replacement[i].begin(), g.nodes[i]);
  splice_replacements(g, replacement);
  return chains;
}

}  // namespace qsmcore::graph
