#include "graph/op_registry.h"

#include <algorithm>

namespace qsmcore::graph {

OpRegistry& OpRegistry::instance() {
  // Families register explicitly (not via static initialisers, which a static library's linker
  // may drop).
  static OpRegistry* r = [] {
    auto* reg = new OpRegistry();
    register_elementwise_ops(*reg);
    register_binary_ops(*reg);
    register_conv_ops(*reg);
    register_pool_ops(*reg);
    register_norm_ops(*reg);
    register_shape_ops(*reg);
    register_reduce_ops(*reg);
    register_tensor_ops(*reg);
    register_matmul_ops(*reg);
    register_resize_ops(*reg);
    return reg;
  }();
  return *r;
}

void OpRegistry::add(OpDef def) {
  // A zero dim (legal, and reachable from any file) leaves a tensor without storage: an op whose
  // outputs are all empty has nothing to write, and its loops would offset null pointers.
  if (def.ref) {
    def.ref = [ref = std::move(def.ref)](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
      const bool all_empty =
          !out.empty() && std::all_of(out.begin(), out.end(), [](const Tensor& t) { return !t.defined() || t.numel() == 0; });
      if (!all_empty) ref(n, in, out);
    };
  }
  defs_.push_back(std::move(def));
}

const OpDef* OpRegistry::find(std::string_view op_type) const {
  for (const auto& d : defs_)
    if (d.name == op_type) return &d;
  return nullptr;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> n;
  for (const auto& d : defs_) n.push_back(d.name);
  std::sort(n.begin(), n.end());
  return n;
}

}  // namespace qsmcore::graph
