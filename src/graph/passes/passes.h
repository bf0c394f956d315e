// Graph rewrites on a TypedGraph. Each keeps results equal up to float rounding and is
// independent of the backend (fused post-ops are applied by reference kernels too), so the
// conformance suite can run with and without them.
#pragma once
#include <functional>

#include "graph/typed_graph.h"

namespace qsmcore::graph {

/// Inference BatchNormalization (constant parameters) folded into the Conv/ConvTranspose (constant
/// W, B) it alone reads, or into both convolutions of an Add it alone reads (BN(p + q) =
/// BN(p) + s·q): weights scaled, bias shifted, the BN node dies. Returns the number of folds.
int fold_batchnorm(TypedGraph& g);

/// Conv/ConvTranspose followed by a chain of single-consumer Relu/LeakyRelu/Elu/Sigmoid/Tanh/Clip
/// and at most one same-shape Add of another computed value: those become post-ops of the
/// convolution (oneDNN executes them inside the kernel). Returns the number of fused nodes.
int fuse_conv_chains(TypedGraph& g);

/// Greater(p, c) with a constant c ≥ 0 compares Relu(p) instead where that is made before it
/// (the same bits), so the Relu is p's only reader and can fuse into p's convolution (a ReLU's
/// adjoint in a hand-written VJP). Returns the number of comparisons moved.
int compare_after_relu(TypedGraph& g);

/// Concat(axis=1) read only by Convs becomes, for each, one Conv per concatenated input (weights
/// split by input channel) accumulated through Sum post-ops: the concatenated tensor is never built.
int split_concat_convs(TypedGraph& g);

/// A pooling or unary activation reading a Concat(axis=1) that others read too is applied to
/// each part and the results concatenated (exact), so the first Concat can be split.
int hoist_through_concat(TypedGraph& g);

/// Conv whose weights exceed max_weight_bytes runs as input-channel chunks (Slice + Conv)
/// accumulated through Sum post-ops, so no weight unit exceeds the bound. 0 = off.
int split_heavy_convs(TypedGraph& g, std::uint64_t max_weight_bytes);

/// ConvTranspose with stride 1 becomes the equivalent Conv (kernel flipped, channel axes
/// swapped, pads mirrored), which runs on the fast convolution kernels without a scratchpad.
int transposed_to_direct_convs(TypedGraph& g);

/// Conv whose output only a Split along channels reads becomes one Conv per part (weights and
/// bias rows split): neither the whole output nor the Split's copy of it is made.
int split_conv_outputs(TypedGraph& g);

/// A value computed by at most two ops from graph inputs and constants (≤ 64 KiB of them), first
/// read ≥ min_distance nodes after it is made, is made again right before its first reader, so
/// its bytes are free in between (cheap rematerialisation). Returns the number of values.
int recompute_late_values(TypedGraph& g, std::size_t min_distance);

/// Reorders live nodes (topologically) to lower the simulated activation peak, when a greedy
/// list schedule beats the file's order. Returns the number of nodes that moved.
int order_for_memory(TypedGraph& g);

/// Chains of same-size 3-D convolutions (the first layer may be a Sum chain over several
/// inputs) become one "qsm.ConvChain" node that streams depth slabs through them, holding a
/// few planes per intermediate instead of whole tensors. Only for a backend that implements
/// the node (oneDNN, SIMD128). Chains stay under max_weight_bytes of weights (0 = no bound).
/// `accept` says which chains the backend runs; it is asked before the graph is changed (empty:
/// every one).
/// Each intermediate keeps a window of at most 1/window_share of its planes (the slab plus the
/// next kernel's reach): kChainWindowShare by default; a budget that needs less memory asks for
/// finer slabs (kernels/onednn/conv_chain.cpp computes each plane the same way, whatever slab
/// it falls in).
/// With `upsampled_addends` (oneDNN), a chain whose output only feeds an up-sampling
/// ConvTranspose (kernel = stride) adding onto it (an octave convolution's high-frequency sum,
/// xQSM) makes that up-sampling's planes too and adds them where its last layer accumulates:
/// the full-resolution sum's addend is never whole, and a spilled run neither writes nor reads it.
/// With `masks` (oneDNN), a layer's output read only by Where(bool mask, output, constant scalar)
/// is masked by the chain itself, slab by slab (a ReLU's backward), and the chain goes on.
using ChainFilter = std::function<bool(const TypedGraph&, const TNode& chain)>;
constexpr std::int64_t kChainWindowShare = 6;
/// Depth slabs of a pooling or up-sampling that runs in slabs, at the default share; finer shares
/// stamp kDepthSlabs · share / kChainWindowShare on the node as "qsm_depth_slabs".
constexpr std::int64_t kDepthSlabs = 8;
int stream_conv_chains(TypedGraph& g, std::uint64_t max_weight_bytes, const ChainFilter& accept = {},
                       std::int64_t window_share = kChainWindowShare, bool upsampled_addends = false,
                       bool masks = false);

/// Marks nodes dead whose outputs nobody reads and that are not graph outputs.
int remove_dead_nodes(TypedGraph& g);

struct PassOptions {
  bool fold_bn = true;
  bool fuse = true;
  bool split_concat = true;
  std::uint64_t max_conv_weight_bytes = 0;              // split_heavy_convs bound; 0 = off
  bool reorder = true;                                  // order_for_memory
  bool recompute = true;                                // recompute_late_values
  bool stream_chains = false;                           // stream_conv_chains (the backend must run them)
  ChainFilter chain_filter;                             // what of them the backend runs
  std::int64_t chain_window_share = kChainWindowShare;  // their slabs' fineness
  bool chain_upsampled_addends = false;                 // chains absorb up-samplings adding onto them
  bool chain_masks = false;                             // and Where(mask, layer output, constant)
};

/// The standard pipeline.
void run_passes(TypedGraph& g, const PassOptions& opts = {});

}  // namespace qsmcore::graph
