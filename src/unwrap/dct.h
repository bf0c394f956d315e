// A separable 3-D DCT-II and its exact inverse on a column-major volume, in place, built on the
// portable 1-D complex FFT (physics/portable_fft.h) by Makhoul's reordering (Makhoul 1980,
// doi:10.1109/TASSP.1980.1163351): one complex FFT of length N per line. The DCT-II diagonalises
// the 7-point Laplacian with reflecting (Neumann) borders, which is what the Laplacian unwrapping
// solves. Working in place on the volume's own grid needs no 2N mirror padding (8× the voxels):
// the only memory is per-line scratch.
#pragma once
#include <complex>
#include <cstdint>
#include <vector>

#include "physics/portable_fft.h"
#include "qsmcore/volume.h"

namespace qsmcore::unwrap {

template <class T>
class Dct3 {
 public:
  explicit Dct3(const Dims3& dims);

  /// X(k) = Σ_n x(n)·Π_a cos(π·k_a·(2n_a + 1)/(2N_a)), unnormalised, in place.
  void forward(T* data) const;
  /// The exact inverse of forward(), in place.
  void inverse(T* data) const;

  /// Eigenvalue of −∇² (7-point stencil, reflecting borders, spacing `voxel_mm`) for the DCT
  /// basis function k along one axis of length n: (2 − 2·cos(πk/n))/Δ².
  static double laplacian_eigenvalue(std::int64_t k, std::int64_t n, double voxel_mm);

 private:
  struct Axis {
    std::int64_t n = 0;
    physics::ComplexFft<T> fft;
    std::vector<std::complex<T>> twiddle;  // e^{−iπk/(2n)}
    explicit Axis(std::int64_t len);
  };
  void pass(T* data, int axis, bool inverse) const;
  void lines(T* data, int axis, bool inverse, std::int64_t task_lo, std::int64_t task_hi) const;
  // One line (x2 null) or two along an axis, `stride` apart between elements.
  void forward_pair(const Axis& ax, T* x1, T* x2, std::int64_t stride, std::complex<T>* z, std::complex<T>* work) const;
  void inverse_pair(const Axis& ax, T* x1, T* x2, std::int64_t stride, std::complex<T>* z, std::complex<T>* work) const;

  Dims3 dims_;
  std::vector<Axis> axes_;
};

extern template class Dct3<float>;
extern template class Dct3<double>;

}  // namespace qsmcore::unwrap
