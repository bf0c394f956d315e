// A data-consistency step for a χ map made elsewhere (a network's): the χ inside the mask
// nearest it that the measured field inside the mask agrees with (methods.md §6.7),
//   χ = argmin over χ = Mχ of ‖M(D χ − f)‖² + λ ‖χ − χ₀‖²,
// by conjugate gradients on the normal equations (M D M D M + λ M) χ = M D M f + λ M χ₀, started at
// M χ₀, D the dipole convolution on the FFT grid. It is the data-consistency block of model-based networks
// (MoDL: Aggarwal et al. 2019, doi:10.1109/TMI.2018.2865356; for QSM, LPCNN: Lai et al. 2020,
// doi:10.1007/978-3-030-59713-9_13), applied once after a network: off the dipole's cone χ
// follows the data, near it (where D is small and the data say little) the network's prior. The
// mask keeps the data term to where the field was measured (outside it the field is unknown, not
// 0) and χ to where the sources are: on held-out heads χ left free outside the mask (to absorb what
// the field does not explain) was 4 points of NRMSE worse (methods.md §6.7). `data_erode` shrinks
// the data term's mask only (W below, W = M when 0): a pipeline's local field is least right within
// a few voxels of the brain's edge (3/4 of its error within 4 mm on the atlas head), where
// fitting it puts background removal's leftovers into χ; the rim's χ then follows the prior and
// whatever explains the interior's field. The equations become (M D W D M + λ M) χ = M D W f + λ M χ₀.
#include <algorithm>
#include <cmath>

#include "core/accounted_array.h"
#include "core/mask_bytes.h"
#include "core/parallel.h"
#include "inversion/kspace.h"
#include "inversion/reduce.h"
#include "physics/fft.h"
#include "qsmcore/error.h"
#include "qsmcore/inversion.h"

namespace qsmcore {
namespace {

using inversion::block_sum;
using inversion::SpectrumAxes;

// The operator's pieces on the FFT grid: the dipole convolution and the mask of measured voxels.
class Normal {
 public:
  // W is made first: erosion's second byte a voxel is gone before the FFT's buffers exist.
  Normal(const Volume& mask, int data_erode, const SpectrumAxes& axes)
      : mask_(mask),
        axes_(axes),
        data_(masking::eroded_bytes(mask, data_erode, "data consistency: the mask")),
        fft_(axes.grid(), max_threads()),
        dk_(inversion::dipole_table(axes)) {}

  std::int64_t size() const { return fft_.real_count(); }

  /// out = D·in (in and out may be the same array).
  void dipole(const float* in, float* out) {
    float* re = fft_.real();
    const std::int64_t n = size();
    parallel_for(n, true, [&](std::int64_t q) { re[q] = in[q]; });
    fft_.forward();
    std::complex<float>* s = fft_.spectrum();
    const float* dk = dk_.data();
    parallel_for(axes_.count(), true, [&](std::int64_t q) { s[q] *= dk[q]; });
    fft_.inverse();
    parallel_for(n, true, [&](std::int64_t q) { out[q] = re[q]; });
  }

  /// f(q, volume_index, inside) for every grid voxel, `inside` whether it is in the volume and the
  /// mask; `volume_index` is its index in the volume (−1 in the padding).
  template <class F>
  void for_grid(F&& f) const {
    const Dims3& g = axes_.grid();
    const Dims3& d = mask_.dims();
    const double* m = mask_.data();
    parallel_for(g[2], true, [&](std::int64_t k) {
      for (std::int64_t j = 0; j < g[1]; ++j)
        for (std::int64_t i = 0; i < g[0]; ++i) {
          const bool in_volume = i < d[0] && j < d[1] && k < d[2];
          const std::int64_t v = in_volume ? i + d[0] * (j + d[1] * k) : -1;
          f(i + g[0] * (j + g[1] * k), v, in_volume && mask_inside(m[v]));
        }
    });
  }

  /// Whether the data term counts the voxel at `volume_index`, one `inside` the mask (W).
  bool measured(std::int64_t volume_index, bool inside) const {
    return inside && (data_.size() == 0 || data_[static_cast<std::size_t>(volume_index)] != 0);
  }

  /// v = M v.
  void restrict(float* v) const {
    for_grid([&](std::int64_t q, std::int64_t, bool inside) {
      if (!inside) v[q] = 0.0f;
    });
  }

  /// v = W v.
  void restrict_to_data(float* v) const {
    for_grid([&](std::int64_t q, std::int64_t vi, bool inside) {
      if (!measured(vi, inside)) v[q] = 0.0f;
    });
  }

  /// out = (M D W D + λ) in, for `in` = M in.
  void apply(const float* in, double lambda, float* out) {
    dipole(in, out);
    restrict_to_data(out);
    dipole(out, out);
    restrict(out);
    const auto l = static_cast<float>(lambda);
    parallel_for(size(), true, [&](std::int64_t q) { out[q] += l * in[q]; });
  }

