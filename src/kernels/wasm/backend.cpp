// The SIMD128 backend's table from op type to kernel factory. Every kernel reads and writes plain
// layouts, so no reorders are ever needed between them and the reference kernels.
#include "kernels/wasm/backend.h"

#include "qsmcore/error.h"

namespace qsmcore::kernels {
namespace wasm {
namespace {

class Simd128Backend final : public Backend {
 public:
  Simd128Backend() {
    register_conv_kernels(table_);
    register_deconv_kernels(table_);
    register_pool_kernels(table_);
    register_conv_chain_kernel(table_);
  }
  std::unique_ptr<Kernel> make(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>&,
                               LayoutDecision& dec) override {
    auto it = table_.find(n.node.op_type);
    if (it == table_.end()) return nullptr;
    auto k = it->second(g, n);
    if (!k) return nullptr;
    dec.inputs.assign(n.in.size(), Layout{});
    dec.outputs.assign(n.out.size(), Layout{});
    return k;
  }
  std::unique_ptr<Kernel> make_reorder(const graph::TValue&, const Layout&, const Layout&) override {
    throw Error(ErrorKind::Unsupported, "the simd128 backend has plain layouts only: nothing to reorder");
  }
  bool same_layout(const Layout& a, const Layout& b) const override { return a.plain() == b.plain(); }

 private:
  KernelTable table_;
};

}  // namespace
}  // namespace wasm

std::unique_ptr<Backend> make_simd128_backend() {
  return std::make_unique<wasm::Simd128Backend>();
}

bool simd128_runs_conv_chain(const graph::TypedGraph& g, const graph::TNode& chain) {
  return wasm::can_run_conv_chain(g, chain);
}

}  // namespace qsmcore::kernels
