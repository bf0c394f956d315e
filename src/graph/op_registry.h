// Operator table: one OpDef per ONNX op type, registered by family files
// (src/graph/ops/<family>.cpp, each with a register_<family>_ops()). An OpDef gives shape/type
// inference and the reference kernel (plain C++, the oracle and the WASM path). oneDNN kernels
// live in src/kernels/onednn and are looked up separately by op type.
#pragma once
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "qsmcore/tensor.h"

namespace qsmcore::graph {

/// What the planner knows about a value: dtype, concrete shape, and the value itself when it is
/// a constant (initializer or folded). dtype Undefined = an absent optional input.
struct ValueType {
  DType dtype = DType::Undefined;
  Shape shape;
  const Tensor* value = nullptr;
  bool present() const { return dtype != DType::Undefined; }
};

/// Returns the output types (value left null). Throws Error{InvalidModel|Unsupported} with
/// node.label() in the message for bad attributes/shapes/dtypes.
using InferFn = std::function<std::vector<ValueType>(const Node& node, const std::vector<ValueType>& inputs)>;
/// Computes outputs (already allocated with the inferred dtype/shape) from inputs. Absent
/// optional inputs are undefined Tensors. Must not allocate accounted memory except through
/// Tensor/Buffer (which is accounted) and must be deterministic for a given thread count.
using RefFn = std::function<void(const Node& node, std::span<const Tensor> inputs, std::span<Tensor> outputs)>;

struct OpDef {
  std::string name;
  InferFn infer;
  RefFn ref;
  /// Output 0 may share input 0's buffer (elementwise, same dtype/shape): the planner may run
  /// it in place when input 0 has no later reader.
  bool inplace_ok = false;
  /// Inputs (by index) that must be constants at plan time (e.g. Reshape's shape).
  std::vector<int> const_inputs;
};

class OpRegistry {
 public:
  static OpRegistry& instance();  // all families registered on first use
  void add(OpDef def);
  const OpDef* find(std::string_view op_type) const;
  std::vector<std::string> names() const;

 private:
  std::vector<OpDef> defs_;
};

// Family registration functions (one per file under src/graph/ops/).
void register_elementwise_ops(OpRegistry& r);
void register_binary_ops(OpRegistry& r);
void register_conv_ops(OpRegistry& r);
void register_pool_ops(OpRegistry& r);
void register_norm_ops(OpRegistry& r);
void register_shape_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_tensor_ops(OpRegistry& r);
void register_matmul_ops(OpRegistry& r);
void register_resize_ops(OpRegistry& r);

}  // namespace qsmcore::graph
