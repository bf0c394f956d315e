// iLSQR-class inversion: LSQR (Paige & Saunders 1982) on the data term inside the mask, χ supported
// in the mask, with a gradient (Tikhonov) penalty:
//   min ‖W·(F⁻¹DF(S·v) − f)‖² + λ‖∇v‖²,  χ = S·v,
// S the mask on the FFT grid (the identity with `support` off) and W the mask (or, with
// `laplacian_weights`, Li et al.'s weights), solved as the stacked least-squares system
// [W·F⁻¹DF·S; √λ∇]·v = [W·f; 0]. v outside S appears only in the penalty, which continues χ
// smoothly there, so the mask's edge is not pulled towards 0. LSQR stops when ‖Aᵀr‖ ≤ tol·‖A‖‖r‖
// (or ‖r‖ ≤ tol·‖b‖) or at max iterations.
//
// What it keeps of iLSQR (Li et al. 2015, doi:10.1016/j.neuroimage.2014.12.043; methods.md §6.5):
// its first step, LSQR on a weighted data term; the Laplacian weights are 1 where the field's
// Laplacian is small and fall linearly to 0 between its 60th and 99.9th percentiles inside the mask
// (QSM.rs's port of that step; on |∇²f| here, so that both signs of a large Laplacian count). What
// it does not: Li et al. regularise by stopping LSQR early, then estimate and subtract the
// streaking in the cone (steps 2–4: a FastQSM estimate and an LSMR fit in the ill-conditioned
// cone); here the penalty and the support do that job.
//
// Measured (demeaned NRMSE in the mask, noise-free / σ = 1 ppb; λ = 1e-3, tol 3e-3):
//                                       ellipsoids 128³   atlas 1.5 mm   atlas scan → PDF → χ
//   step 1 alone (Laplacian weights)    46 / 65 %          —              —
//   + gradient penalty                  46 / 48 %          39 / 41 %      90 %
//   + support, mask as W (the default)  10 / 20 %          16 / 23 %      139 %
//   + support, Laplacian weights        15 / 22 %          —              —
//   (TV-ADMM: 10 / 11 %, 32 / 33 %, 80 %; RTS: 35 / 37 %, 44 / 45 %, 74 %; TKD 24 / 31 %,
//   44 / 46 %, 96 %.) The support is what the local field means — the field of the sources inside
// the mask — and on a true local field it beats every other method here on the realistic (atlas)
// anatomy; but it must then explain whatever a background removal left behind with sources
// inside the mask, and after today's removals (last column: the atlas phantom's scan through the
// field pipeline with the true mask) it is the worst. Hence not the default method. The penalty's
// λ and the tolerance were chosen on the first two columns (λ 3e-3: 14 / 18 %; tol 1e-2 stops
// 1–2 points short).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "inversion/gradient_split.h"
#include "inversion/kspace.h"
#include "inversion/lsmr.h"
#include "inversion/methods.h"
#include "inversion/reduce.h"
#include "physics/fft.h"

