// Conversions between NumPy arrays and the engine's public types, shared by the binding files.
// Volumes are column-major (x fastest) like NIfTI and nibabel's arrays, so a volume maps onto a
// Fortran-ordered (nx, ny, nz[, frames]) array; tensors are row-major (C order).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>

#include "qsmcore/physics.h"
#include "qsmcore/tensor.h"
#include "qsmcore/volume.h"

namespace qsmpy {

namespace py = pybind11;

/// The numpy dtype of an engine dtype; Error{Unsupported} for strings and undefined.
py::dtype to_numpy_dtype(qsmcore::DType t);
/// The engine dtype of a numpy dtype; DType::Undefined when it has none.
qsmcore::DType from_numpy_dtype(const py::dtype& d);

/// Geometry from a voxel size and an optional 4×4 affine (None: diag(voxel, 1)).
qsmcore::Geometry make_geometry(const qsmcore::Vec3& voxel_mm, const py::object& affine);
/// The affine as a 4×4 float64 array.
py::array_t<double> affine_to_numpy(const qsmcore::Affine& a);

/// A Volume holding a copy of a 3-D (or 4-D: frames last) array, converted to float64.
/// `what` names the argument in errors (ValueError-mapped InvalidInput).
qsmcore::Volume volume_from_numpy(const py::handle& array, const qsmcore::Geometry& g, const std::string& what,
                                  bool allow_frames = false);
/// The volume's values as a Fortran-ordered (nx, ny, nz) array ((…, frames) when frames > 1)
/// that owns the volume: no copy.
py::array volume_to_numpy(qsmcore::Volume&& v);
/// A tensor as an array sharing its storage (owned tensors) or a copy (views).
py::array tensor_to_numpy(const qsmcore::Tensor& t);

qsmcore::Vec3 to_vec3(const py::handle& seq, const std::string& what);

/// What an activation spill did, as the dict run_network's info["spill"] and
/// OnnxModel.last_spill() return (spilled, file_bytes, written_bytes, read_bytes, wait_seconds).
py::dict spill_dict(std::uint64_t file_bytes, std::uint64_t written, std::uint64_t read, double wait_seconds);

}  // namespace qsmpy
