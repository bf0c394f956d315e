// The stage bindings' registration functions, one per file (stages*.cpp); bind_stages
// (bindings.h) calls them on the `stages` submodule.
#pragma once
#include <pybind11/pybind11.h>

namespace qsmpy::stages {

namespace py = pybind11;

void bind_scan_and_mask(py::module_& s);  // stages.cpp
void bind_unwrap(py::module_& s);         // stages_unwrap.cpp
void bind_field(py::module_& s);          // stages_field.cpp: field map, background removal, inversion
void bind_relaxometry(py::module_& s);    // stages_relaxometry.cpp
void bind_pipeline(py::module_& s);       // stages_pipeline.cpp

}  // namespace qsmpy::stages
