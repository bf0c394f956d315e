// A hand-written FFT for builds without FFTW: no FFT library can be built for wasm32 with
// Debian's emscripten, so the WebAssembly build uses this one. Native builds use FFTW
// (physics/fft.cpp under QSM_HAVE_FFTW), which is also this code's test oracle.
//
// ComplexFft<T>: a 1-D complex DFT plan of any length n ≥ 1. Lengths whose prime factors are
// all ≤ kMaxDirectRadix run a mixed-radix Stockham autosort FFT (radices 4, 2, 3, 5 and a
// generic odd-prime butterfly for 7, 11, 13, … 47) with twiddles precomputed in double; any other
// length runs Bluestein's chirp-z algorithm through a 2·3·5-smooth FFT of length ≥ 2n − 1, so
// every length is O(n log n).
//
// PortableFft3Plan<T>: the 3-D real transform of RealFft3 (column-major, x fastest; r2c half
// spectrum x 0..nx/2, then y, z; the inverse is unnormalised here) on caller-owned arrays.
// PortableRealFft3<T>: the same public interface and semantics as RealFft3<T>.
//
// Plans are immutable once built and every transform takes its scratch per call, so distinct
// objects (or even one plan) may be used from several threads at once.
#pragma once
#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "qsmcore/memory.h"
#include "qsmcore/volume.h"

namespace qsmcore::physics {

/// Largest prime run as a butterfly of its own; lengths with a larger prime factor use Bluestein.
/// Measured (g++ -O3, float): a generic odd-prime butterfly beats Bluestein for a lone prime up
/// to about 50 (17: 11 vs 21 ns per point, 43: 14 vs 21), and by 2–3× for composites (31·64).
inline constexpr std::int64_t kMaxDirectRadix = 47;

template <class T>
class ComplexFft {
 public:
  using C = std::complex<T>;
  explicit ComplexFft(std::int64_t n);
  ~ComplexFft();
  ComplexFft(ComplexFft&&) noexcept;
  ComplexFft& operator=(ComplexFft&&) noexcept;
  ComplexFft(const ComplexFft&) = delete;
  ComplexFft& operator=(const ComplexFft&) = delete;

  std::int64_t size() const { return n_; }
  /// Complex elements of `work` that forward() and inverse() need.
  std::int64_t work_size() const { return work_; }
  /// True when this length runs through Bluestein's algorithm.
  bool bluestein() const { return inner_ != nullptr; }

  /// data[k] = Σ_j data[j]·e^{−2πi·jk/n}, in place.
  void forward(C* data, C* work) const;
  /// data[k] = Σ_j data[j]·e^{+2πi·jk/n}, in place (unnormalised).
  void inverse(C* data, C* work) const;

 private:
  struct Stage {
    int radix;
    std::int64_t m;       // sub-length after this stage (current length / radix)
    std::int64_t s;       // stride (product of the radices before this stage)
    std::size_t twiddle;  // offset into twiddles_: m·(radix − 1) factors
    std::size_t trig;     // offset into trig_ (generic odd radix): cos then sin tables
  };
  template <bool Inverse>
  void stockham(C* data, C* work) const;
  template <bool Inverse>
  void run_bluestein(C* data, C* work) const;

  std::int64_t n_ = 0;
  std::int64_t work_ = 0;
  std::vector<Stage> stages_;
  std::vector<C> twiddles_;
  std::vector<T> trig_;
  // Bluestein: chirp w_j = e^{−iπj²/n} and the transformed, 1/M-scaled conjugate chirp.
  std::unique_ptr<ComplexFft<T>> inner_;
  std::vector<C> chirp_;
  std::vector<C> kernel_;
};

template <class T>
class PortableFft3Plan {
 public:
  using C = std::complex<T>;
  /// Throws Error{InvalidInput} for an axis outside 1..2^30.
  explicit PortableFft3Plan(const Dims3& dims);

  const Dims3& dims() const { return dims_; }
  std::int64_t real_count() const { return dims_[0] * dims_[1] * dims_[2]; }
  std::int64_t spectrum_count() const { return (dims_[0] / 2 + 1) * dims_[1] * dims_[2]; }

  /// spectrum = F{real}; real is only read.
  void forward(const T* real, C* spectrum) const;
  /// real = scale·F⁻¹{spectrum} (unnormalised F⁻¹); spectrum is overwritten. As FFTW's c2r, the
  /// imaginary parts of the x = 0 (and, for even nx, x = nx/2) terms are ignored.
  void inverse(C* spectrum, T* real, T scale) const;

 private:
  void lines(C* base, std::int64_t count, std::int64_t stride, const ComplexFft<T>& fft, bool inverse,
             std::vector<C>& scratch) const;
  void x_forward(const T* real, C* spectrum, std::vector<C>& scratch) const;
  void x_inverse(C* spectrum, T* real, T scale, std::vector<C>& scratch) const;
  std::size_t scratch_size() const;

  Dims3 dims_;
  bool even_x_;
  ComplexFft<T> x_;  // length nx/2 (even nx, half-length real trick) or nx (odd nx)
  ComplexFft<T> y_;
  ComplexFft<T> z_;
  std::vector<C> x_twiddles_;  // e^{−2πik/nx}, k = 0..nx/2 (even nx)
};

template <class T>
class PortableRealFft3 {
 public:
  /// Throws Error{InvalidInput} for an axis outside 1..2^30, as RealFft3.
  explicit PortableRealFft3(const Dims3& dims);
  PortableRealFft3(const PortableRealFft3&) = delete;
  PortableRealFft3& operator=(const PortableRealFft3&) = delete;

  const Dims3& dims() const { return dims_; }
  std::int64_t real_count() const { return dims_[0] * dims_[1] * dims_[2]; }
  /// Half spectrum: x from 0 to nx/2, then y, z.
  std::int64_t spectrum_count() const { return (dims_[0] / 2 + 1) * dims_[1] * dims_[2]; }
  T* real() { return reinterpret_cast<T*>(real_.data()); }
  std::complex<T>* spectrum() { return reinterpret_cast<std::complex<T>*>(spectrum_.data()); }

  /// spectrum = F{real}; real is preserved.
  void forward();
  /// real = F⁻¹{spectrum}, normalised by 1/N so inverse(forward(x)) = x; spectrum is destroyed.
  void inverse();

 private:
  Dims3 dims_;
  Buffer real_;
  Buffer spectrum_;
  PortableFft3Plan<T> plan_;
};

extern template class ComplexFft<float>;
extern template class ComplexFft<double>;
extern template class PortableFft3Plan<float>;
extern template class PortableFft3Plan<double>;
extern template class PortableRealFft3<float>;
extern template class PortableRealFft3<double>;

}  // namespace qsmcore::physics
