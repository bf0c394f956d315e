// Closed-form inversions in k-space (methods.md §6.2): TKD (Shmueli et al. 2009,
// doi:10.1002/mrm.22135) and Tikhonov (Bilgic et al. 2014, doi:10.1002/jmri.24365). One FFT pair
// in f32; the kernel is evaluated as the spectrum is filtered, so nothing but the FFT's buffers
// is held.
#include <cmath>

#include "inversion/kspace.h"
#include "inversion/methods.h"
#include "physics/fft.h"
#include "qsmcore/error.h"

namespace qsmcore::inversion {
namespace {

// χ = F⁻¹{filter(D, L)·F{f·mask}}, the filter taking D and the Laplacian's symbol.
template <class Filter>
Solution filter_field(const Problem& p, Filter&& filter) {
  const SpectrumAxes axes(p.grid, p.field.voxel_mm(), p.b0_dir);
  physics::RealFft3<float> fft(p.grid, max_threads());
  load_masked_field(fft, p.field, p.mask);
  fft.forward();
  const std::int64_t hx = axes.half_nx(), ny = p.grid[1];
  for_spectrum_planes(axes, [&](std::int64_t k) {
    std::complex<float>* s = fft.spectrum() + k * axes.plane();
    for (std::int64_t j = 0; j < ny; ++j)
      for (std::int64_t i = 0; i < hx; ++i) *s++ *= static_cast<float>(filter(axes.dipole(i, j, k), axes, i, j, k));
  });
  fft.inverse();
  fft.release_spectrum();
  Solution out;
  out.chi = AccountedArray<float>(static_cast<std::size_t>(fft.real_count()));
  std::copy(fft.real(), fft.real() + fft.real_count(), out.chi.data());
  p.progress(1.0);
  return out;
}

}  // namespace

// As physics.h's tkd: 1/D where |D| ≥ t, else sign(D)/t (+ for D = 0), and 0 at k = 0, where the
// field says nothing about χ's mean.
Solution tkd_direct(const Problem& p) {
  const double t = or_default(p.options.threshold, kTkdThreshold);
  return filter_field(p, [t](double d, const SpectrumAxes&, std::int64_t i, std::int64_t j, std::int64_t k) {
    if (i == 0 && j == 0 && k == 0) return 0.0;
    if (std::abs(d) >= t) return 1.0 / d;
    return d < 0.0 ? -1.0 / t : 1.0 / t;
  });
}

// D/(D² + λΓ), Γ = 1 or the symbol of −Δ; 0 where the denominator is (k = 0 with the gradient).
Solution tikhonov_direct(const Problem& p) {
  const double lambda = or_default(p.options.lambda, kTikhonovLambda);
  const bool gradient = p.options.tikhonov_prior == TikhonovPrior::Gradient;
  return filter_field(p, [&](double d, const SpectrumAxes& axes, std::int64_t i, std::int64_t j, std::int64_t k) {
    const double den = d * d + lambda * (gradient ? axes.laplacian(i, j, k) : 1.0);
    return den > 0.0 ? d / den : 0.0;
  });
}

}  // namespace qsmcore::inversion
