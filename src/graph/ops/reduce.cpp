// reduce operator family (stub; filled in below as the kernels land).
#include "graph/op_registry.h"

namespace qsmcore::graph {

void register_reduce_ops(OpRegistry& /*r*/) {}

}  // namespace qsmcore::graph
