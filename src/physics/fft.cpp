// RealFft3: FFTW glue where the build has FFTW (QSM_HAVE_FFTW, native builds), else the portable
// FFT (physics/portable_fft.h; the WebAssembly build). FFTW's planner is not thread-safe, so plan
// creation and destruction are serialised; executing a plan (fftw_execute) is thread-safe.
#include "physics/fft.h"

#include "qsmcore/error.h"

#if QSM_HAVE_FFTW
#include <fftw3.h>

#include <mutex>
#else
#include "physics/portable_fft.h"
#endif

namespace qsmcore::physics {

std::int64_t smooth_fft_length(std::int64_t n, int largest_prime, bool even) {
  for (std::int64_t m = n < 1 ? 1 : n;; ++m) {
    if (even && m % 2 != 0) continue;
    std::int64_t r = m;
    for (std::int64_t p : {2, 3, 5, 7})
      if (p <= largest_prime)
        while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}

#if QSM_HAVE_FFTW
namespace {

std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

// One traits struct per precision keeps RealFft3 a single template.
template <class T>
struct Fftw;

template <>
struct Fftw<float> {
  using Plan = fftwf_plan;
  static void threads(int n) {
    static const bool ready = fftwf_init_threads() != 0;
    if (ready) fftwf_plan_with_nthreads(n);
  }
  static Plan r2c(const Dims3& d, float* in, std::complex<float>* out) {
    return fftwf_plan_dft_r2c_3d(static_cast<int>(d[2]), static_cast<int>(d[1]), static_cast<int>(d[0]), in,
                                 reinterpret_cast<fftwf_complex*>(out), FFTW_ESTIMATE);
  }
  static Plan c2r(const Dims3& d, std::complex<float>* in, float* out) {
    return fftwf_plan_dft_c2r_3d(static_cast<int>(d[2]), static_cast<int>(d[1]), static_cast<int>(d[0]),
                                 reinterpret_cast<fftwf_complex*>(in), out, FFTW_ESTIMATE);
  }
  static void forward(void* p, float* in, std::complex<float>* out) {
    fftwf_execute_dft_r2c(static_cast<Plan>(p), in, reinterpret_cast<fftwf_complex*>(out));
  }
  static void inverse(void* p, std::complex<float>* in, float* out) {
    fftwf_execute_dft_c2r(static_cast<Plan>(p), reinterpret_cast<fftwf_complex*>(in), out);
  }
  static void destroy(void* p) { fftwf_destroy_plan(static_cast<Plan>(p)); }
};

template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  static void threads(int n) {
    static const bool ready = fftw_init_threads() != 0;
    if (ready) fftw_plan_with_nthreads(n);
  }
  static Plan r2c(const Dims3& d, double* in, std::complex<double>* out) {
    return fftw_plan_dft_r2c_3d(static_cast<int>(d[2]), static_cast<int>(d[1]), static_cast<int>(d[0]), in,
                                reinterpret_cast<fftw_complex*>(out), FFTW_ESTIMATE);
  }
  static Plan c2r(const Dims3& d, std::complex<double>* in, double* out) {
    return fftw_plan_dft_c2r_3d(static_cast<int>(d[2]), static_cast<int>(d[1]), static_cast<int>(d[0]),
                                reinterpret_cast<fftw_complex*>(in), out, FFTW_ESTIMATE);
  }
  static void forward(void* p, double* in, std::complex<double>* out) {
    fftw_execute_dft_r2c(static_cast<Plan>(p), in, reinterpret_cast<fftw_complex*>(out));
  }
  static void inverse(void* p, std::complex<double>* in, double* out) {
    fftw_execute_dft_c2r(static_cast<Plan>(p), reinterpret_cast<fftw_complex*>(in), out);
  }
  static void destroy(void* p) { fftw_destroy_plan(static_cast<Plan>(p)); }
};

}  // namespace

// The spectrum and the plans are made by the first forward(): a caller may fill the real
// buffer before the spectrum takes its room (FFTW_ESTIMATE plans without touching the arrays).
template <class T>
RealFft3<T>::RealFft3(const Dims3& dims, int threads) : dims_(dims), threads_(threads > 1 ? threads : 1) {
  for (std::int64_t d : dims)
    if (d <= 0 || d > (1 << 30)) throw Error(ErrorKind::InvalidInput, "FFT size out of range");
  real_ = Buffer(static_cast<std::size_t>(real_count()) * sizeof(T), MemCategory::Other);
}

template <class T>
void RealFft3<T>::make_spectrum() {
  if (spectrum_.size() == 0)
    spectrum_ = Buffer(static_cast<std::size_t>(spectrum_count()) * sizeof(std::complex<T>), MemCategory::Other);
  if (forward_plan_ != nullptr) return;
  std::lock_guard lock(planner_mutex());
  // FFTW's row-major n0×n1×n2 with n2 fastest is our column-major x-fastest volume reversed.
  // The thread count is planner state: set for these plans only, 1 again for everyone else's.
  if (threads_ > 1) Fftw<T>::threads(threads_);
  forward_plan_ = Fftw<T>::r2c(dims_, real(), spectrum());
  inverse_plan_ = Fftw<T>::c2r(dims_, spectrum(), real());
  if (threads_ > 1) Fftw<T>::threads(1);
  if (forward_plan_ == nullptr || inverse_plan_ == nullptr) {
    for (void** p : {&forward_plan_, &inverse_plan_})
      if (*p != nullptr) {
        Fftw<T>::destroy(*p);
        *p = nullptr;
      }
    throw Error(ErrorKind::Internal, "FFTW could not plan a " + std::to_string(dims_[0]) + "×" +
                                         std::to_string(dims_[1]) + "×" + std::to_string(dims_[2]) + " transform");
  }
}

template <class T>
RealFft3<T>::~RealFft3() {
  std::lock_guard lock(planner_mutex());
  if (forward_plan_ != nullptr) Fftw<T>::destroy(forward_plan_);
  if (inverse_plan_ != nullptr) Fftw<T>::destroy(inverse_plan_);
}

// The new-array execute: the spectrum may have been released and made again since planning
// (both blocks are 64-byte aligned, as FFTW requires of arrays other than the planned ones).
template <class T>
void RealFft3<T>::forward() {
  make_spectrum();
  Fftw<T>::forward(forward_plan_, real(), spectrum());
}

template <class T>
void RealFft3<T>::inverse() {
  QSM_ASSERT(spectrum_.size() > 0, "an inverse FFT of a released spectrum");
  Fftw<T>::inverse(inverse_plan_, spectrum(), real());
  const T scale = T(1) / static_cast<T>(real_count());
  T* r = real();
  const std::int64_t n = real_count();
  for (std::int64_t i = 0; i < n; ++i) r[i] *= scale;
}

#else

// forward_plan_ holds the portable plan (immutable, so forward/inverse need no lock);
// inverse_plan_ stays null.
template <class T>
RealFft3<T>::RealFft3(const Dims3& dims, int threads) : dims_(dims), threads_(threads > 1 ? threads : 1) {
  for (std::int64_t d : dims)
    if (d <= 0 || d > (1 << 30)) throw Error(ErrorKind::InvalidInput, "FFT size out of range");
  real_ = Buffer(static_cast<std::size_t>(real_count()) * sizeof(T), MemCategory::Other);
  forward_plan_ = new PortableFft3Plan<T>(dims_);
}

template <class T>
void RealFft3<T>::make_spectrum() {
  if (spectrum_.size() == 0)
    spectrum_ = Buffer(static_cast<std::size_t>(spectrum_count()) * sizeof(std::complex<T>), MemCategory::Other);
}

template <class T>
RealFft3<T>::~RealFft3() {
  delete static_cast<PortableFft3Plan<T>*>(forward_plan_);
}

template <class T>
void RealFft3<T>::forward() {
  make_spectrum();
  static_cast<const PortableFft3Plan<T>*>(forward_plan_)->forward(real(), spectrum());
}

template <class T>
void RealFft3<T>::inverse() {
  QSM_ASSERT(spectrum_.size() > 0, "an inverse FFT of a released spectrum");
  static_cast<const PortableFft3Plan<T>*>(forward_plan_)
      ->inverse(spectrum(), real(), T(1) / static_cast<T>(real_count()));
}

#endif

template class RealFft3<float>;
template class RealFft3<double>;

}  // namespace qsmcore::physics
