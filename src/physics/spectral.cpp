// Padding and cropping between volumes and FFT buffers.
#include "physics/spectral.h"

#include <algorithm>

namespace qsmcore::physics {

Dims3 padded_dims(const Dims3& dims, Padding p) {
  if (p == Padding::None) return dims;
  return {2 * dims[0], 2 * dims[1], 2 * dims[2]};
}

template <class T>
void load_padded(RealFft3<T>& fft, const double* src, const Dims3& dims, double fill) {
  const Dims3& P = fft.dims();
  T* r = fft.real();
  if (P != dims) std::fill(r, r + fft.real_count(), static_cast<T>(fill));
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j) {
      const double* row = src + dims[0] * (j + dims[1] * k);
      T* dst = r + P[0] * (j + P[1] * k);
      for (std::int64_t i = 0; i < dims[0]; ++i) dst[i] = static_cast<T>(row[i]);
    }
}

template <class T>
void store_cropped(RealFft3<T>& fft, double* dst, const Dims3& dims) {
  const Dims3& P = fft.dims();
  const T* r = fft.real();
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j) {
      const T* row = r + P[0] * (j + P[1] * k);
      double* out = dst + dims[0] * (j + dims[1] * k);
      for (std::int64_t i = 0; i < dims[0]; ++i) out[i] = static_cast<double>(row[i]);
    }
}

template void load_padded(RealFft3<float>&, const double*, const Dims3&, double);
template void load_padded(RealFft3<double>&, const double*, const Dims3&, double);
template void store_cropped(RealFft3<float>&, double*, const Dims3&);
template void store_cropped(RealFft3<double>&, double*, const Dims3&);

}  // namespace qsmcore::physics
