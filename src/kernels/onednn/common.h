// Shared pieces of the oneDNN backend: the engine and stream, plain memory descriptors for
// ONNX shapes, Layout <-> memory::desc conversion, and a base kernel that executes one
// primitive with a user-managed scratchpad (so scratch is planned and accounted by us).
#pragma once
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <span>
#include <unordered_map>
#include <vector>

#include "graph/typed_graph.h"
#include "kernels/backend.h"

namespace qsmcore::kernels::onednn {

using dnnl::memory;

dnnl::engine& engine();
dnnl::stream& stream();

memory::dims to_dims(const Shape& s);
/// oneDNN's element type for ours (Bool as u8); false where oneDNN has none.
bool to_dnnl_type(DType t, memory::data_type& out);
/// Dense row-major descriptor of an f32 tensor of this shape (rank 1..6).
memory::desc plain_desc(const Shape& s, memory::data_type dt = memory::data_type::f32);
/// The descriptor a Layout stands for, for a value of this shape.
memory::desc desc_of(const Layout& l, const Shape& s);
/// Wraps a descriptor as a Layout (plain descriptors become the plain Layout).
Layout to_layout(const memory::desc& md, const Shape& s);

/// The layout activation volumes keep: the channel block of oneDNN's convolutions (16, 8), or
/// -1 for channels-last. Channels-last wherever a convolution runs on a jit kernel in it: on
/// AVX-512 that is what oneDNN picks (brgconv); on AVX2 it picks nCdhw8c, but its jit kernel
/// runs channels-last as fast, and only in channels-last is a depth slab contiguous, so that
/// steps stream under a budget (issue #16) as they do on AVX-512.
int activation_block();
/// True where oneDNN's own choice (format `any`) is blocked but activation_block() is
/// channels-last: convolutions must then ask for channels-last explicitly.
bool channels_last_asked();

/// The convolution arithmetic of the kernels being made on this thread: the backend sets it
/// (ConvPrecisionScope) around each factory call, plan build and unit rebuild alike, so the
/// factories' signature stays that of every family.
ConvPrecision conv_precision();
class ConvPrecisionScope {
 public:
  explicit ConvPrecisionScope(ConvPrecision p);
  ~ConvPrecisionScope();
  ConvPrecisionScope(const ConvPrecisionScope&) = delete;
  ConvPrecisionScope& operator=(const ConvPrecisionScope&) = delete;

 private:
  ConvPrecision previous_;
};
/// The element type of a convolution's source and weights under conv_precision() (its
/// destination, bias and post-ops stay f32).
memory::data_type conv_compute_type();
/// `md` with element type `t`: same dims, format and padding, so element i of one is element i
/// of the other and a conversion is one pass over get_size() / element-size elements.
memory::desc retyped(const memory::desc& md, memory::data_type t);
/// Rounds n floats to bfloat16 at `dst` (round to nearest even, NaN kept quiet: as oneDNN's
/// f32 -> bf16 reorder), in parallel over blocks (each element on one thread).
void round_to_bf16(const float* src, void* dst, std::size_t n);

/// Attributes with a user-managed scratchpad and the fused post-ops (Sum included).
dnnl::primitive_attr make_attr(const std::vector<PostOp>& post);

/// A plain constant packed into `md` in a new Weights buffer kept in `owned` (bytes added to
/// `packed_bytes`); a plain-to-plain "packing" is a copy.
memory pack_constant(const Tensor& plain, const memory::desc& plain_md, const memory::desc& md,
                     std::vector<std::shared_ptr<Buffer>>& owned, std::int64_t& packed_bytes);
/// The same for a constant a kernel derives from `source` before packing (Winograd's transformed
/// weights): shared through the cache by the digest of `source` and both layouts, and `derive`
/// is called only when something is packed anew (not in a dry build): it makes the plain values
/// in plain_md and hands them to the packing routine it is given, so they live only that long.
memory pack_derived(std::span<const std::byte> source, const memory::desc& plain_md, const memory::desc& md,
                    const std::function<void(const std::function<void(const void*)>&)>& derive,
                    std::vector<std::shared_ptr<Buffer>>& owned, std::int64_t& packed_bytes);

/// A kernel running one primitive. Subclasses fill `args_` slots: input i -> DNNL arg,
/// output i -> DNNL arg, plus constant memories (packed weights) bound once.
class PrimitiveKernel : public Kernel {
 public:
  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override;
  std::size_t scratch_bytes() const override { return scratch_bytes_; }
  std::int64_t packed_bytes() const override { return packed_bytes_; }
  std::string impl_name() const override { return impl_; }
  bool reads_input(std::size_t i) const override { return i < in_binds_.size() && in_binds_[i].arg >= 0; }

