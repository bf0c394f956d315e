// One function per area adds its classes and functions to the module (module.cpp calls them).
#pragma once
#include <pybind11/pybind11.h>

namespace qsmpy {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_onnx_model(py::module_& m);
void bind_registry(py::module_& m);
void bind_networks(py::module_& m);
void bind_physics(py::module_& m);
void bind_stages(py::module_& m);

}  // namespace qsmpy
