// qsmcore.physics: the engine's own physics (physics.h, metrics.h, phantom.h) on arrays, so a
// notebook can simulate, invert and score with exactly the code the networks' glue uses. Arrays
// are (nx, ny, nz) in NIfTI index order; results are float64, Fortran-ordered.
#include "qsmcore/physics.h"

#include <pybind11/stl.h>

#include <string>

#include "bindings.h"
#include "convert.h"
#include "qsmcore/error.h"
#include "qsmcore/metrics.h"
#include "qsmcore/phantom.h"

namespace qsmpy {
namespace {

using qsmcore::Error;
using qsmcore::ErrorKind;

qsmcore::KernelOptions kernel_options(const std::string& variant) {
  if (variant == "lpcnn" || variant == "modl" || variant == "corner") return qsmcore::KernelOptions::lpcnn_modl();
  if (variant == "nextqsm") return qsmcore::KernelOptions::nextqsm();
  if (variant == "qsm_forward") return qsmcore::KernelOptions::qsm_forward();
  throw Error(ErrorKind::InvalidInput,
              "kernel '" + variant + "': expected 'corner' (= 'lpcnn', 'modl'), 'nextqsm' or 'qsm_forward'");
}

qsmcore::Padding padding_from(const std::string& p) {
  if (p == "none") return qsmcore::Padding::None;
  if (p == "zero") return qsmcore::Padding::ZeroTo2N;
  if (p == "corner") return qsmcore::Padding::CornerValueTo2N;
  throw Error(ErrorKind::InvalidInput, "padding '" + p + "': expected 'none', 'zero' or 'corner'");
}

qsmcore::Geometry geometry(const py::handle& voxel) {
  return make_geometry(to_vec3(voxel, "voxel_size"), py::none());
}

// The full-spectrum kernel on the FFT grid (DC at index 0 for the corner grid), in the same
// (nx, ny, nz) order as the volumes, so numpy.fft.fftn(chi) * D is the forward model's product.
py::array dipole_kernel(const std::vector<std::int64_t>& shape, const py::handle& voxel, const py::handle& b0_dir,
                        const std::string& variant, const py::object& dc_value) {
  if (shape.size() != 3) throw Error(ErrorKind::InvalidInput, "shape: expected (nx, ny, nz)");
  qsmcore::KernelOptions o = kernel_options(variant);
  if (!dc_value.is_none()) o.dc_value = dc_value.cast<double>();
  const qsmcore::Dims3 d{shape[0], shape[1], shape[2]};
  for (auto n : d)
    if (n <= 0) throw Error(ErrorKind::InvalidInput, "shape: every dimension must be positive");
  const qsmcore::Vec3 vox = to_vec3(voxel, "voxel_size"), b = to_vec3(b0_dir, "b0_dir");
  qsmcore::Volume k = qsmcore::Volume::zeros(d, qsmcore::Geometry::with_voxel(vox));
  {
    py::gil_scoped_release release;
    for (std::int64_t z = 0; z < d[2]; ++z)
      for (std::int64_t y = 0; y < d[1]; ++y)
        for (std::int64_t x = 0; x < d[0]; ++x) k.at(x, y, z) = qsmcore::dipole_value(d, vox, b, o, x, y, z);
  }
  return volume_to_numpy(std::move(k));
}

py::array forward_field(const py::handle& chi, const py::handle& b0_dir, const py::handle& voxel,
                        const std::string& variant, const std::string& padding) {
  const qsmcore::Volume c = volume_from_numpy(chi, geometry(voxel), "chi");
  qsmcore::ForwardOptions o;
  o.kernel = kernel_options(variant);
  o.padding = padding_from(padding);
  const qsmcore::Vec3 b = to_vec3(b0_dir, "b0_dir");
  qsmcore::Volume f = [&] {
    py::gil_scoped_release release;
    return qsmcore::forward_field(c, b, o);
  }();
  return volume_to_numpy(std::move(f));
}

py::array tkd(const py::handle& field, const py::handle& mask, const py::handle& b0_dir, const py::handle& voxel,
              double threshold, const std::string& variant, const std::string& padding) {
  const qsmcore::Geometry g = geometry(voxel);
  const qsmcore::Volume f = volume_from_numpy(field, g, "field"), m = volume_from_numpy(mask, g, "mask");
  qsmcore::TkdOptions o;
  o.threshold = threshold;
  o.kernel = kernel_options(variant);
  o.padding = padding_from(padding);
  const qsmcore::Vec3 b = to_vec3(b0_dir, "b0_dir");
  qsmcore::Volume chi = [&] {
    py::gil_scoped_release release;
    return qsmcore::tkd(f, m, b, o);
  }();
  return volume_to_numpy(std::move(chi));
}

py::dict metrics(const py::handle& pred, const py::handle& ref, const py::object& roi) {
  const qsmcore::Geometry g = geometry(py::make_tuple(1.0, 1.0, 1.0));
  const qsmcore::Volume p = volume_from_numpy(pred, g, "pred"), r = volume_from_numpy(ref, g, "ref");
  std::optional<qsmcore::Volume> mask;
  if (!roi.is_none()) mask.emplace(volume_from_numpy(roi, g, "roi"));
  const qsmcore::QsmMetrics q = qsmcore::compute_metrics(p, r, mask ? &*mask : nullptr);
  py::dict d;
  d["rmse"] = q.rmse;
  d["nrmse"] = q.nrmse;
  d["hfen"] = q.hfen;
  d["mad"] = q.mad;
  d["xsim"] = q.xsim;
  d["cc"] = q.cc;
  d["gxe"] = q.gxe;
  d["roi_voxels"] = q.roi_voxels;
  d["box"] = py::make_tuple(q.box_begin, q.box_end);
  return d;
}

py::dict head_phantom(const py::dict& kw) {
  qsmcore::PhantomOptions o;
  const auto dims = kw["shape"].cast<std::vector<std::int64_t>>();
  if (dims.size() != 3) throw Error(ErrorKind::InvalidInput, "shape: expected (nx, ny, nz)");
  o.dims = {dims[0], dims[1], dims[2]};
  o.voxel_mm = to_vec3(kw["voxel_size"], "voxel_size");
  o.b0_t = kw["b0"].cast<double>();
  o.b0_dir = to_vec3(kw["b0_dir"], "b0_dir");
  o.te_s = kw["te"].cast<std::vector<double>>();
  o.tr_s = kw["tr"].cast<double>();
  o.flip_deg = kw["flip"].cast<double>();
  if (!kw["calcification"].is_none()) o.calcification_ppm = kw["calcification"].cast<double>();
  o.background = kw["background"].cast<bool>();
  o.shim = kw["shim"].cast<bool>();
  o.phase_offset = kw["phase_offset"].cast<bool>();
  o.demean = kw["demean"].cast<bool>();
  if (kw.contains("extracerebral")) o.extracerebral = kw["extracerebral"].cast<bool>();
  if (kw.contains("air_outside")) o.air_outside = kw["air_outside"].cast<bool>();
  if (!kw["snr"].is_none()) o.peak_snr = kw["snr"].cast<double>();
  o.seed = kw["seed"].cast<std::uint64_t>();
  o.validate();
  qsmcore::Phantom p = [&] {
    py::gil_scoped_release release;
    return qsmcore::make_head_phantom(o);
  }();
  py::dict d;
  d["affine"] = affine_to_numpy(p.chi.affine());
  d["chi"] = volume_to_numpy(std::move(p.chi));
  d["total_field"] = volume_to_numpy(std::move(p.total_field));
  d["local_field"] = volume_to_numpy(std::move(p.local_field));
  d["mask"] = volume_to_numpy(std::move(p.mask));
  d["magnitude"] = volume_to_numpy(std::move(p.magnitude));
  d["phase"] = volume_to_numpy(std::move(p.phase));
  return d;
}

void bind_units(py::module_& p) {
  p.attr("GAMMA_BAR_HZ_PER_T") = qsmcore::kGammaBarHzPerT;
  p.def("hz_per_ppm", &qsmcore::hz_per_ppm, py::arg("b0"));
  p.def("phase_to_ppm", &qsmcore::phase_to_ppm, py::arg("phase"), py::arg("te"), py::arg("b0"));
  p.def("ppm_to_phase", &qsmcore::ppm_to_phase, py::arg("ppm"), py::arg("te"), py::arg("b0"));
  p.def("wrap_phase", &qsmcore::wrap_phase, py::arg("phase"));
  p.def(
      "b0_dir_from_affine",
      [](const py::object& affine) {
        return qsmcore::b0_dir_from_affine(make_geometry({1, 1, 1}, affine).affine);
      },
      py::arg("affine"));
}

}  // namespace

void bind_physics(py::module_& m) {
  py::module_ p = m.def_submodule("physics", "QSM physics: dipole kernel, forward model, TKD, metrics, phantom");
  bind_units(p);
  p.def("dipole_kernel", &dipole_kernel, py::arg("shape"), py::arg("voxel_size"), py::arg("b0_dir"), py::arg("variant"),
        py::arg("dc_value"));
  p.def("forward_field", &forward_field, py::arg("chi"), py::arg("b0_dir"), py::arg("voxel_size"), py::arg("variant"),
        py::arg("padding"));
  p.def("tkd", &tkd, py::arg("field"), py::arg("mask"), py::arg("b0_dir"), py::arg("voxel_size"), py::arg("threshold"),
        py::arg("variant"), py::arg("padding"));
  p.def("metrics", &metrics, py::arg("pred"), py::arg("ref"), py::arg("roi"));
  p.def("head_phantom", &head_phantom, py::arg("options"));
}

}  // namespace qsmpy
