// The oneDNN backend: a table from op type to kernel factory. Factories decline (nullptr)
// what they do not implement, and the planner falls back to the reference kernel. The backend's
// convolution precision (ModelOptions::precision) is made current around every factory call.
#include <unordered_map>

#include "kernels/onednn/common.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels {
namespace onednn {
namespace {

class OneDnnBackend final : public Backend {
 public:
  explicit OneDnnBackend(ConvPrecision precision) : precision_(precision) {
    table_["Conv"] = &make_conv;
    for (const char* op : {"Relu", "LeakyRelu", "Elu", "Sigmoid", "Tanh", "Abs", "Exp", "Sqrt", "Neg", "Clip"})
      table_[op] = &make_eltwise;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) table_[op] = &make_binary;
    register_more_kernels(table_);
  }
  std::unique_ptr<Kernel> make(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                               LayoutDecision& dec) override {
    auto it = table_.find(n.node.op_type);
    if (it == table_.end()) return nullptr;
    if (precision_ == ConvPrecision::Bf16) {
      // A configuration oneDNN has no bf16 kernel for runs in f32 (its step is then named so).
      const ConvPrecisionScope precision_here(precision_);
      try {
        return it->second(g, n, producer, dec);
      } catch (const dnnl::error&) {
        dec = {};
      }
    }
    try {
      return it->second(g, n, producer, dec);
    } catch (const dnnl::error& e) {
      // oneDNN has no implementation for this configuration: the reference kernel runs it.
      dec = {};
      return nullptr;
    }
  }
  std::unique_ptr<Kernel> make_reorder(const graph::TValue& v, const Layout& from, const Layout& to) override {
    // A plain side is dense row-major of the value's own element type (masks are u8).
    memory::data_type t = memory::data_type::f32;
    to_dnnl_type(v.dtype, t);
    auto typed = [&](const Layout& l) { return l.plain() ? plain_desc(v.shape, t) : desc_of(l, v.shape); };
    return make_reorder_kernel(v.shape, typed(from), typed(to));
  }
  bool same_layout(const Layout& a, const Layout& b) const override {
    if (a.plain() || b.plain()) return a.plain() == b.plain();
    return *static_cast<const memory::desc*>(a.desc.get()) == *static_cast<const memory::desc*>(b.desc.get());
  }

 private:
  std::unordered_map<std::string, MakeFn> table_;
  ConvPrecision precision_;
};

}  // namespace
}  // namespace onednn

bool onednn_runs_bf16() {
  // The ISA values are nested bit masks: avx512_core_bf16's bits are also set by AMX.
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

std::unique_ptr<Backend> make_onednn_backend(ConvPrecision precision) {
  if (precision == ConvPrecision::Bf16 && !onednn_runs_bf16())
    throw Error(ErrorKind::Unsupported,
                "precision bf16 needs a CPU with native bf16 convolutions (avx512_bf16 or AMX, as oneDNN reports "
                "it); this one has none");
  return std::make_unique<onednn::OneDnnBackend>(precision);
}

}  // namespace qsmcore::kernels