 protected:
  struct Bind {
    int arg;
    memory::desc md;
  };
  /// Called before execute (e.g. to copy a Sum addend into dst when not aliased).
  virtual void prepare(std::span<const Tensor> /*inputs*/, std::span<Tensor> /*outputs*/) {}
  void set_primitive(const dnnl::primitive& p, const memory::desc& scratch_md, const char* impl);
  /// The primitive reads its source (input 0) as `bf16_md` (conv_precision() Bf16): each run
  /// rounds the f32 input into the step's scratch, after the primitive's scratchpad, and binds
  /// that. The plan keeps the input in f32 (retyped(bf16_md, f32)); the staging is plan memory.
  void stage_src_as_bf16(const memory::desc& bf16_md);
  /// Packs a plain constant into `md` (accounted as Weights) and binds it to `arg`.
  void bind_constant(int arg, const Tensor& plain, const memory::desc& plain_md, const memory::desc& md);

  dnnl::primitive prim_;
  std::vector<Bind> in_binds_;   // per step input (arg < 0 = not bound: constants packed)
  std::vector<Bind> out_binds_;  // per step output
  std::vector<std::pair<int, memory>> const_args_;
  std::vector<std::shared_ptr<Buffer>> packed_;
  std::size_t scratch_bytes_ = 0;       // all the step's scratch: scratchpad, then a bf16 source
  std::size_t prim_scratch_bytes_ = 0;  // of which the primitive's scratchpad
  std::size_t bf16_src_off_ = 0;        // where the bf16 source lies in scratch (0: none)
  memory::desc bf16_src_md_;
  std::int64_t packed_bytes_ = 0;
  std::string impl_;
};

/// A convolution-like primitive (conv, deconv) reading input 0 as SRC, writing DST, with its
/// weights packed: binds them, agrees the layouts, and handles a fused Sum, whose addend is read
/// in dst's layout and must be in dst before the primitive accumulates into it.
class ConvLikeKernel : public PrimitiveKernel {
 public:
  /// The addend's buffer, unless the addend is the conv's own source (r + Conv(r)): the
  /// primitive still reads it while it writes, so the sum then goes to a buffer of its own.
  int inplace_input() const override { return sum_is_src_ ? -1 : sum_input_; }

 protected:
  void bind_src_dst(const graph::TNode& n, const memory::desc& src, const memory::desc& dst, const Shape& x,
                    const Shape& y, LayoutDecision& dec);
  void prepare(std::span<const Tensor> inputs, std::span<Tensor> outputs) override;

 private:
  int sum_input_ = -1;
  bool sum_is_src_ = false;
  std::size_t dst_bytes_ = 0;
};

// Per-family factories: nullptr when oneDNN does not handle this node (reference fallback).
using MakeFn = std::unique_ptr<Kernel> (*)(const graph::TypedGraph& g, const graph::TNode& n,
                                           const std::vector<Layout>& producer, LayoutDecision& dec);
std::unique_ptr<Kernel> make_conv(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                  LayoutDecision&);
std::unique_ptr<Kernel> make_eltwise(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                     LayoutDecision&);
std::unique_ptr<Kernel> make_binary(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                    LayoutDecision&);
std::unique_ptr<Kernel> make_reorder_kernel(const Shape& s, const memory::desc& from, const memory::desc& to);

/// Registers extra families (pooling, normalisation, concat, deconvolution, ...): each adds
/// (op_type, factory) pairs. Defined in their own files.
void register_more_kernels(std::unordered_map<std::string, MakeFn>& table);

const graph::TValue& value(const graph::TypedGraph& g, int v);
bool all_f32(const graph::TypedGraph& g, const graph::TNode& n);

}  // namespace qsmcore::kernels::onednn
