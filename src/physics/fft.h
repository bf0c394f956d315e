// Real 3-D FFTs on column-major volumes (x fastest), with FFTW plans made once per shape and
// reused. T = float (network glue, e.g. LPCNN's D·v) or double (simulation, TKD). Buffers are
// accounted (MemCategory::Other) and 64-byte aligned, which FFTW's SIMD code wants.
#pragma once
#include <complex>

#include "qsmcore/memory.h"
#include "qsmcore/volume.h"

namespace qsmcore::physics {

/// The smallest length m ≥ max(n, 1) whose prime factors are all at most `largest_prime` (2, 3, 5
/// or 7), and even when asked: the lengths FFTW transforms fast, and the portable FFT without
/// falling back to Bluestein's algorithm (for which a factor of 7 is already slow: 5 there).
std::int64_t smooth_fft_length(std::int64_t n, int largest_prime = 7, bool even = false);

template <class T>
class RealFft3 {
 public:
  /// Plans r2c and c2r transforms of `dims` (FFTW_ESTIMATE: deterministic and quick to plan).
  /// `threads` > 1 plans FFTW's OpenMP transforms over that many threads (the classical stages,
  /// which honour --threads); the networks' glue keeps 1, whose bits their tests pin. The portable
  /// FFT (WebAssembly) runs on one thread whatever is asked.
  explicit RealFft3(const Dims3& dims, int threads = 1);
  ~RealFft3();
  RealFft3(const RealFft3&) = delete;
  RealFft3& operator=(const RealFft3&) = delete;

  const Dims3& dims() const { return dims_; }
  int threads() const { return threads_; }
  std::int64_t real_count() const { return dims_[0] * dims_[1] * dims_[2]; }
  /// Half spectrum: x from 0 to nx/2, then y, z (made by the first forward()).
  std::int64_t spectrum_count() const { return (dims_[0] / 2 + 1) * dims_[1] * dims_[2]; }
  T* real() { return reinterpret_cast<T*>(real_.data()); }
  std::complex<T>* spectrum() { return reinterpret_cast<std::complex<T>*>(spectrum_.data()); }

  /// spectrum = F{real}; real is preserved. Makes the spectrum again after release_spectrum().
  void forward();
  /// real = F⁻¹{spectrum}, normalised by 1/N so inverse(forward(x)) = x; spectrum is destroyed.
  void inverse();
  /// Frees the spectrum until the next forward(), keeping real and the plans: a caller that
  /// holds the real buffer between transforms gives that room back (NeXtQSM under a budget).
  /// The plans run on the new block (same alignment), so the bits are those of a kept one.
  void release_spectrum() { spectrum_ = Buffer(); }

 private:
  Dims3 dims_;
  int threads_ = 1;
  Buffer real_;
  Buffer spectrum_;
  void make_spectrum();
  void* forward_plan_ = nullptr;
  void* inverse_plan_ = nullptr;
};

extern template class RealFft3<float>;
extern template class RealFft3<double>;

}  // namespace qsmcore::physics
