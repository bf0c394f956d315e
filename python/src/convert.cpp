#include "convert.h"

#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "qsmcore/error.h"

namespace qsmpy {

using qsmcore::DType;
using qsmcore::Error;
using qsmcore::ErrorKind;

namespace {

// Engine dtype <-> numpy type character code, in one table so both directions agree.
struct DTypePair {
  DType engine;
  char numpy;
};
constexpr DTypePair kDTypes[] = {
    {DType::F32, 'f'}, {DType::F64, 'd'}, {DType::F16, 'e'}, {DType::U8, 'B'},  {DType::I8, 'b'},  {DType::U16, 'H'},
    {DType::I16, 'h'}, {DType::I32, 'i'}, {DType::I64, 'q'}, {DType::U32, 'I'}, {DType::U64, 'Q'}, {DType::Bool, '?'},
};

}  // namespace

py::dtype to_numpy_dtype(DType t) {
  for (const auto& p : kDTypes)
    if (p.engine == t) return py::dtype(std::string(1, p.numpy));
  throw Error(ErrorKind::Unsupported, std::string("no numpy dtype for ") + qsmcore::dtype_name(t));
}

DType from_numpy_dtype(const py::dtype& d) {
  // kind + itemsize identify the type regardless of the platform's long/long long spelling.
  for (const auto& p : kDTypes) {
    const py::dtype c(std::string(1, p.numpy));
    if (c.kind() == d.kind() && c.itemsize() == d.itemsize()) return p.engine;
  }
  return DType::Undefined;
}

qsmcore::Vec3 to_vec3(const py::handle& seq, const std::string& what) {
  const auto v = py::cast<std::vector<double>>(seq);
  if (v.size() != 3)
    throw Error(ErrorKind::InvalidInput, what + ": expected 3 values, got " + std::to_string(v.size()));
  return {v[0], v[1], v[2]};
}

qsmcore::Geometry make_geometry(const qsmcore::Vec3& voxel_mm, const py::object& affine) {
  for (double v : voxel_mm)
    if (!(v > 0.0)) throw Error(ErrorKind::InvalidInput, "voxel_size: every voxel edge must be positive (mm)");
  qsmcore::Geometry g = qsmcore::Geometry::with_voxel(voxel_mm);
  if (affine.is_none()) return g;
  const auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(affine);
  if (!a || a.ndim() != 2 || a.shape(0) != 4 || a.shape(1) != 4)
    throw Error(ErrorKind::InvalidInput, "affine: expected a 4x4 matrix");
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) g.affine.m[r][c] = a.at(r, c);
  return g;
}

py::array_t<double> affine_to_numpy(const qsmcore::Affine& a) {
  py::array_t<double> out({4, 4});
  auto m = out.mutable_unchecked<2>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) m(r, c) = a.m[r][c];
  return out;
}

qsmcore::Volume volume_from_numpy(const py::handle& array, const qsmcore::Geometry& g, const std::string& what,
                                  bool allow_frames) {
  // Fortran order is the volume's own layout, so the conversion is one memcpy (plus numpy's
  // cast/transposition when the caller's array differs).
  const auto a = py::array_t<double, py::array::f_style | py::array::forcecast>::ensure(array);
  if (!a) throw Error(ErrorKind::InvalidInput, what + ": expected a numeric array");
  const py::ssize_t nd = a.ndim();
  if (nd != 3 && !(allow_frames && nd == 4))
    throw Error(ErrorKind::InvalidInput, what + ": expected a 3-D array" +
                                             (allow_frames ? " (or 4-D, frames last)" : "") + ", got " +
                                             std::to_string(nd) + "-D");
  const qsmcore::Dims3 dims{a.shape(0), a.shape(1), a.shape(2)};
  const std::int64_t frames = nd == 4 ? a.shape(3) : 1;
  if (dims[0] * dims[1] * dims[2] * frames == 0) throw Error(ErrorKind::InvalidInput, what + ": the array is empty");
  qsmcore::Volume v = qsmcore::Volume::zeros(dims, g, frames);
  std::memcpy(v.data(), a.data(), static_cast<std::size_t>(v.size()) * sizeof(double));
  return v;
}

py::array volume_to_numpy(qsmcore::Volume&& v) {
  auto* owned = new qsmcore::Volume(std::move(v));
  py::capsule base(owned, [](void* p) { delete static_cast<qsmcore::Volume*>(p); });
  const auto d = static_cast<py::ssize_t>(sizeof(double));
  std::vector<py::ssize_t> shape{owned->nx(), owned->ny(), owned->nz()};
  std::vector<py::ssize_t> strides{d, d * owned->nx(), d * owned->nx() * owned->ny()};
  if (owned->frames() > 1) {
    shape.push_back(owned->frames());
    strides.push_back(d * owned->voxels());
  }
  return py::array(py::dtype::of<double>(), shape, strides, owned->data(), base);
}

py::array tensor_to_numpy(const qsmcore::Tensor& t) {
  const py::dtype dt = to_numpy_dtype(t.dtype());
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  if (!t.owns_storage()) {
    // A view into memory the engine may reuse: the caller gets its own copy.
    py::array out(dt, shape);
    std::memcpy(out.mutable_data(), t.raw(), t.nbytes());
    return out;
  }
  auto* owned = new qsmcore::Tensor(t);  // shares the accounted buffer, no byte copied
  py::capsule base(owned, [](void* p) { delete static_cast<qsmcore::Tensor*>(p); });
  return py::array(dt, shape, owned->raw(), base);
}

py::dict spill_dict(std::uint64_t file_bytes, std::uint64_t written, std::uint64_t read, double wait_seconds) {
  py::dict d;
  d["spilled"] = written + read > 0;
  d["file_bytes"] = file_bytes;
  d["written_bytes"] = written;
  d["read_bytes"] = read;
  d["wait_seconds"] = wait_seconds;
  return d;
}

}  // namespace qsmpy
