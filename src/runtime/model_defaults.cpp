// ModelOptions' automatic defaults (qsmcore/onnx_model.h): the threads and the memory budget a
// run gets when none is given, read from what the process may use (qsmcore/process_limits.h).
// In runtime, beside ModelOptions, so that system/ needs nothing of the engine.
#include "qsmcore/error.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/process_limits.h"

namespace qsmcore {

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
