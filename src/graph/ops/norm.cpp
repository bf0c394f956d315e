// norm operator family (stub; filled in below as the kernels land).
#include "graph/op_registry.h"

namespace qsmcore::graph {

void register_norm_ops(OpRegistry& /*r*/) {}

}  // namespace qsmcore::graph
