// qsmcore::Error -> Python exceptions, one class per ErrorKind, all subclasses of qsmcore.Error
// (itself a RuntimeError), so callers can catch everything from the engine at once or branch on
// the kind. The kinds a caller's input causes also derive from the matching builtin (ValueError,
// MemoryError, FileNotFoundError/LookupError, OSError, NotImplementedError) so generic handlers
// work. The message is the engine's, unchanged.
#include <pybind11/pybind11.h>

#include <cstring>
#include <string>

#include "bindings.h"
#include "qsmcore/error.h"

namespace qsmpy {
namespace {

using qsmcore::ErrorKind;

// Exception classes made in bind_errors, kept for the translator (the module lives for the
// process, so the handles are never released).
PyObject* g_kind_class[static_cast<int>(ErrorKind::Internal) + 1] = {};
PyObject* g_base_class = nullptr;

// A new exception class qsmcore.NAME with these bases, added to the module. Steals `bases`.
PyObject* make_class(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string full = std::string("qsmcore.") + name;
  PyObject* cls = bases ? PyErr_NewExceptionWithDoc(full.c_str(), doc, bases, nullptr) : nullptr;
  Py_XDECREF(bases);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

PyObject* tuple_of(PyObject* a, PyObject* b = nullptr) {
  return b ? PyTuple_Pack(2, a, b) : PyTuple_Pack(1, a);
}

}  // namespace

void bind_errors(py::module_& m) {
  g_base_class = make_class(m, "Error", tuple_of(PyExc_RuntimeError),
                            "Any error raised by the qsmcore engine; .kind names the engine's ErrorKind.");
  struct KindClass {
    ErrorKind kind;
    const char* name;
    PyObject* builtin;
    const char* doc;
  };
  const KindClass kinds[] = {
      {ErrorKind::InvalidModel, "InvalidModelError", PyExc_ValueError, "The ONNX file is malformed or inconsistent."},
      {ErrorKind::Unsupported, "UnsupportedError", PyExc_NotImplementedError, "A valid construct qsmcore lacks."},
      {ErrorKind::InvalidInput, "InvalidInputError", PyExc_ValueError, "Arguments or arrays do not fit the model."},
      {ErrorKind::Io, "IoError", PyExc_OSError, "File system or network I/O failed."},
      {ErrorKind::OutOfBudget, "BudgetError", PyExc_MemoryError,
       "The memory budget would be exceeded (refused early)."},
      {ErrorKind::Checksum, "ChecksumError", PyExc_ValueError, "A weight file's SHA-256 does not match the registry."},
      {ErrorKind::Http, "HttpError", PyExc_OSError, "A download failed."},
      {ErrorKind::NotFound, "NotFoundError", PyExc_LookupError, "A model, file or value does not exist."},
      {ErrorKind::Internal, "InternalError", nullptr, "A bug in qsmcore: an invariant was broken."},
  };
  for (const KindClass& k : kinds) {
    PyObject* bases = tuple_of(g_base_class, k.builtin);
    g_kind_class[static_cast<int>(k.kind)] = make_class(m, k.name, bases, k.doc);
    // The enumerator's name without "Error" (e.g. "OutOfBudget"), stable for callers that branch.
    const std::string kind =
        k.kind == ErrorKind::OutOfBudget ? "OutOfBudget" : std::string(k.name, std::strlen(k.name) - 5);
    PyObject_SetAttrString(g_kind_class[static_cast<int>(k.kind)], "kind", py::str(kind).ptr());
  }
  PyObject_SetAttrString(g_base_class, "kind", py::none().ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const qsmcore::Error& e) {
      PyErr_SetString(g_kind_class[static_cast<int>(e.kind())], e.what());
    }
  });
}

}  // namespace qsmpy
