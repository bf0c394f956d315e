// An elementwise operation fused into the node that produces its input: part of the graph the
// fusion passes rewrite, so it lives here; kernels read it and apply it (kernels/post_ops.cpp).
#pragma once

namespace qsmcore::graph {

/// Applied to the producing node's output, in order.
struct PostOp {
  enum class Kind { Relu, LeakyRelu, Elu, Sigmoid, Tanh, Clip, Sum };
  Kind kind = Kind::Relu;
  float alpha = 0.0f;  // LeakyRelu slope, Elu alpha, Clip min
  float beta = 0.0f;   // Clip max
  int sum_input = -1;  // Sum: index (in the step's inputs) of the addend; the output aliases it
};

}  // namespace qsmcore::graph
