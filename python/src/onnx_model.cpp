// qsmcore.OnnxModel: load, inspect, plan and run an ONNX file. Inputs that are already
// C-contiguous, aligned arrays of the declared dtype are handed to the engine as borrowed views
// (Tensor::view): no copy. The addresses the engine got are kept for the tests' zero-copy check.
// run() and plan() release the GIL; one mutex per model serialises them (the plan cache is not
// shared-state safe), so other Python threads run meanwhile.
#include "qsmcore/onnx_model.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "qsmcore/error.h"

namespace qsmpy {
namespace {

using qsmcore::Error;
using qsmcore::ErrorKind;

struct PyOnnxModel {
  qsmcore::OnnxModel model;
  std::mutex mutex;
  std::map<std::string, std::uintptr_t> last_input_addresses;
};

qsmcore::ModelOptions make_options(int threads, std::int64_t mem_budget, const std::string& residency,
                                   const std::string& backend, bool spill, const std::string& spill_dir,
                                   const std::string& precision) {
  qsmcore::ModelOptions o;
  o.spill_activations = spill;
  o.spill_dir = spill_dir;
  if (threads < 0) throw Error(ErrorKind::InvalidInput, "threads must be >= 0 (0 or None: what the process may use)");
  o.threads = threads;
  o.mem_budget = mem_budget;
  if (mem_budget > 0) o.mem_budget_source = "mem_budget";
  o.residency = qsmcore::parse_residency(residency);
  o.backend = qsmcore::backend_from_string(backend);
  o.precision = qsmcore::precision_from_string(precision);
  return o;
}

py::tuple describe(const qsmcore::ValueDesc& d) {
  py::list shape;
  for (std::size_t i = 0; i < d.dims.size(); ++i) {
    const std::string param = i < d.dim_params.size() ? d.dim_params[i] : std::string();
    if (d.dims[i] >= 0)
      shape.append(d.dims[i]);
    else if (!param.empty())
      shape.append(param);
    else
      shape.append(py::none());
  }
  py::object dtype = py::str(qsmcore::dtype_name(d.dtype));
  try {
    dtype = to_numpy_dtype(d.dtype);
  } catch (const Error&) {
  }  // a dtype numpy lacks keeps its ONNX name
  return py::make_tuple(d.name, d.has_shape ? py::object(py::tuple(shape)) : py::object(py::none()), dtype);
}

// The engine tensor for graph input `d` from `value`: a borrowed view when the array's layout
// and dtype allow, else a C-contiguous copy that `keep` holds for the run. Bad dtypes raise.
qsmcore::Tensor input_tensor(const qsmcore::ValueDesc& d, const py::handle& value, std::vector<py::array>& keep) {
  py::array a = py::array::ensure(value);
  if (!a) throw Error(ErrorKind::InvalidInput, "input '" + d.name + "': expected an array");
  const qsmcore::DType dt = from_numpy_dtype(a.dtype());
  if (dt != d.dtype) {
    throw Error(ErrorKind::InvalidInput, "input '" + d.name + "': dtype " + std::string(py::str(a.dtype())) +
                                             " given, the model takes " + qsmcore::dtype_name(d.dtype) +
                                             " (convert with .astype)");
  }
  // Byte-swapped data would be read as garbage: bring it to native order (a copy, like any
  // layout the engine cannot read in place).
  if (!a.dtype().attr("isnative").cast<bool>()) a = a.attr("astype")(a.dtype().attr("newbyteorder")("="));
  const bool aligned = reinterpret_cast<std::uintptr_t>(a.data()) % a.itemsize() == 0;
  if (!(a.flags() & py::array::c_style) || !aligned)
    a = py::array::ensure(py::module_::import("numpy").attr("ascontiguousarray")(a));
  keep.push_back(a);
  qsmcore::Shape shape(a.shape(), a.shape() + a.ndim());
  return qsmcore::Tensor::view(dt, shape, const_cast<void*>(a.data()));
}

py::dict run(PyOnnxModel& self, const py::dict& feeds) {
  const auto& descs = self.model.inputs();
  for (const auto& item : feeds) {
    const std::string name = py::str(item.first);
    bool known = false;
    for (const auto& d : descs) known = known || d.name == name;
    if (!known) throw Error(ErrorKind::InvalidInput, "no graph input named '" + name + "'");
  }
  std::vector<py::array> keep;  // owns the arrays (and any copies) while the GIL is released
  std::vector<qsmcore::Tensor> inputs;
  std::map<std::string, std::uintptr_t> addresses;
  for (const auto& d : descs) {
    if (!feeds.contains(d.name)) throw Error(ErrorKind::InvalidInput, "input '" + d.name + "' not given");
    inputs.push_back(input_tensor(d, feeds[py::str(d.name)], keep));
    addresses[d.name] = reinterpret_cast<std::uintptr_t>(inputs.back().raw());
  }
  std::vector<qsmcore::Tensor> outputs;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    self.last_input_addresses = addresses;
    outputs = self.model.run(inputs);
  }
  py::dict out;
  for (std::size_t i = 0; i < outputs.size(); ++i)
    out[py::str(self.model.outputs().at(i).name)] = tensor_to_numpy(outputs[i]);
  return out;
}

py::dict plan(PyOnnxModel& self, const py::dict& shapes) {
  std::vector<qsmcore::Shape> s;
  for (const auto& d : self.model.inputs()) {
    if (!shapes.contains(d.name)) throw Error(ErrorKind::InvalidInput, "no shape given for input '" + d.name + "'");
    s.push_back(py::cast<qsmcore::Shape>(shapes[py::str(d.name)]));
  }
  qsmcore::PlanMemory pm;
  std::int64_t least = 0;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    pm = self.model.plan_memory(s);
    least = self.model.min_run_bytes(s);
  }
  py::dict r;
  r["peak_bytes"] = pm.run_peak_bytes();
  r["least_peak_bytes"] = least;
  r["arena_bytes"] = pm.arena_bytes;
  r["scratch_bytes"] = pm.scratch_bytes;
  r["packed_weight_bytes"] = pm.packed_weight_bytes;
  r["unit_weight_bytes"] = pm.unit_weight_bytes;
  r["table_bytes"] = pm.table_bytes;
  r["io_bytes"] = pm.io_bytes;
  r["weight_window_bytes"] = pm.weight_window_bytes;
  return r;
}

}  // namespace

