// A kernel backend as the planner sees it. The reference backend handles every registered op
// on plain layouts; oneDNN handles the heavy ops and may choose blocked layouts, which the
// planner propagates between its kernels and reorders only where a consumer needs another.
#pragma once
#include <memory>
#include <vector>

#include "graph/typed_graph.h"
#include "kernels/kernel.h"

namespace qsmcore::kernels {

struct LayoutDecision {
  std::vector<Layout> inputs;   // the layout each input must be in (plain for constants)
  std::vector<Layout> outputs;  // the layout the kernel writes each output in
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// A kernel for this node, given its producers' layouts; nullptr if this backend does not
  /// implement the node (the planner then uses the reference kernel).
  virtual std::unique_ptr<Kernel> make(const graph::TypedGraph& g, const graph::TNode& n,
                                       const std::vector<Layout>& producer_layouts, LayoutDecision& decision) = 0;
  /// A kernel converting a value of this type between two layouts.
  virtual std::unique_ptr<Kernel> make_reorder(const graph::TValue& v, const Layout& from, const Layout& to) = 0;
  virtual bool same_layout(const Layout& a, const Layout& b) const = 0;
};

/// The reference kernel for a node (its OpDef's ref, plus post-ops). Plain layouts only.
std::unique_ptr<Kernel> make_reference_kernel(const graph::TNode& n);

/// A plain-to-plain copy (graph outputs that alias inputs or constants).
std::unique_ptr<Kernel> make_copy_kernel();

/// The arithmetic of convolutions (ModelOptions::precision, issue #50). Bf16: src and weights
/// rounded to bfloat16, products accumulated and written in f32 (oneDNN's bf16 convolutions).
enum class ConvPrecision { F32, Bf16 };

/// The oneDNN backend; nullptr when qsmcore was built without it. Bf16 throws Unsupported where
/// the CPU has no bf16 convolutions (onednn_runs_bf16()).
std::unique_ptr<Backend> make_onednn_backend(ConvPrecision precision = ConvPrecision::F32);
/// Whether this build and CPU run bf16 convolutions natively (oneDNN's effective ISA at least
/// avx512_core_bf16, asked at run time); false without oneDNN.
bool onednn_runs_bf16();

/// The WebAssembly SIMD128 backend (src/kernels/wasm); nullptr outside the WebAssembly build.
std::unique_ptr<Backend> make_simd128_backend();
/// Whether the SIMD128 backend runs this "qsm.ConvChain" node (false outside the WebAssembly
/// build): the chain pass asks before it builds one.
bool simd128_runs_conv_chain(const graph::TypedGraph& g, const graph::TNode& chain);

}  // namespace qsmcore::kernels
