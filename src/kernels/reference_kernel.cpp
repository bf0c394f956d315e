// Wraps an op's reference implementation as a Kernel, applying fused post-ops afterwards in
// their order (a Sum adds its addend input, which never aliases the output on this path).
#include <cstring>

#include "core/parallel.h"
#include "kernels/backend.h"

namespace qsmcore::kernels {
namespace {

class ReferenceKernel final : public Kernel {
 public:
  explicit ReferenceKernel(const graph::TNode& n) : node_(n.node), op_(n.op), post_(n.post) {
    for (const auto& p : post_) {
      if (p.kind == PostOp::Kind::Sum) n_op_inputs_ = std::min(n_op_inputs_, static_cast<std::size_t>(p.sum_input));
    }
  }
  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext&) override {
    op_->ref(node_, inputs.first(std::min(n_op_inputs_, inputs.size())), outputs);
    if (post_.empty()) return;
    Tensor& y = outputs[0];
    float* d = y.data<float>();
    const std::int64_t n = y.numel();
    for (const auto& p : post_) {
      if (p.kind == PostOp::Kind::Sum) {
        const float* a = inputs[static_cast<std::size_t>(p.sum_input)].data<float>();
        parallel_for(n, n > 4096, [&](std::int64_t i) { d[i] += a[i]; });
      } else {
        apply_post_ops(std::span<const PostOp>(&p, 1), d, n);
      }
    }
  }
  std::string impl_name() const override { return "ref"; }
  int inplace_input() const override {
    // A fused Sum reads its addend after the op wrote the output: no aliasing on this path.
    for (const auto& p : post_)
      if (p.kind == PostOp::Kind::Sum) return -1;
    return op_->inplace_ok ? 0 : -1;
  }

 private:
  graph::Node node_;
  const graph::OpDef* op_;
  std::vector<PostOp> post_;
  std::size_t n_op_inputs_ = static_cast<std::size_t>(-1);
};

}  // namespace

std::unique_ptr<Kernel> make_reference_kernel(const graph::TNode& n) { return std::make_unique<ReferenceKernel>(n); }

namespace {
// Copies a plain value into another buffer (graph outputs that are inputs or constants).
class CopyKernel final : public Kernel {
 public:
  void run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext&) override {
    if (in[0].nbytes()) std::memcpy(out[0].raw(), in[0].raw(), in[0].nbytes());
  }
  std::string impl_name() const override { return "copy"; }
};
}  // namespace

std::unique_ptr<Kernel> make_copy_kernel() { return std::make_unique<CopyKernel>(); }

#ifndef QSM_HAVE_ONEDNN
std::unique_ptr<Backend> make_onednn_backend(ConvPrecision) { return nullptr; }
bool onednn_runs_bf16() { return false; }
#endif
#ifndef __wasm_simd128__
std::unique_ptr<Backend> make_simd128_backend() { return nullptr; }
bool simd128_runs_conv_chain(const graph::TypedGraph&, const graph::TNode&) {
  return false;
}
#endif

}  // namespace qsmcore::kernels
