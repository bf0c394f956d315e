// RESHARP (Sun & Wilman 2014, doi:10.1002/mrm.24765): SHARP's deconvolution as Tikhonov-
// regularised least squares, argmin_x ‖M_e·C(x − f)‖² + λ‖x‖² with C = (δ − S)∗, solved by
// conjugate gradients on the normal equations (C·M_e·C + λ)x = C·M_e·C·f; local = M_e·x.
//
// The grid: M_e·C only reads the sphere around voxels of M_e, which lies inside the mask, and
// C·(M_e·y) reaches at most r past M_e, still inside the volume, so each circular convolution on
// the FFT grid equals the linear one and no padding beyond a fast size is needed; from x₀ = 0
// every CG vector stays on the volume (up to rounding). The CG runs on the half spectra of x, r
// and p (inner products by Parseval), so that one step costs two transforms (C·p back to image
// space for M_e, and forward again), not four.
#include <cmath>
#include <complex>

#include "bgremove/methods.h"
#include "bgremove/smv_kernel.h"
#include "bgremove/smv_methods.h"
#include "qsmcore/masking.h"

namespace qsmcore::bgremove {
namespace {

// fft.spectrum() = F(C·M_e·C·y), given fft.spectrum() = F(y).
template <class T>
void spectral_normal_operator(physics::RealFft3<T>& fft, const T* c, const Dims3& dims, const std::uint8_t* eroded) {
  multiply_spectrum(fft, c);
  fft.inverse();
  keep_inside(fft, dims, eroded);
  fft.forward();
  multiply_spectrum(fft, c);
}

// Conjugate gradients (Hestenes & Stiefel 1952) on (C·M_e·C + λ)x = b, on half spectra at the
// FFT's precision; the FFT's spectrum buffer holds A·p during a step.
template <class T>
struct SpectralCg {
  using Cx = std::complex<T>;
  physics::RealFft3<T>& fft;
  const T* c;
  const Dims3& dims;
  const std::uint8_t* eroded;
  double lambda;
  AccountedArray<Cx> x, r, p;
  double rr = 0.0;

  // Σ over the half spectrum of w·Re(conj(a)·(b + λ·l)) per plane, added in order: the image-space
  // inner product ⟨a, b + λl⟩ times the grid's voxels (Parseval). w = 2 for the x frequencies
  // whose mirror image the half spectrum leaves out, 1 for x = 0 and the Nyquist plane (the grid
  // is even). `l` may be null.
  double dot(const Cx* a, const Cx* b, const Cx* l) const {
    const Dims3& g = fft.dims();
    const std::int64_t hx = g[0] / 2 + 1;
    return ordered_sum(g[2], true, [&](std::int64_t k) {
      double sum = 0.0;
      for (std::int64_t row = k * g[1]; row < (k + 1) * g[1]; ++row)
        for (std::int64_t i = 0, n = row * hx; i < hx; ++i, ++n) {
          const double w = (i == 0 || i == hx - 1) ? 1.0 : 2.0;
          std::complex<double> bv(b[n]);
          if (l != nullptr) bv += lambda * std::complex<double>(l[n]);
          sum += w * (static_cast<double>(a[n].real()) * bv.real() + static_cast<double>(a[n].imag()) * bv.imag());
        }
      return sum;
    });
  }

  // r = p = b, from fft.spectrum() = F(b); x = 0.
  void start() {
    std::copy(fft.spectrum(), fft.spectrum() + fft.spectrum_count(), r.data());
    std::copy(fft.spectrum(), fft.spectrum() + fft.spectrum_count(), p.data());
    rr = dot(r.data(), r.data(), nullptr);
  }

  // One step; false when p·Ap ≤ 0 (the residual is already at rounding level).
  bool step() {
    std::copy(p.data(), p.data() + p.size(), fft.spectrum());
    spectral_normal_operator(fft, c, dims, eroded);
    const Cx* ap = fft.spectrum();
    const double pap = dot(p.data(), ap, p.data());
    if (!(pap > 0.0)) return false;
    const T alpha = static_cast<T>(rr / pap);
    const T lam = static_cast<T>(lambda);
    parallel_for(static_cast<std::int64_t>(p.size()), true, [&](std::int64_t n) {
      x[n] += alpha * p[n];
      r[n] -= alpha * (ap[n] + lam * p[n]);
    });
    const double rr_next = dot(r.data(), r.data(), nullptr);
    const T beta = static_cast<T>(rr_next / rr);
    rr = rr_next;
    parallel_for(static_cast<std::int64_t>(p.size()), true, [&](std::int64_t n) { p[n] = r[n] + beta * p[n]; });
    return true;
  }
};

}  // namespace

template <class T>
BfrResult resharp_t(const Volume& field, const Volume& mask, const BfrOptions& o) {
  const double radius = o.radii_mm.empty() ? kResharpRadiusMm : o.radii_mm.front();
  const double tol = o.tolerance > 0.0 ? o.tolerance : kResharpTolerance;
  const int max_it = o.max_iterations > 0 ? o.max_iterations : kResharpIterations;
  const double mean = checked_mean_inside(field, mask);
  check_radius(field.voxel_mm(), radius);
  BfrResult res;
  res.mask = eroded_or_throw(mask, radius, "RESHARP");
  report(o, 0.05);
  const Dims3& d = field.dims();
  physics::RealFft3<T> fft(smv_grid(d), max_threads());
  {
    const AccountedArray<std::uint8_t> eroded = mask_bytes(res.mask);
    const AccountedArray<T> c = smv_complement(fft, field.voxel_mm(), radius);
    const auto n = static_cast<std::size_t>(fft.spectrum_count());
    SpectralCg<T> cg{fft,
                     c.data(),
                     d,
                     eroded.data(),
                     o.lambda > 0.0 ? o.lambda : kResharpLambda,
                     AccountedArray<std::complex<T>>(n),
                     AccountedArray<std::complex<T>>(n),
                     AccountedArray<std::complex<T>>(n)};
    load_field(fft, field, mask, mean);
    fft.forward();
    spectral_normal_operator(fft, c.data(), d, eroded.data());  // b = C·M_e·C·f
    cg.start();
    const double b_norm = std::sqrt(cg.rr);
    while (b_norm > 0.0 && res.iterations < max_it && std::sqrt(cg.rr) > tol * b_norm && cg.step()) {
      ++res.iterations;
      report(o, 0.05 + 0.9 * static_cast<double>(res.iterations) / max_it);
    }
    res.residual = b_norm > 0.0 ? std::sqrt(cg.rr) / b_norm : 0.0;
    std::copy(cg.x.data(), cg.x.data() + n, fft.spectrum());
    fft.inverse();
  }
  // The CG's arrays and the spectrum are gone before the f64 output is made from x.
  fft.release_spectrum();
  res.local_field = Volume::zeros_like(field, 1);
  store_inside(fft, res.mask, res.local_field);
  res.eroded_voxels = count_inside(mask) - count_inside(res.mask);
  report(o, 1.0);
  return res;
}

template BfrResult resharp_t<float>(const Volume&, const Volume&, const BfrOptions&);
template BfrResult resharp_t<double>(const Volume&, const Volume&, const BfrOptions&);

BfrResult resharp(const Volume& field, const Volume& mask, const BfrOptions& o) {
  return resharp_t<float>(field, mask, o);
}

}  // namespace qsmcore::bgremove
