// libFuzzer target for everything after the wire reader: bytes -> read_model -> typed graph
// (shape inference, constant folding) -> passes -> a reference-backend plan for small concrete
// input shapes (every dynamic dim = 8) -> a run when the plan is tiny. Any bytes must give a
// result or a qsmcore::Error, never a crash, a sanitizer report, a hang or a huge allocation.
// Built and run by tools/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "graph/passes/passes.h"
#include "graph/typed_graph.h"
#include "onnx/reader.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "runtime/plan.h"

namespace {

using namespace qsmcore;

// Every accounted byte (folded constants, weights, arenas) counts against this: a file that
// asks for more gets Error{OutOfBudget} like a run over its budget, not a finding.
constexpr std::int64_t kCap = std::int64_t{128} << 20;
// Plans whose run needs at most this much are run too (zero inputs), to reach the kernels.
constexpr std::int64_t kRunLimit = std::int64_t{1} << 20;

// The shapes a user would pass: the declared dims, 8 where a dim is dynamic; rank 1 when the
// file declares no shape.
std::vector<Shape> concrete_shapes(const graph::Model& m) {
  std::vector<Shape> shapes;
  for (const auto& vi : m.graph.inputs) {
    Shape s;
    for (const auto& d : vi.dims) s.push_back(d.value >= 0 ? d.value : 8);
    if (!vi.has_shape) s = {8};
    shapes.push_back(s);
  }
  return shapes;
}

void plan_and_run(const graph::Model& m) {
  graph::ConstantTable constants;
  for (const auto& init : m.graph.initializers) {
    constants.names.push_back(init.name);
    constants.tensors.push_back(std::make_shared<const Tensor>(graph::load_initializer(m, init)));
  }
  const std::vector<Shape> shapes = concrete_shapes(m);
  std::vector<DType> dtypes;
  for (const auto& vi : m.graph.inputs) dtypes.push_back(vi.dtype == DType::Undefined ? DType::F32 : vi.dtype);
  graph::TypedGraph tg = graph::build_typed_graph(m, constants, shapes, dtypes);
  graph::PassOptions po;
  po.stream_chains = false;  // oneDNN-only rewrite; the reference backend would not run it
  graph::run_passes(tg, po);
  const Plan plan(std::move(tg), Backend::Reference, 1);
  if (plan.memory().run_peak_bytes() > kRunLimit) return;
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < shapes.size(); ++i) inputs.push_back(Tensor::zeros(dtypes[i], shapes[i]));
  (void)plan.run(inputs);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_memory_cap(kCap);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    // No base_dir: external data is refused, so fuzzing never touches the file system.
    const graph::Model m = onnx::read_model(std::span<const std::uint8_t>(data, size), "fuzz.onnx");
    plan_and_run(m);
  } catch (const Error&) {
  }
  return 0;
}
