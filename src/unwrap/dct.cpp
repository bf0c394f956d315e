// Dct3 (see dct.h). Along each axis, the lines are gathered in blocks of kBlock neighbouring
// lines (consecutive in memory for the strided y and z passes), reordered as Makhoul's v
// (v[m] = x[2m], v[N−1−m] = x[2m+1]), transformed, and written back: X(k) = Re(e^{−iπk/(2N)}·V(k)).
// The inverse rebuilds V(k) = e^{+iπk/(2N)}·(X(k) − i·X(N−k)) (X(N) = 0), which is Hermitian for
// real X, so its inverse FFT is real and is v.
#include "unwrap/dct.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/parallel.h"

namespace qsmcore::unwrap {
namespace dct_detail {

constexpr std::int64_t kBlock = 16;

// Where x(p) sits in Makhoul's reordered line of length n.
inline std::int64_t reorder(std::int64_t p, std::int64_t n) {
  return (p % 2 == 0) ? p / 2 : n - 1 - (p - 1) / 2;
}

}  // namespace dct_detail

template <class T>
Dct3<T>::Axis::Axis(std::int64_t len) : n(len), fft(len), twiddle(static_cast<std::size_t>(len)) {
  for (std::int64_t k = 0; k < len; ++k) {
    const double a = -std::numbers::pi * static_cast<double>(k) / (2.0 * static_cast<double>(len));
    twiddle[static_cast<std::size_t>(k)] = {static_cast<T>(std::cos(a)), static_cast<T>(std::sin(a))};
  }
}

template <class T>
Dct3<T>::Dct3(const Dims3& dims) : dims_(dims) {
  axes_.reserve(3);
  for (int a = 0; a < 3; ++a) axes_.emplace_back(dims[a]);
}

template <class T>
double Dct3<T>::laplacian_eigenvalue(std::int64_t k, std::int64_t n, double voxel_mm) {
  return (2.0 - 2.0 * std::cos(std::numbers::pi * static_cast<double>(k) / static_cast<double>(n))) /
         (voxel_mm * voxel_mm);
}

template <class T>
void Dct3<T>::forward(T* data) const {
  for (int a = 0; a < 3; ++a) pass(data, a, false);
}

template <class T>
void Dct3<T>::inverse(T* data) const {
  for (int a = 0; a < 3; ++a) pass(data, a, true);
}

// Tasks are (outer index, block of inner lines); they are split into a few hundred chunks so
// that each chunk allocates its scratch once. Every line is transformed by one thread alone.
template <class T>
void Dct3<T>::pass(T* data, int axis, bool inverse) const {
  std::int64_t inner = 1, outer = 1;
  for (int a = 0; a < axis; ++a) inner *= dims_[a];
  for (int a = axis + 1; a < 3; ++a) outer *= dims_[a];
  const std::int64_t tasks = outer * ((inner + dct_detail::kBlock - 1) / dct_detail::kBlock);
  const std::int64_t chunks = std::min<std::int64_t>(tasks, 256);
  parallel_for(chunks, true,
               [&](std::int64_t c) { lines(data, axis, inverse, tasks * c / chunks, tasks * (c + 1) / chunks); });
}

// Two real lines share one complex FFT (z = v₁ + i·v₂): V₁(k) = (Z(k) + Z*(N−k))/2 and
// V₂(k) = (Z(k) − Z*(N−k))/(2i); the inverse packs Z = V₁ + i·V₂ the same way.
template <class T>
void Dct3<T>::lines(T* data, int axis, bool inverse, std::int64_t task_lo, std::int64_t task_hi) const {
  using C = std::complex<T>;
  const Axis& ax = axes_[static_cast<std::size_t>(axis)];
  const std::int64_t n = ax.n;
  std::int64_t inner = 1;
  for (int a = 0; a < axis; ++a) inner *= dims_[a];
  const std::int64_t blocks = (inner + dct_detail::kBlock - 1) / dct_detail::kBlock;
  std::vector<C> z(static_cast<std::size_t>(n));
  std::vector<C> work(static_cast<std::size_t>(std::max<std::int64_t>(ax.fft.work_size(), 1)));
  for (std::int64_t t = task_lo; t < task_hi; ++t) {
    const std::int64_t o = t / blocks, i0 = (t % blocks) * dct_detail::kBlock;
    const std::int64_t width = std::min(dct_detail::kBlock, inner - i0);
    T* base = data + i0 + inner * n * o;
    for (std::int64_t l = 0; l < width; l += 2) {
      T* first = base + l;
      T* second = l + 1 < width ? base + l + 1 : nullptr;
      if (inverse) {
        inverse_pair(ax, first, second, inner, z.data(), work.data());
      } else {
        forward_pair(ax, first, second, inner, z.data(), work.data());
      }
    }
  }
}

template <class T>
void Dct3<T>::forward_pair(const Axis& ax, T* x1, T* x2, std::int64_t stride, std::complex<T>* z,
                           std::complex<T>* work) const {
  using C = std::complex<T>;
  const std::int64_t n = ax.n;
  for (std::int64_t p = 0; p < n; ++p)
    z[dct_detail::reorder(p, n)] = C(x1[p * stride], x2 != nullptr ? x2[p * stride] : T(0));
  ax.fft.forward(z, work);
  for (std::int64_t k = 0; k < n; ++k) {
    const C a = z[k], b = std::conj(z[k == 0 ? 0 : n - k]);
    const C w = ax.twiddle[static_cast<std::size_t>(k)];
    // V₁ = (a + b)/2, V₂ = −i(a − b)/2; X = Re(w·V).
    const T v1r = (a.real() + b.real()) / 2, v1i = (a.imag() + b.imag()) / 2;
    const T v2r = (a.imag() - b.imag()) / 2, v2i = -(a.real() - b.real()) / 2;
    x1[k * stride] = w.real() * v1r - w.imag() * v1i;
    if (x2 != nullptr) x2[k * stride] = w.real() * v2r - w.imag() * v2i;
  }
}

template <class T>
void Dct3<T>::inverse_pair(const Axis& ax, T* x1, T* x2, std::int64_t stride, std::complex<T>* z,
                           std::complex<T>* work) const {
  using C = std::complex<T>;
  const std::int64_t n = ax.n;
  const T scale = T(1) / static_cast<T>(n);
  for (std::int64_t k = 0; k < n; ++k) {
    const C w = ax.twiddle[static_cast<std::size_t>(k)];
    // V = conj(w)·(X(k) − i·X(N−k)), for both lines; Z = V₁ + i·V₂.
    const T a1 = x1[k * stride], b1 = k == 0 ? T(0) : x1[(n - k) * stride];
    const T a2 = x2 != nullptr ? x2[k * stride] : T(0);
    const T b2 = x2 != nullptr && k != 0 ? x2[(n - k) * stride] : T(0);
    const T v1r = w.real() * a1 - w.imag() * b1, v1i = -w.real() * b1 - w.imag() * a1;
    const T v2r = w.real() * a2 - w.imag() * b2, v2i = -w.real() * b2 - w.imag() * a2;
    z[k] = C(v1r - v2i, v1i + v2r);
  }
  ax.fft.inverse(z, work);
  for (std::int64_t p = 0; p < n; ++p) {
    const C v = z[dct_detail::reorder(p, n)];
    x1[p * stride] = v.real() * scale;
    if (x2 != nullptr) x2[p * stride] = v.imag() * scale;
  }
}

template class Dct3<float>;
template class Dct3<double>;

}  // namespace qsmcore::unwrap