namespace qsmcore::inversion {
namespace {

constexpr double kWeightLowPercentile = 60.0, kWeightHighPercentile = 99.9;

// Second difference of f at l along one axis inside the mask: central where both neighbours
// are in it, one-sided where only one side has two, else 0.
inline double second_difference(const double* f, const double* m, std::int64_t l, std::int64_t p, std::int64_t n,
                                std::int64_t stride) {
  const auto in = [&](std::int64_t q, std::int64_t steps) {
    const std::int64_t pos = q + steps;
    return pos >= 0 && pos < n && mask_inside(m[l + steps * stride]);
  };
  if (in(p, -1) && in(p, 1)) return f[l - stride] - 2.0 * f[l] + f[l + stride];
  if (in(p, 1) && in(p, 2)) return f[l] - 2.0 * f[l + stride] + f[l + 2 * stride];
  if (in(p, -1) && in(p, -2)) return f[l] - 2.0 * f[l - stride] + f[l - 2 * stride];
  return 0.0;
}

// |∇²f| inside the mask (0 outside), on the volume's grid.
AccountedArray<float> abs_laplacian(const Volume& field, const Volume& mask) {
  const Dims3& d = field.dims();
  const Vec3& h = field.voxel_mm();
  AccountedArray<float> lap(static_cast<std::size_t>(field.voxels()));
  const double* f = field.data();
  const double* m = mask.data();
  parallel_for(d[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const std::int64_t l = i + d[0] * (j + d[1] * k);
        if (!mask_inside(m[l])) continue;
        const double v = second_difference(f, m, l, i, d[0], 1) / (h[0] * h[0]) +
                         second_difference(f, m, l, j, d[1], d[0]) / (h[1] * h[1]) +
                         second_difference(f, m, l, k, d[2], d[0] * d[1]) / (h[2] * h[2]);
        lap[static_cast<std::size_t>(l)] = static_cast<float>(std::abs(v));
      }
  });
  return lap;
}

// The value at percentile `pct` of the first `count` values of v, interpolated linearly between
// order statistics (as QSM.rs's port computes it); reorders v.
double percentile(AccountedArray<float>& v, std::int64_t count, double pct) {
  const double h = pct / 100.0 * static_cast<double>(count - 1);
  const auto lo = static_cast<std::int64_t>(std::floor(h));
  std::nth_element(v.begin(), v.begin() + lo, v.begin() + count);
  const double a = v[static_cast<std::size_t>(lo)];
  if (lo + 1 >= count) return a;
  const double b = *std::min_element(v.begin() + lo + 1, v.begin() + count);
  return a + (h - static_cast<double>(lo)) * (b - a);
}

// The weights on the FFT grid: the mask (S), or with Li et al.'s Laplacian weights 1 below the
// low percentile of |∇²f|, 0 above the high one, linear between; 0 outside the mask and in the
// padding.
AccountedArray<float> data_weights(const Problem& p) {
  AccountedArray<float> lap;
  double lo = 0.0, hi = 0.0;
  if (p.options.laplacian_weights) {
    lap = abs_laplacian(p.field, p.mask);
    AccountedArray<float> inside(lap.size());
    std::int64_t count = 0;
    for (std::size_t q = 0; q < lap.size(); ++q)
      if (mask_inside(p.mask.data()[q])) inside[static_cast<std::size_t>(count++)] = lap[q];
    lo = percentile(inside, count, kWeightLowPercentile);
    hi = percentile(inside, count, kWeightHighPercentile);
  }
  const Dims3& g = p.grid;
  const Dims3& d = p.field.dims();
  AccountedArray<float> w(static_cast<std::size_t>(g[0] * g[1] * g[2]));
  parallel_for(d[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const std::int64_t l = i + d[0] * (j + d[1] * k);
        if (!mask_inside(p.mask.data()[l])) continue;
        double wt = 1.0;
        if (!lap.empty()) {
          const double v = lap[static_cast<std::size_t>(l)];
          wt = v <= lo ? 1.0 : v >= hi ? 0.0 : (hi - v) / (hi - lo);
        }
        w[static_cast<std::size_t>(i + g[0] * (j + g[1] * k))] = static_cast<float>(wt);
      }
  });
  return w;
}

// The support S as bytes on the FFT grid, when W is not S itself.
AccountedArray<std::uint8_t> support(const Problem& p) {
  const Dims3& g = p.grid;
  const Dims3& d = p.field.dims();
  AccountedArray<std::uint8_t> s(static_cast<std::size_t>(g[0] * g[1] * g[2]));
  parallel_for(d[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i)
        if (mask_inside(p.mask.data()[i + d[0] * (j + d[1] * k)]))
          s[static_cast<std::size_t>(i + g[0] * (j + g[1] * k))] = 1;
  });
  return s;
}

// real ← F⁻¹{D·F{real}}.
void apply_dipole(const SpectrumAxes& axes, const float* dk, physics::RealFft3<float>& fft) {
  fft.forward();
  std::complex<float>* s = fft.spectrum();
  parallel_for(axes.count(), true, [&](std::int64_t q) { s[q] *= dk[q]; });
  fft.inverse();
}