void bind_onnx_model(py::module_& m) {
  py::class_<PyOnnxModel>(m, "_OnnxModel")
      .def(py::init([](const std::string& path, int threads, std::int64_t mem_budget, const std::string& residency,
                       const std::string& backend, bool spill, const std::string& spill_dir,
                       const std::string& precision) {
             const auto o = make_options(threads, mem_budget, residency, backend, spill, spill_dir, precision);
             py::gil_scoped_release release;
             return new PyOnnxModel{qsmcore::OnnxModel::load(path, o), {}, {}};
           }),
           py::arg("path"), py::arg("threads"), py::arg("mem_budget"), py::arg("residency"), py::arg("backend"),
           py::arg("spill"), py::arg("spill_dir"), py::arg("precision") = "f32")
      .def_property_readonly("path", [](PyOnnxModel& s) { return s.model.path(); })
      .def_property_readonly("inputs",
                             [](PyOnnxModel& s) {
                               py::list l;
                               for (const auto& d : s.model.inputs()) l.append(describe(d));
                               return l;
                             })
      .def_property_readonly("outputs",
                             [](PyOnnxModel& s) {
                               py::list l;
                               for (const auto& d : s.model.outputs()) l.append(describe(d));
                               return l;
                             })
      .def_property_readonly("threads", [](PyOnnxModel& s) { return s.model.options().threads; })
      .def_property_readonly("precision", [](PyOnnxModel& s) { return to_string(s.model.options().precision); })
      .def_property_readonly("mem_budget", [](PyOnnxModel& s) { return s.model.options().mem_budget; })
      .def_property_readonly("residency", [](PyOnnxModel& s) { return to_string(s.model.options().residency); })
      .def_property_readonly("backend", [](PyOnnxModel& s) { return to_string(s.model.options().backend); })
      .def("run", &run, py::arg("feeds"))
      .def("plan", &plan, py::arg("shapes"))
      .def("residency_report_json", [](PyOnnxModel& s) { return s.model.residency_report_json(); })
      .def("last_spill",
           [](PyOnnxModel& s) {
             const qsmcore::SpillReport r = s.model.last_spill();
             py::dict d = spill_dict(r.file_bytes, r.written, r.read, r.wait_seconds);
             d["io_seconds"] = r.io_seconds;
             d["dir"] = r.dir;
             return d;
           })
      .def("clear_plans",
           [](PyOnnxModel& s) {
             std::lock_guard<std::mutex> lock(s.mutex);
             s.model.clear_plans();
           })
      .def("_last_input_addresses", [](PyOnnxModel& s) {
        std::lock_guard<std::mutex> lock(s.mutex);
        return s.last_input_addresses;
      });
  m.attr("AUTO_MEM_BUDGET") = qsmcore::kAutoMemBudget;
}

}  // namespace qsmpy
