// ModelOptions' automatic defaults (qsmcore/onnx_model.h): the threads and the memory budget a
// run gets when none is given, read from what the process may use (qsmcore/process_limits.h).
// In runtime, beside ModelOptions, so that system/ needs nothing of the engine.
#include "kernels/backend.h"
#include "qsmcore/error.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/process_limits.h"

namespace qsmcore {

void check_precision(Backend backend, Precision precision) {
  if (precision == Precision::F32) return;
  if (backend != Backend::OneDnn)
    throw Error(ErrorKind::Unsupported,
                std::string("precision bf16 runs only on the onednn backend, not on ") + to_string(backend));
  if (!kernels::onednn_runs_bf16())
    throw Error(ErrorKind::Unsupported,
                "precision bf16 needs a CPU with native bf16 convolutions (avx512_bf16 or AMX, as oneDNN reports "
                "it); this one has none: use --precision f32");
}

ModelOptions with_process_defaults(ModelOptions o) {
  check_precision(o.backend, o.precision);
  if (o.threads <= 0) o.threads = usable_cpus();
  if (o.mem_budget < 0) {
    const MemBudget b = process_mem_budget();
    o.mem_budget = b.bytes;
    o.mem_budget_source = b.source;
  }
  return o;
}

}  // namespace qsmcore
