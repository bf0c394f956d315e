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
  static Plan r2c(const Dims3& d, float* in, std::complex<float>* out) {
    return fftwf_plan_dft_r2c_3d(static_cast<int>(d[2]), static_cast<int>(d[1]), static_cast<int>(d[0]), in,
                                 reinterpret_cast<fftwf_complex*>(out), FFTW_ESTIMATE);
  }
  static Plan c2r(const Dims3& d, std::complex<float>* in, float* out) {
    return fftwf_plan_dft_c2r_3d(static_cast<int>(d[2]), static_cast<int>(d[1]), static_cast<int>(d[0]),
                                 reinterpret_cast<fftwf_complex*>(in), out, FFTW_ESTIMATE);
  }
  static void execute(void* p) { fftwf_execute(static_cast<Plan>(p)); }
  static void destroy(void* p) { fftwf_destroy_plan(static_cast<Plan>(p)); }
};

template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  static Plan r2c(const Dims3& d, double* in, std::complex<double>* out) {
    return fftw_plan_dft_r2c_3d(static_cast<int>(d[2]), static_cast<int>(d[1]), static_cast<int>(d[0]), in,
                                reinterpret_cast<fftw_complex*>(out), FFTW_ESTIMATE);
  }
  static Plan c2r(const Dims3& d, std::complex<double>* in, double* out) {
    return fftw_plan_dft_c2r_3d(static_cast<int>(d[2]), static_cast<int>(d[1]), static_cast<int>(d[0]),
                                reinterpret_cast<fftw_complex*>(in), out, FFTW_ESTIMATE);
  }
  static void execute(void* p) { fftw_execute(static_cast<Plan>(p)); }
  static void destroy(void* p) { fftw_destroy_plan(static_cast<Plan>(p)); }
};

}  // namespace

template <class T>
RealFft3<T>::RealFft3(const Dims3& dims) : dims_(dims) {
  for (std::int64_t d : dims)
    if (d <= 0 || d > (1 << 30)) throw Error(ErrorKind::InvalidInput, "FFT size out of range");
  real_ = Buffer(static_cast<std::size_t>(real_count()) * sizeof(T), MemCategory::Other);
  spectrum_ = Buffer(static_cast<std::size_t>(spectrum_count()) * sizeof(std::complex<T>), MemCategory::Other);
  std::lock_guard lock(planner_mutex());
  // FFTW's row-major n0×n1×n2 with n2 fastest is our column-major x-fastest volume reversed.
  forward_plan_ = Fftw<T>::r2c(dims_, real(), spectrum());
  inverse_plan_ = Fftw<T>::c2r(dims_, spectrum(), real());
  if (forward_plan_ == nullptr || inverse_plan_ == nullptr) {
    // The destructor does not run for a throwing constructor: release what was planned.
    if (forward_plan_ != nullptr) Fftw<T>::destroy(forward_plan_);
    if (inverse_plan_ != nullptr) Fftw<T>::destroy(inverse_plan_);
    throw Error(ErrorKind::Internal, "FFTW could not plan a " + std::to_string(dims[0]) + "×" +
                                         std::to_string(dims[1]) + "×" + std::to_string(dims[2]) + " transform");
  }
}

template <class T>
RealFft3<T>::~RealFft3() {
  std::lock_guard lock(planner_mutex());
  if (forward_plan_ != nullptr) Fftw<T>::destroy(forward_plan_);
  if (inverse_plan_ != nullptr) Fftw<T>::destroy(inverse_plan_);
}

template <class T>
void RealFft3<T>::forward() {
  Fftw<T>::execute(forward_plan_);
}

template <class T>
void RealFft3<T>::inverse() {
  Fftw<T>::execute(inverse_plan_);
  const T scale = T(1) / static_cast<T>(real_count());
  T* r = real();
  const std::int64_t n = real_count();
  for (std::int64_t i = 0; i < n; ++i) r[i] *= scale;
}

#else

// forward_plan_ holds the portable plan (immutable, so forward/inverse need no lock);
// inverse_plan_ stays null.
template <class T>
RealFft3<T>::RealFft3(const Dims3& dims) : dims_(dims) {
  for (std::int64_t d : dims)
    if (d <= 0 || d > (1 << 30)) throw Error(ErrorKind::InvalidInput, "FFT size out of range");
  real_ = Buffer(static_cast<std::size_t>(real_count()) * sizeof(T), MemCategory::Other);
  spectrum_ = Buffer(static_cast<std::size_t>(spectrum_count()) * sizeof(std::complex<T>), MemCategory::Other);
  forward_plan_ = new PortableFft3Plan<T>(dims_);
}

template <class T>
RealFft3<T>::~RealFft3() {
  delete static_cast<PortableFft3Plan<T>*>(forward_plan_);
}

template <class T>
void RealFft3<T>::forward() {
  static_cast<const PortableFft3Plan<T>*>(forward_plan_)->forward(real(), spectrum());
}

template <class T>
void RealFft3<T>::inverse() {
  static_cast<const PortableFft3Plan<T>*>(forward_plan_)
      ->inverse(spectrum(), real(), T(1) / static_cast<T>(real_count()));
}

#endif

template class RealFft3<float>;
template class RealFft3<double>;

}  // namespace qsmcore::physics
