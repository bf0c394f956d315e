// invert_dipole: checks the inputs, runs the chosen method on its FFT grid (methods.h), then
// crops χ back to the volume, zeroes it outside the mask and references it. Also the FFT grid and
// the memory prediction the pipeline plans with.
#include "qsmcore/inversion.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "inversion/kspace.h"
#include "inversion/methods.h"
#include "inversion/reduce.h"
#include "qsmcore/error.h"

namespace qsmcore {

InversionMethod parse_inversion_method(const std::string& name) {
  if (name == "tkd") return InversionMethod::Tkd;
  if (name == "tikhonov") return InversionMethod::Tikhonov;
  if (name == "tv") return InversionMethod::TvAdmm;
  if (name == "rts") return InversionMethod::Rts;
  if (name == "ilsqr") return InversionMethod::Ilsqr;
  throw Error(ErrorKind::InvalidInput,
              "unknown dipole inversion '" + name + "' (expected tkd, tikhonov, tv, rts or ilsqr)");
}

const char* to_string(InversionMethod m) {
  switch (m) {
    case InversionMethod::Tkd:
      return "tkd";
    case InversionMethod::Tikhonov:
      return "tikhonov";
    case InversionMethod::TvAdmm:
      return "tv";
    case InversionMethod::Rts:
      return "rts";
    case InversionMethod::Ilsqr:
      return "ilsqr";
  }
  return "?";
}

}  // namespace qsmcore

// The checks and the finish, in the inversion's own namespace so that a unity build's batch
// sees no second copy of these names.
namespace qsmcore::inversion {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorKind::InvalidInput, "dipole inversion: " + what);
}

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void check_number(double v, double lo, double hi, const char* name) {
  if (!std::isfinite(v) || v < lo || v > hi)
    invalid(std::string(name) + " must be in [" + number(lo) + ", " + number(hi) + "], got " + number(v));
}

void check_options(const InversionOptions& o) {
  // The threshold is on |D| ∈ [0, 2/3]: above 2/3 TKD would threshold every frequency, and RTS's
  // well-conditioned set would be empty.
  check_number(o.threshold, 0.0, 2.0 / 3.0, "the threshold");
  check_number(o.lambda, 0.0, 1e6, "lambda");
  check_number(o.rho, 0.0, 1e12, "rho");
  check_number(o.mu, 0.0, 1e12, "mu");
  check_number(o.tolerance, 0.0, 0.999, "the tolerance");
  if (o.data_erode < 0 || o.data_erode > 64)
    invalid("the data term's erosion must be in [0, 64] voxels, got " + std::to_string(o.data_erode));
  if (o.max_iterations < 0 || o.max_iterations > 100000)
    invalid("max iterations must be in [0, 100000], got " + std::to_string(o.max_iterations));
  if (o.lsmr_iterations < 0 || o.lsmr_iterations > 10000)
    invalid("LSMR iterations must be in [0, 10000], got " + std::to_string(o.lsmr_iterations));
  if (o.pad < -1 || o.pad > 4096)
    invalid("the padding must be −1 (none) or in [0, 4096], got " + std::to_string(o.pad));
  if (o.reference == Reference::Region && o.reference_region == nullptr)
    invalid("referencing to a region needs the region's mask");
  if (o.method == InversionMethod::Rts && o.threshold != 0.0 && o.threshold >= 2.0 / 3.0)
    invalid("RTS's δ must be below 2/3");
}

std::int64_t count_inside(const Volume& m, const Volume* also = nullptr) {
  const double* a = m.data();
  const double* b = also != nullptr ? also->data() : nullptr;
  return static_cast<std::int64_t>(block_sum(m.voxels(), [&](std::int64_t q) {
    return mask_inside(a[q]) && (b == nullptr || mask_inside(b[q])) ? 1.0 : 0.0;
  }));
}

void check_inputs(const Volume& field, const Volume& mask, const Vec3& b0_dir, const InversionOptions& o) {
  if (field.empty()) invalid("the field is empty");
  if (field.frames() != 1) invalid("the field must have one frame, got " + std::to_string(field.frames()));
  if (!same_grid(field, mask))
    invalid("the mask (" + describe_grid(mask) + ") is not on the field's grid (" + describe_grid(field) + ")");
  for (double b : b0_dir)
    if (!std::isfinite(b)) invalid("the B0 direction must be finite");
  if (b0_dir[0] == 0.0 && b0_dir[1] == 0.0 && b0_dir[2] == 0.0) invalid("the B0 direction must be non-zero");
  for (double v : field.voxel_mm())
    if (!(v > 0.0) || !std::isfinite(v)) invalid("voxel sizes must be positive");
  if (count_inside(mask) == 0) invalid("the mask is empty");
  const double* f = field.data();
  const double* m = mask.data();
  const double bad =
      block_sum(field.voxels(), [&](std::int64_t q) { return mask_inside(m[q]) && !std::isfinite(f[q]) ? 1.0 : 0.0; });
  if (bad > 0.0)
    invalid("the field has " + std::to_string(static_cast<std::int64_t>(bad)) + " non-finite values in the mask");
  check_options(o);
  if (o.reference == Reference::Region) {
    if (!same_grid(field, *o.reference_region))
      invalid("the reference region (" + describe_grid(*o.reference_region) + ") is not on the field's grid");
    if (count_inside(*o.reference_region, &mask) == 0) invalid("the reference region has no voxel inside the mask");
  }
}

