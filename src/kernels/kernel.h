// The kernel interface the runtime executes. A kernel is built once per plan step (weights
// packed, primitives created, scratch size known) and run many times on tensors the plan binds.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graph/post_op.h"
#include "qsmcore/tensor.h"

namespace qsmcore::kernels {

/// How a value's bytes are laid out. Plain = dense row-major of its logical shape (the only
/// layout reference kernels read and write). Otherwise `desc` is a backend descriptor (a
/// dnnl::memory::desc for oneDNN's blocked layouts) and `bytes` its size, which can exceed the
/// plain size (channel padding).
struct Layout {
  std::shared_ptr<const void> desc;
  std::size_t bytes = 0;
  bool plain() const { return desc == nullptr; }
};

/// Post-ops are graph annotations (graph/post_op.h); kernels apply them.
using graph::PostOp;

/// Applies post-ops to a plain f32 buffer in place (reference path and fallback).
void apply_post_ops(std::span<const PostOp> post, float* data, std::int64_t n);
/// Applies one activation to a scalar (shared by reference kernels and tests).
float apply_activation(const PostOp& p, float x);

/// An operand a kernel reads from or writes to the spill file, a range of bytes at a time,
/// instead of in memory (activation residency, issue #16: a step whose own input and output
/// exceed the budget streams them). Offsets are in the operand's bytes, in its planned layout.
/// `staging` is the block the plan gave the kernel for this operand: stream_need() of it.
struct StreamedOperand {
  virtual ~StreamedOperand() = default;
  virtual void read(void* dst, std::size_t offset, std::size_t bytes) const = 0;
  virtual void write(const void* src, std::size_t offset, std::size_t bytes) const = 0;
  std::byte* staging = nullptr;
  std::size_t staging_bytes = 0;
};

/// A kernel's cost of streaming one operand: the staging block it needs, and how many times it
/// reads the whole operand from the file (an input read by two parts of the kernel: twice).
struct StreamNeed {
  std::size_t staging = 0;
  unsigned reads = 0;
};

struct ExecContext {
  std::byte* scratch = nullptr;   // the step's scratch slot in the plan's arena
  std::size_t scratch_bytes = 0;  // the slot's planned size: a kernel needing more must refuse to run
  int threads = 1;
  // Per input and output slot: the operand is streamed (its Tensor is then empty), or nullptr.
  // Empty when nothing of this step is streamed.
  std::vector<const StreamedOperand*> streamed_in, streamed_out;
  const StreamedOperand* in_stream(std::size_t i) const { return i < streamed_in.size() ? streamed_in[i] : nullptr; }
  const StreamedOperand* out_stream(std::size_t i) const { return i < streamed_out.size() ? streamed_out[i] : nullptr; }
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  /// Inputs/outputs are views in the layouts agreed at plan time.
  virtual void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) = 0;
  /// Scratch this kernel needs while it runs.
  virtual std::size_t scratch_bytes() const { return 0; }
  /// Bytes of execution-ready weights the kernel owns (packed, folded).
  virtual std::int64_t packed_bytes() const { return 0; }
  /// Bytes it derived from its weights while packing them and freed after (Winograd's
  /// transformed weights before their reordering): a unit rebuilt under a residency policy holds
  /// them for a moment beside its packed weights. 0 when packing is a reorder of the weights.
  virtual std::int64_t derived_bytes() const { return 0; }
  /// Called once the plan build has freed the copies this kernel packed from: moves the packed
  /// weights into a fresh block where that lies lower in the heap. In wasm32's heap, which never
  /// shrinks, the freed copies otherwise stay as holes under the packed weights, and where the
  /// weights end (and the arena starts) depends on the order the shape's kernels packed in.
  /// No-op by default (natively, large blocks are mapped and leave no holes).
  virtual void relocate_packed() {}
  /// Index of the input whose bytes output 0 may share (the planner aliases them when that
  /// input has no later reader and the layouts match), or -1.
  virtual int inplace_input() const { return -1; }
  /// False for inputs the kernel never reads at run time (constants it packed at plan time),
  /// so the plan can release their plain copies.
  virtual bool reads_input(std::size_t /*i*/) const { return true; }
  /// Backend/implementation name for profiles ("ref", "onednn:jit:avx2", ...).
  virtual std::string impl_name() const = 0;
  /// What streaming an input (output = false) or output slot through the spill file, instead of
  /// reading or writing it in memory, takes; nullopt: the kernel cannot stream it.
  virtual std::optional<StreamNeed> stream_need(bool /*output*/, std::size_t /*slot*/) const { return std::nullopt; }
};

}  // namespace qsmcore::kernels
