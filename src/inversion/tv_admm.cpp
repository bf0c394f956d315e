// TV-ADMM (Bilgic et al. 2014, doi:10.1002/mrm.25029; methods.md §6.3):
//   min ½‖F⁻¹DFx − f‖² + λ‖∇x‖₁ (anisotropic), split z = ∇x with the scaled dual u:
//   x = F⁻¹[(D·Ff + ρ·F∇ᵀ(z − u)) / (D² + ρL̂)]   (exact: periodic differences, L̂ the symbol of −Δ)
//   z = shrink(∇x + u, λ/ρ),  u ← u + ∇x − z
// until ‖x − x_prev‖ < tol·‖x‖ or max iterations. Starts from x = 0, z = u = 0 (the first
// x-update is Tikhonov with the gradient prior, λ = ρ). One FFT pair per iteration, all in f32.
#include <cmath>

#include "inversion/gradient_split.h"
#include "inversion/kspace.h"
#include "inversion/methods.h"
#include "physics/fft.h"
#include "qsmcore/error.h"

namespace qsmcore::inversion {
namespace {

// B̂ = D·F{f·mask}: the x-update's constant part.
AccountedArray<std::complex<float>> data_term(const Problem& p, const SpectrumAxes& axes, const float* dk,
                                              physics::RealFft3<float>& fft) {
  load_masked_field(fft, p.field, p.mask);
  fft.forward();
  AccountedArray<std::complex<float>> b(static_cast<std::size_t>(axes.count()));
  const std::complex<float>* s = fft.spectrum();
  parallel_for(axes.count(), true, [&](std::int64_t q) { b[static_cast<std::size_t>(q)] = dk[q] * s[q]; });
  return b;
}

// spectrum ← (B̂ + ρ·spectrum)/(D² + ρL̂), 0 where the denominator is (k = 0).
void tv_x_update(const SpectrumAxes& axes, const float* dk, const std::complex<float>* b, double rho,
                 std::complex<float>* spectrum) {
  const std::int64_t hx = axes.half_nx(), ny = axes.grid()[1];
  for_spectrum_planes(axes, [&](std::int64_t k) {
    const std::int64_t base = k * axes.plane();
    for (std::int64_t j = 0; j < ny; ++j)
      for (std::int64_t i = 0; i < hx; ++i) {
        const std::int64_t q = base + i + hx * j;
        const double den = static_cast<double>(dk[q]) * dk[q] + rho * axes.laplacian(i, j, k);
        const float inv = den > 0.0 ? static_cast<float>(1.0 / den) : 0.0f;
        spectrum[q] = (b[q] + static_cast<float>(rho) * spectrum[q]) * inv;
      }
  });
}

}  // namespace

Solution tv_admm(const Problem& p) {
  const InversionOptions& o = p.options;
  const double lambda = or_default(o.lambda, kTvLambda);
  const double rho = or_default(o.rho, kTvRhoPerLambda * lambda);
  const double tol = or_default(o.tolerance, kTvTolerance);
  const int max_it = or_default(o.max_iterations, kTvMaxIterations);
  const Vec3& voxel = p.field.voxel_mm();

  const SpectrumAxes axes(p.grid, voxel, p.b0_dir);
  physics::RealFft3<float> fft(p.grid, max_threads());
  AccountedArray<float> dk = dipole_table(axes);
  AccountedArray<std::complex<float>> b = data_term(p, axes, dk.data(), fft);
  const auto n = static_cast<std::size_t>(fft.real_count());
  Solution out;
  out.chi = AccountedArray<float>(n);                                                         // x = 0
  GradientSplit split{AccountedArray<float>(3 * n), static_cast<float>(lambda / rho), 1.0f};  // z = u = 0

  for (int it = 1; it <= max_it; ++it) {
    split_divergence(p.grid, voxel, split, fft.real());
    fft.forward();
    tv_x_update(axes, dk.data(), b.data(), rho, fft.spectrum());
    fft.inverse();
    const SplitSums sums = update_split(p.grid, voxel, fft.real(), out.chi.data(), split, false, split.t);
    out.iterations = it;
    out.final_change = sums.norm2 > 0.0 ? std::sqrt(sums.change2 / sums.norm2) : 0.0;
    p.progress(static_cast<double>(it) / max_it);
    if (!std::isfinite(out.final_change))
      throw Error(ErrorKind::Internal, "TV-ADMM diverged (a non-finite value at iteration " + std::to_string(it) + ")");
    if (out.final_change < tol) break;
  }
  p.progress(1.0);
  return out;
}

}  // namespace qsmcore::inversion