// χ on the volume's grid: the grid's corner, 0 outside the mask, minus the reference's mean.
Volume finish(const float* x, const Dims3& grid, const Volume& field, const Volume& mask, const InversionOptions& o) {
  Volume chi = Volume::zeros_like(field, 1);
  const Dims3& d = field.dims();
  double* c = chi.data();
  const double* m = mask.data();
  parallel_for(d[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const std::int64_t q = i + d[0] * (j + d[1] * k);
        c[q] = mask_inside(m[q]) ? static_cast<double>(x[i + grid[0] * (j + grid[1] * k)]) : 0.0;
      }
  });
  reference_chi(chi, mask, o);
  return chi;
}

}  // namespace
}  // namespace qsmcore::inversion

namespace qsmcore {

void reference_chi(Volume& chi, const Volume& mask, const InversionOptions& o) {
  if (o.reference == Reference::None) return;
  if (o.reference == Reference::Region) {
    if (o.reference_region == nullptr)
      throw Error(ErrorKind::InvalidInput, "a reference region was asked for, but none was given");
    if (!same_grid(chi, *o.reference_region))
      throw Error(ErrorKind::InvalidInput, "the reference region (" + describe_grid(*o.reference_region) +
                                               ") is not on χ's grid (" + describe_grid(chi) + ")");
  }
  const Dims3& d = chi.dims();
  double* c = chi.data();
  const double* m = mask.data();
  const double* r = o.reference == Reference::Region ? o.reference_region->data() : m;
  const auto sums = inversion::plane_sums<2>(d[2], [&](std::int64_t k, std::array<double, 2>& s) {
    for (std::int64_t q = k * d[0] * d[1]; q < (k + 1) * d[0] * d[1]; ++q)
      if (mask_inside(r[q]) && mask_inside(m[q])) {
        s[0] += c[q];
        s[1] += 1.0;
      }
  });
  if (!(sums[1] > 0.0)) throw Error(ErrorKind::InvalidInput, "the reference region has no voxel inside the mask");
  const double mean = sums[0] / sums[1];
  parallel_for(chi.voxels(), true, [&](std::int64_t q) {
    if (mask_inside(m[q])) c[q] -= mean;
  });
}

Dims3 inversion_fft_dims(const Dims3& dims, const InversionOptions& o) {
  return inversion::fft_grid(dims, o.pad);
}

// From the arrays each method holds at once (f32 grid arrays of 4 bytes per FFT-grid voxel,
// half spectra of 8 bytes per half-spectrum value, the f32 kernel table of 4) and the finish's
// f32 χ with the f64 result; the tests compare it with the accounted peak.
std::int64_t predict_inversion_bytes(const Dims3& dims, const InversionOptions& o) {
  const Dims3 g = inversion::fft_grid(dims, o.pad);
  const std::int64_t real = 4 * g[0] * g[1] * g[2], half = 8 * (g[0] / 2 + 1) * g[1] * g[2], table = half / 2;
  const std::int64_t finish_bytes = real + 8 * dims[0] * dims[1] * dims[2];
  std::int64_t peak = 0;
  switch (o.method) {
    case InversionMethod::Tkd:
    case InversionMethod::Tikhonov:
      peak = std::max(real + half, 2 * real);
      break;
    case InversionMethod::TvAdmm:  // x, the split's 3 grids, the FFT, the kernel; the data term's
      // half spectrum, or with the data term on the mask its y grid and the x-update's half spectrum
      peak = (o.tv_masked_data ? 6 : 5) * real + table + 2 * half +
             (o.tv_masked_data && o.data_erode > 0 ? dims[0] * dims[1] * dims[2] : 0);  // W as bytes
      break;
    case InversionMethod::Rts:  // LSMR's five half spectra beside the FFT; then the ADMM's arrays
      peak = std::max(real + table + 6 * half, 5 * real + table + 2 * half);
      break;
    case InversionMethod::Ilsqr: {  // W, the FFT, LSQR's u (data and gradient parts: 4 grids), v, w
      // and x; with Laplacian weights, before that |∇²f| and its in-mask copy, and with the support
      // as well, the support as bytes
      const std::int64_t volume = 4 * dims[0] * dims[1] * dims[2];
      peak = 9 * real + table + half;
      if (o.laplacian_weights) peak = std::max({2 * volume, volume + real, peak + (o.support ? real / 4 : 0)});
      break;
    }
  }
  return std::max(peak, finish_bytes);
}

InversionResult invert_dipole(const Volume& local_field_ppm, const Volume& mask, const Vec3& b0_dir,
                              const InversionOptions& o) {
  inversion::check_inputs(local_field_ppm, mask, b0_dir, o);
  const inversion::Problem p{local_field_ppm, mask, b0_dir, inversion::fft_grid(local_field_ppm.dims(), o.pad), o};
  inversion::Solution s;
  switch (o.method) {
    case InversionMethod::Tkd:
      s = inversion::tkd_direct(p);
      break;
    case InversionMethod::Tikhonov:
      s = inversion::tikhonov_direct(p);
      break;
    case InversionMethod::TvAdmm:
      s = inversion::tv_admm(p);
      break;
    case InversionMethod::Rts:
      s = inversion::rts(p);
      break;
    case InversionMethod::Ilsqr:
      s = inversion::ilsqr(p);
      break;
  }
  InversionResult out;
  out.chi = inversion::finish(s.chi.data(), p.grid, local_field_ppm, mask, o);
  out.iterations = s.iterations;
  out.final_change = s.final_change;
  return out;
}

}  // namespace qsmcore
