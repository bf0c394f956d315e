// qsmcore._qsmcore: the compiled half of the `qsmcore` package. The public, documented API is
// python/qsmcore/__init__.py, which wraps these functions with keyword defaults and type hints.
#include "bindings.h"

PYBIND11_MODULE(_qsmcore, m) {
  m.doc() = "qsmcore engine bindings (use the qsmcore package, not this module directly)";
  qsmpy::bind_errors(m);
  qsmpy::bind_onnx_model(m);
  qsmpy::bind_registry(m);
  qsmpy::bind_networks(m);
  qsmpy::bind_physics(m);
  qsmpy::bind_stages(m);
}
