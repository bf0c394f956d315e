// A Plan: one input-shape set of a model, scheduled. It holds the typed graph after passes,
// one kernel per step (weights packed once), each intermediate value's arena offset by
// liveness, and the memory figures — all known before anything runs. run() allocates exactly
// the arena, the scratch block and the output tensors, nothing else.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/typed_graph.h"
#include "kernels/backend.h"
#include "qsmcore/onnx_model.h"

namespace qsmcore {

class Plan {
 public:
  struct Step {
    std::string name;                 // node name (or "reorder:<value>")
    std::string op_type;
    std::unique_ptr<kernels::Kernel> kernel;
    std::vector<int> in;              // plan value indices (-1 absent)
    std::vector<int> out;
  };
  enum class Storage { Absent, Constant, Input, Arena, Output };
  struct Value {
    std::string name;
    DType dtype = DType::Undefined;
    Shape shape;
    kernels::Layout layout;
    Storage storage = Storage::Absent;
    std::shared_ptr<const Tensor> constant;
    int index = -1;                   // graph input/output index
    std::size_t offset = 0;           // in the arena
    std::size_t bytes = 0;
  };

  /// Plans a typed graph (passes already run) for a backend.
  Plan(graph::TypedGraph g, Backend backend, int threads);

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  const PlanMemory& memory() const { return memory_; }
  const std::vector<Step>& steps() const { return steps_; }
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Shape>& input_shapes() const { return input_shapes_; }
  Backend backend() const { return backend_; }

 private:
  int add_value(Value v);
  // Takes the graph by reference to release each packed constant after its last reader.
  void schedule(graph::TypedGraph& g, kernels::Backend* be);
  void assign_offsets();

  Backend backend_;
  int threads_;
  std::vector<Shape> input_shapes_;
  std::vector<Step> steps_;
  std::vector<Value> values_;
  std::vector<int> inputs_, outputs_;
  std::vector<int> alias_;  // value -> value whose bytes it shares (in-place), or -1
  PlanMemory memory_;
};

}  // namespace qsmcore
