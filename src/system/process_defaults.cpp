// The public face of process_limits (qsmcore/process_limits.h) and the resolution of
// ModelOptions' automatic defaults.
#include <algorithm>

#include "qsmcore/onnx_model.h"
#include "qsmcore/process_limits.h"
#include "system/process_limits.h"

namespace qsmcore {

int usable_cpus() {
  // Read once: the affinity mask and quotas of a running job do not change under it, and
  // tile workers ask often.
  static const int cpus = static_cast<int>(std::min<std::uint64_t>(system::cpu_limit().value, 1 << 16));
  return cpus;
}

ModelOptions with_process_defaults(ModelOptions o) {
  if (o.threads <= 0) o.threads = usable_cpus();
  return o;
}

}  // namespace qsmcore