// A = [W·F⁻¹DF·S; √λ·∇] on the FFT grid: u holds the weighted data part (n values) and the
// gradient part (3n). S is the identity unless `constrained`; then `in` (bytes) when given, else W
// (then the mask itself).
struct WeightedSystem {
  const Problem& p;
  const SpectrumAxes& axes;
  const float* dk;
  const float* w;
  const std::uint8_t* in;
  physics::RealFft3<float>& fft;
  float root_lambda;

  bool constrained;  // χ = S·v; else χ = v

  bool supported(std::int64_t q) const {
    if (!constrained) return true;
    return in != nullptr ? in[q] != 0 : w[q] != 0.0f;
  }

  LinearOperator op() const {
    const std::int64_t n = fft.real_count();
    LinearOperator A;
    A.n = n;
    A.m = 4 * n;
    A.a_step = [this, n](const float* v, double alpha, float* u) {  // u ← A·v − αu
      float* r = fft.real();
      parallel_for(n, true, [&](std::int64_t q) { r[q] = supported(q) ? v[q] : 0.0f; });
      apply_dipole(axes, dk, fft);
      const auto a = static_cast<float>(alpha);
      parallel_for(n, true, [&](std::int64_t q) { u[q] = w[q] * r[q] - a * u[q]; });
      gradient_step(p.grid, p.field.voxel_mm(), v, root_lambda, a, u + n);
    };
    A.at_step = [this, n](const float* u, double beta, float* v) {  // v ← Aᵀ·u − βv
      float* r = fft.real();
      parallel_for(n, true, [&](std::int64_t q) { r[q] = w[q] * u[q]; });
      apply_dipole(axes, dk, fft);
      const auto b = static_cast<float>(beta);
      parallel_for(n, true, [&](std::int64_t q) { v[q] = (supported(q) ? r[q] : 0.0f) - b * v[q]; });
      gradient_adjoint_add(p.grid, p.field.voxel_mm(), u + n, root_lambda, v);
    };
    A.norm_u = [m = A.m](const float* a) { return norm(a, m); };
    A.norm_v = [n](const float* a) { return norm(a, n); };
    return A;
  }
  static double norm(const float* a, std::int64_t len) {
    return std::sqrt(block_sum(len, [a](std::int64_t q) { return static_cast<double>(a[q]) * a[q]; }));
  }
};

}  // namespace

Solution ilsqr(const Problem& p) {
  const InversionOptions& o = p.options;
  const double tol = or_default(o.tolerance, kIlsqrTolerance);
  const double lambda = or_default(o.lambda, kIlsqrLambda);
  const int max_it = or_default(o.max_iterations, kIlsqrMaxIterations);
  AccountedArray<float> w = data_weights(p);
  AccountedArray<std::uint8_t> in;
  if (o.support && o.laplacian_weights) in = support(p);
  const SpectrumAxes axes(p.grid, p.field.voxel_mm(), p.b0_dir);
  physics::RealFft3<float> fft(p.grid, max_threads());
  AccountedArray<float> dk = dipole_table(axes);
  const WeightedSystem sys{
      p,        axes, dk.data(), w.data(), in.empty() ? nullptr : in.data(), fft, static_cast<float>(std::sqrt(lambda)),
      o.support};
  const LinearOperator A = sys.op();

  load_masked_field(fft, p.field, p.mask);  // b = (W·f, 0)
  AccountedArray<float> b(static_cast<std::size_t>(A.m));
  parallel_for(A.n, true, [&](std::int64_t q) {
    b[static_cast<std::size_t>(q)] = w[static_cast<std::size_t>(q)] * fft.real()[q];
  });
  KrylovOptions ko;
  ko.max_iterations = max_it;
  ko.rtol = ko.artol = tol;
  ko.on_iteration = [&](int it) { p.progress(static_cast<double>(it) / max_it); };
  KrylovResult r = lsqr(A, std::move(b), ko);
  Solution out;
  out.chi = std::move(r.x);
  out.iterations = r.iterations;
  out.final_change = r.residual;
  p.progress(1.0);
  return out;
}

}  // namespace qsmcore::inversion