 private:
  const Volume& mask_;
  const SpectrumAxes& axes_;
  masking::MaskBytes data_;  // W when the data term's mask is eroded; empty when W = M
  physics::RealFft3<float> fft_;
  AccountedArray<float> dk_;
};

double dot(const float* a, const float* b, std::int64_t n) {
  return block_sum(n, [&](std::int64_t q) { return static_cast<double>(a[q]) * b[q]; });
}

void check(const Volume& prior, const Volume& field, const Volume& mask, const ConsistencyOptions& o) {
  if (!same_grid(prior, field) || !same_grid(mask, field))
    throw Error(ErrorKind::InvalidInput, "data consistency: χ (" + describe_grid(prior) + "), the field (" +
                                             describe_grid(field) + ") and the mask (" + describe_grid(mask) +
                                             ") must share one grid");
  if (!(o.lambda > 0.0) || !std::isfinite(o.lambda))
    throw Error(ErrorKind::InvalidInput, "data consistency: λ must be a positive number");
  if (o.iterations < 0) throw Error(ErrorKind::InvalidInput, "data consistency: the iterations must be ≥ 0");
  if (o.data_erode < 0) throw Error(ErrorKind::InvalidInput, "data consistency: data_erode must be ≥ 0 voxels");
}

}  // namespace

Volume consistent_chi(const Volume& prior, const Volume& field_ppm, const Volume& mask, const Vec3& b0_dir,
                      const ConsistencyOptions& o) {
  check(prior, field_ppm, mask, o);
  const SpectrumAxes axes(inversion::fft_grid(field_ppm.dims(), o.pad), field_ppm.voxel_mm(), b0_dir);
  const auto n = static_cast<std::size_t>(axes.grid()[0] * axes.grid()[1] * axes.grid()[2]);
  AccountedArray<float> x(n), r(n), p(n), q(n);
  {
    Normal a(mask, o.data_erode, axes);
    const std::int64_t g = a.size();
    // x = M χ₀; r = M D W (f − D x), the normal equations' residual at x (λ's terms cancel there).
    a.for_grid([&](std::int64_t i, std::int64_t v, bool inside) {
      x[i] = inside ? static_cast<float>(prior.data()[v]) : 0.0f;
    });
    a.dipole(x.data(), r.data());
    a.for_grid([&](std::int64_t i, std::int64_t v, bool inside) {
      r[i] = a.measured(v, inside) ? static_cast<float>(field_ppm.data()[v]) - r[i] : 0.0f;
    });
    a.dipole(r.data(), r.data());
    a.restrict(r.data());
    std::copy(r.begin(), r.end(), p.begin());
    double rr = dot(r.data(), r.data(), g);
    const double stop = rr * o.tolerance * o.tolerance;
    for (int it = 0; it < o.iterations && rr > stop && rr > 0.0; ++it) {
      a.apply(p.data(), o.lambda, q.data());
      const double alpha = rr / dot(p.data(), q.data(), g);
      const auto af = static_cast<float>(alpha);
      parallel_for(g, true, [&](std::int64_t i) {
        x[i] += af * p[i];
        r[i] -= af * q[i];
      });
      const double next = dot(r.data(), r.data(), g);
      const auto beta = static_cast<float>(next / rr);
      parallel_for(g, true, [&](std::int64_t i) { p[i] = r[i] + beta * p[i]; });
      rr = next;
      if (o.progress) o.progress(static_cast<double>(it + 1) / o.iterations);
    }
  }
  r.reset();
  p.reset();
  q.reset();
  Volume out = Volume::zeros_like(field_ppm, 1);
  const Dims3& d = field_ppm.dims();
  const Dims3& g = axes.grid();
  const double* m = mask.data();
  parallel_for(d[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const std::int64_t v = i + d[0] * (j + d[1] * k);
        out.data()[v] = mask_inside(m[v]) ? static_cast<double>(x[i + g[0] * (j + g[1] * k)]) : 0.0;
      }
  });
  return out;
}

std::int64_t predict_consistency_bytes(const Dims3& dims, const ConsistencyOptions& o) {
  const Dims3 g = inversion::fft_grid(dims, o.pad);
  const std::int64_t real = 4 * g[0] * g[1] * g[2], half = 8 * (g[0] / 2 + 1) * g[1] * g[2], table = half / 2;
  // The four CG vectors beside the FFT (its real buffer and half spectrum), the kernel and the
  // eroded data mask (a byte a voxel; erosion's own work array beside it while it is made, before
  // the FFT); then x beside the f64 χ it becomes.
  const std::int64_t voxels = dims[0] * dims[1] * dims[2], data_mask = o.data_erode > 0 ? voxels : 0;
  return std::max(5 * real + half + table + data_mask, real + 8 * voxels);
}

}  // namespace qsmcore
