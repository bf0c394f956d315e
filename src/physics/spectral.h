// Shared steps of k-space operations on volumes: padding into an FFT buffer, cropping back, and
// multiplying a half spectrum by a real kernel.
#pragma once
#include "physics/fft.h"
#include "qsmcore/physics.h"

namespace qsmcore::physics {

/// FFT grid for a volume of `dims` under `p` (2N per axis, or the volume itself).
Dims3 padded_dims(const Dims3& dims, Padding p);

/// Writes `src` (column-major, `dims`) into the corner of fft.real(), the rest set to `fill`.
template <class T>
void load_padded(RealFft3<T>& fft, const double* src, const Dims3& dims, double fill);

/// Copies the `dims` corner of fft.real() into `dst`.
template <class T>
void store_cropped(RealFft3<T>& fft, double* dst, const Dims3& dims);

/// spectrum *= f(kernel value), element by element over the half spectrum.
template <class T, class F>
void multiply_spectrum(RealFft3<T>& fft, const DipoleKernel& kernel, F&& f) {
  std::complex<T>* s = fft.spectrum();
  const double* d = kernel.data();
  const std::int64_t n = fft.spectrum_count();
  for (std::int64_t i = 0; i < n; ++i) s[i] *= static_cast<T>(f(d[i]));
}

}  // namespace qsmcore::physics
