// The portable FFT (see portable_fft.h for why it exists). Complex products are written out by
// hand: std::complex's operator* checks for NaN/∞ (__mulsc3) unless -ffast-math, which would
// dominate the butterflies.
#include "physics/portable_fft.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <type_traits>
#include <utility>

#include "qsmcore/error.h"

namespace qsmcore::physics {
namespace {

constexpr std::int64_t kMaxLength = std::int64_t{1} << 30;
// Lines gathered per block for the strided (y, z) passes: consecutive lines share cache lines.
constexpr std::int64_t kBlock = 16;
// Bound of the generic odd-radix butterfly's stack arrays.
constexpr int kMaxGenericRadix = 64;
static_assert(kMaxDirectRadix < kMaxGenericRadix);

void check_length(std::int64_t n) {
  if (n <= 0 || n > kMaxLength) throw Error(ErrorKind::InvalidInput, "FFT size out of range");
}

const Dims3& checked(const Dims3& dims) {
  for (std::int64_t d : dims) check_length(d);
  return dims;
}

// e^{−2πi·e/n} in double, the angle reduced to [−π, π] first for accuracy.
std::complex<double> root(std::int64_t e, std::int64_t n) {
  e %= n;
  if (e < 0) e += n;
  if (2 * e > n) e -= n;
  const double a = -2.0 * std::numbers::pi * static_cast<double>(e) / static_cast<double>(n);
  return {std::cos(a), std::sin(a)};
}

template <class T>
using Cx = std::complex<T>;

template <class T>
inline Cx<T> mul(Cx<T> a, Cx<T> b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}
// a·conj(b)
template <class T>
inline Cx<T> mul_conj(Cx<T> a, Cx<T> b) {
  return {a.real() * b.real() + a.imag() * b.imag(), a.imag() * b.real() - a.real() * b.imag()};
}
// The forward transform's −i (Inverse: +i) times a.
template <bool Inverse, class T>
inline Cx<T> rot(Cx<T> a) {
  if constexpr (Inverse) return {-a.imag(), a.real()};
  return {a.imag(), -a.real()};
}
template <bool Inverse, class T>
inline Cx<T> twiddle(Cx<T> a, Cx<T> w) {
  if constexpr (Inverse) return mul_conj(a, w);
  return mul(a, w);
}

// In-place DFTs of R points (the butterflies), forward sign e^{−2πi/R} unless Inverse.
template <bool Inverse, class T>
struct Radix2 {
  static constexpr int R = 2;
  static void run(Cx<T>* a) {
    const Cx<T> t = a[0];
    a[0] = t + a[1];
    a[1] = t - a[1];
  }
};

template <bool Inverse, class T>
struct Radix3 {
  static constexpr int R = 3;
  static void run(Cx<T>* a) {
    const T s3 = T(0.86602540378443864676);  // sin(2π/3)
    const Cx<T> t = a[1] + a[2];
    const Cx<T> m = a[0] - t * T(0.5);
    const Cx<T> d = rot<Inverse>(Cx<T>((a[1] - a[2]) * s3));
    a[0] = a[0] + t;
    a[1] = m + d;
    a[2] = m - d;
  }
};

template <bool Inverse, class T>
struct Radix4 {
  static constexpr int R = 4;
  static void run(Cx<T>* a) {
    const Cx<T> t0 = a[0] + a[2], t1 = a[0] - a[2], t2 = a[1] + a[3];
    const Cx<T> t3 = rot<Inverse>(Cx<T>(a[1] - a[3]));
    a[0] = t0 + t2;
    a[1] = t1 + t3;
    a[2] = t0 - t2;
    a[3] = t1 - t3;
  }
};

template <bool Inverse, class T>
struct Radix5 {
  static constexpr int R = 5;
  static void run(Cx<T>* a) {
    const T c1 = T(0.30901699437494742410), c2 = T(-0.80901699437494742410);  // cos(2π/5), cos(4π/5)
    const T s1 = T(0.95105651629515357212), s2 = T(0.58778525229247312917);   // sin(2π/5), sin(4π/5)
    const Cx<T> t1 = a[1] + a[4], t2 = a[2] + a[3], d1 = a[1] - a[4], d2 = a[2] - a[3];
    const Cx<T> m1 = a[0] + t1 * c1 + t2 * c2, m2 = a[0] + t1 * c2 + t2 * c1;
    const Cx<T> n1 = rot<Inverse>(Cx<T>(d1 * s1 + d2 * s2)), n2 = rot<Inverse>(Cx<T>(d1 * s2 - d2 * s1));
    a[0] = a[0] + t1 + t2;
    a[1] = m1 + n1;
    a[4] = m1 - n1;
    a[2] = m2 + n2;
    a[3] = m2 - n2;
  }
};

// One Stockham pass (decimation in frequency) of a fixed radix: for sub-length m·R and stride s,
// y[q + s·(R·p + k)] = w^{p·k} · DFT_R(x[q + s·(p + j·m)], j < R)[k]. The p = 0 column needs no
// twiddles.
template <class Butterfly, bool Inverse, class T>
void pass(std::int64_t m, std::int64_t s, const Cx<T>* tw, const Cx<T>* x, Cx<T>* y) {
  constexpr int R = Butterfly::R;
  Cx<T> a[R];
  for (std::int64_t p = 0; p < m; ++p) {
    const Cx<T>* w = tw + p * (R - 1);
    const Cx<T>* in = x + s * p;
    Cx<T>* out = y + s * R * p;
    for (std::int64_t q = 0; q < s; ++q) {
      for (int j = 0; j < R; ++j) a[j] = in[q + s * m * j];
      Butterfly::run(a);
      out[q] = a[0];
      if (p == 0) {
        for (int k = 1; k < R; ++k) out[q + s * k] = a[k];
      } else {
        for (int k = 1; k < R; ++k) out[q + s * k] = twiddle<Inverse>(a[k], w[k - 1]);
      }
    }
  }
}

// The same for an odd radix r without a butterfly of its own, pairing j with r − j:
// X_k = a_0 + Σ_j (a_j + a_{r−j})·cos(2πjk/r) ∓ i·Σ_j (a_j − a_{r−j})·sin(2πjk/r).
// `trig` holds cos(2πi/r) then sin(2πi/r) for i < r.
template <bool Inverse, class T>
void pass_generic(int r, std::int64_t m, std::int64_t s, const Cx<T>* tw, const T* trig, const Cx<T>* x, Cx<T>* y) {
  const int h = (r - 1) / 2;
  const T* cs = trig;
  const T* sn = trig + r;
  Cx<T> a[kMaxGenericRadix], t[kMaxGenericRadix / 2 + 1], d[kMaxGenericRadix / 2 + 1], b[kMaxGenericRadix];
  for (std::int64_t p = 0; p < m; ++p) {
    const Cx<T>* w = tw + p * (r - 1);
    const Cx<T>* in = x + s * p;
    Cx<T>* out = y + s * r * p;
    for (std::int64_t q = 0; q < s; ++q) {
      for (int j = 0; j < r; ++j) a[j] = in[q + s * m * j];
      Cx<T> sum = a[0];
      for (int j = 1; j <= h; ++j) {
        t[j] = a[j] + a[r - j];
        d[j] = a[j] - a[r - j];
        sum += t[j];
      }
      b[0] = sum;
      for (int k = 1; k <= h; ++k) {
        Cx<T> mk = a[0], nk(0, 0);
        int idx = 0;
        for (int j = 1; j <= h; ++j) {
          idx += k;
          if (idx >= r) idx -= r;
          mk += t[j] * cs[idx];
          nk += d[j] * sn[idx];
        }
        const Cx<T> rn = rot<Inverse>(nk);
        b[k] = mk + rn;
        b[r - k] = mk - rn;
      }
      out[q] = b[0];
      if (p == 0) {
        for (int k = 1; k < r; ++k) out[q + s * k] = b[k];
      } else {
        for (int k = 1; k < r; ++k) out[q + s * k] = twiddle<Inverse>(b[k], w[k - 1]);
      }
    }
  }
}

// Smallest 2^a·3^b·5^c ≥ target (the Bluestein convolution length).
std::int64_t smooth_at_least(std::int64_t target) {
  std::int64_t best = 1;
  while (best < target) best *= 2;
  for (std::int64_t p5 = 1; p5 < best; p5 *= 5)
    for (std::int64_t p35 = p5; p35 < best; p35 *= 3) {
      std::int64_t v = p35;
      while (v < target) v *= 2;
      best = std::min(best, v);
    }
  return best;
}

}  // namespace

template <class T>
ComplexFft<T>::ComplexFft(std::int64_t n) : n_(n) {
  check_length(n);
  std::vector<int> radices;
  std::int64_t rest = n;
  while (rest % 4 == 0) radices.push_back(4), rest /= 4;
  while (rest % 2 == 0) radices.push_back(2), rest /= 2;
  for (int p = 3; p <= kMaxDirectRadix; p += 2)
    while (rest % p == 0) radices.push_back(p), rest /= p;

  if (rest == 1) {
    std::int64_t len = n, s = 1;
    for (int r : radices) {
      const std::int64_t m = len / r;
      stages_.push_back(Stage{r, m, s, twiddles_.size(), trig_.size()});
      for (std::int64_t p = 0; p < m; ++p)
        for (int k = 1; k < r; ++k) {
          const std::complex<double> w = root(p * k, len);
          twiddles_.emplace_back(static_cast<T>(w.real()), static_cast<T>(w.imag()));
        }
      if (r > 5) {
        for (int i = 0; i < r; ++i) trig_.push_back(static_cast<T>(root(i, r).real()));
        for (int i = 0; i < r; ++i) trig_.push_back(static_cast<T>(-root(i, r).imag()));
      }
      len = m;
      s *= r;
    }
    work_ = stages_.empty() ? 0 : n;
    return;
  }

  // Bluestein: jk = (j² + k² − (k − j)²)/2 turns the DFT into a convolution with the chirp,
  // X_k = w_k · Σ_j (x_j·w_j)·conj(w_{k−j}), w_j = e^{−iπj²/n}, done circularly at length M.
  const std::int64_t big = smooth_at_least(2 * n - 1);
  inner_ = std::make_unique<ComplexFft<T>>(big);
  chirp_.resize(static_cast<std::size_t>(n));
  std::vector<std::complex<double>> b(static_cast<std::size_t>(big));
  for (std::int64_t j = 0; j < n; ++j) {
    // j² mod 2n exactly (j < 2^30), so the angle keeps its precision for long lines.
    const std::complex<double> w = root((j * j) % (2 * n), 2 * n);
    chirp_[static_cast<std::size_t>(j)] = C(static_cast<T>(w.real()), static_cast<T>(w.imag()));
    b[static_cast<std::size_t>(j)] = std::conj(w);
    if (j > 0) b[static_cast<std::size_t>(big - j)] = std::conj(w);
  }
  // The chirp's spectrum in double whatever T is; 1/M of the inverse folded in.
  std::vector<std::complex<double>> bwork;
  if constexpr (std::is_same_v<T, double>) {
    bwork.resize(static_cast<std::size_t>(inner_->work_size()));
    inner_->forward(b.data(), bwork.data());
  } else {
    ComplexFft<double> plan(big);
    bwork.resize(static_cast<std::size_t>(plan.work_size()));
    plan.forward(b.data(), bwork.data());
  }
  kernel_.resize(b.size());
  const double scale = 1.0 / static_cast<double>(big);
  for (std::size_t i = 0; i < b.size(); ++i)
    kernel_[i] = C(static_cast<T>(b[i].real() * scale), static_cast<T>(b[i].imag() * scale));
  work_ = big + inner_->work_size();
}

template <class T>
ComplexFft<T>::~ComplexFft() = default;
template <class T>
ComplexFft<T>::ComplexFft(ComplexFft&&) noexcept = default;
template <class T>
ComplexFft<T>& ComplexFft<T>::operator=(ComplexFft&&) noexcept = default;

template <class T>
void ComplexFft<T>::forward(C* data, C* work) const {
  if (inner_ != nullptr)
    run_bluestein<false>(data, work);
  else
    stockham<false>(data, work);
}

template <class T>
void ComplexFft<T>::inverse(C* data, C* work) const {
  if (inner_ != nullptr)
    run_bluestein<true>(data, work);
  else
    stockham<true>(data, work);
}

template <class T>
template <bool Inverse>
void ComplexFft<T>::stockham(C* data, C* work) const {
  C* x = data;
  C* y = work;
  for (const Stage& st : stages_) {
    const C* tw = twiddles_.data() + st.twiddle;
    switch (st.radix) {
      case 2:
        pass<Radix2<Inverse, T>, Inverse>(st.m, st.s, tw, x, y);
        break;
      case 3:
        pass<Radix3<Inverse, T>, Inverse>(st.m, st.s, tw, x, y);
        break;
      case 4:
        pass<Radix4<Inverse, T>, Inverse>(st.m, st.s, tw, x, y);
        break;
      case 5:
        pass<Radix5<Inverse, T>, Inverse>(st.m, st.s, tw, x, y);
        break;
      default:
        pass_generic<Inverse>(st.radix, st.m, st.s, tw, trig_.data() + st.trig, x, y);
    }
    std::swap(x, y);
  }
  if (x != data) std::copy(x, x + n_, data);
}

template <class T>
template <bool Inverse>
void ComplexFft<T>::run_bluestein(C* data, C* work) const {
  // The inverse DFT is conj(DFT(conj(x))).
  const std::int64_t big = inner_->size();
  C* a = work;
  C* inner_work = work + big;
  for (std::int64_t j = 0; j < n_; ++j) a[j] = mul(Inverse ? std::conj(data[j]) : data[j], chirp_[j]);
  std::fill(a + n_, a + big, C(0, 0));
  inner_->forward(a, inner_work);
  for (std::int64_t i = 0; i < big; ++i) a[i] = mul(a[i], kernel_[static_cast<std::size_t>(i)]);
  inner_->inverse(a, inner_work);
  for (std::int64_t k = 0; k < n_; ++k) {
    const C v = mul(a[k], chirp_[static_cast<std::size_t>(k)]);
    data[k] = Inverse ? std::conj(v) : v;
  }
}

template <class T>
PortableFft3Plan<T>::PortableFft3Plan(const Dims3& dims)
    : dims_(checked(dims)), even_x_(dims[0] % 2 == 0), x_(even_x_ ? dims[0] / 2 : dims[0]), y_(dims[1]), z_(dims[2]) {
  if (even_x_)
    for (std::int64_t k = 0; k <= dims[0] / 2; ++k) {
      const std::complex<double> w = root(k, dims[0]);
      x_twiddles_.emplace_back(static_cast<T>(w.real()), static_cast<T>(w.imag()));
    }
}

template <class T>
std::size_t PortableFft3Plan<T>::scratch_size() const {
  const std::int64_t x = (even_x_ ? 0 : dims_[0]) + x_.work_size();
  const std::int64_t y = kBlock * dims_[1] + y_.work_size();
  const std::int64_t z = kBlock * dims_[2] + z_.work_size();
  return static_cast<std::size_t>(std::max({x, y, z}));
}

template <class T>
void PortableFft3Plan<T>::lines(C* base, std::int64_t count, std::int64_t stride, const ComplexFft<T>& fft,
                                bool inverse, std::vector<C>& scratch) const {
  // `count` lines start at base[l], element t of line l at base[l + stride·t]. Blocks of
  // consecutive lines are gathered into contiguous rows, transformed and scattered back.
  const std::int64_t n = fft.size();
  if (n == 1) return;
  C* buf = scratch.data();
  C* work = buf + kBlock * n;
  for (std::int64_t l0 = 0; l0 < count; l0 += kBlock) {
    const std::int64_t lb = std::min(kBlock, count - l0);
    for (std::int64_t t = 0; t < n; ++t) {
      const C* src = base + l0 + stride * t;
      for (std::int64_t i = 0; i < lb; ++i) buf[i * n + t] = src[i];
    }
    for (std::int64_t i = 0; i < lb; ++i) {
      if (inverse)
        fft.inverse(buf + i * n, work);
      else
        fft.forward(buf + i * n, work);
    }
    for (std::int64_t t = 0; t < n; ++t) {
      C* dst = base + l0 + stride * t;
      for (std::int64_t i = 0; i < lb; ++i) dst[i] = buf[i * n + t];
    }
  }
}

template <class T>
void PortableFft3Plan<T>::x_forward(const T* real, C* spectrum, std::vector<C>& scratch) const {
  const std::int64_t nx = dims_[0], hx = nx / 2 + 1, rows = dims_[1] * dims_[2];
  if (even_x_) {
    // Half-length trick: z_m = x_2m + i·x_2m+1, Z = DFT_h(z); with E, O the spectra of the even
    // and odd samples, E_k = (Z_k + conj Z_{h−k})/2, O_k = (Z_k − conj Z_{h−k})/2i and
    // X_k = E_k + e^{−2πik/nx}·O_k, X_{h−k} = conj(E_k − e^{−2πik/nx}·O_k).
    const std::int64_t h = nx / 2;
    C* work = scratch.data();
    for (std::int64_t row = 0; row < rows; ++row) {
      const T* src = real + row * nx;
      C* line = spectrum + row * hx;
      for (std::int64_t m = 0; m < h; ++m) line[m] = C(src[2 * m], src[2 * m + 1]);
      x_.forward(line, work);
      const C z0 = line[0];
      line[0] = C(z0.real() + z0.imag(), 0);
      line[h] = C(z0.real() - z0.imag(), 0);
      for (std::int64_t k = 1; 2 * k <= h; ++k) {
        const C a = line[k], b = std::conj(line[h - k]);
        const C e = (a + b) * T(0.5);
        const C wo = mul(rot<false>(C(a - b)) * T(0.5), x_twiddles_[static_cast<std::size_t>(k)]);
        line[k] = e + wo;
        line[h - k] = std::conj(e - wo);
      }
    }
    return;
  }
  // Odd nx: two real lines per complex transform, z = x1 + i·x2, X1_k = (Z_k + conj Z_{n−k})/2,
  // X2_k = (Z_k − conj Z_{n−k})/2i.
  C* buf = scratch.data();
  C* work = buf + nx;
  for (std::int64_t row = 0; row < rows; row += 2) {
    const bool pair = row + 1 < rows;
    const T* r0 = real + row * nx;
    const T* r1 = r0 + nx;
    for (std::int64_t t = 0; t < nx; ++t) buf[t] = C(r0[t], pair ? r1[t] : T(0));
    x_.forward(buf, work);
    C* s0 = spectrum + row * hx;
    C* s1 = s0 + hx;
    s0[0] = C(buf[0].real(), 0);
    if (pair) s1[0] = C(buf[0].imag(), 0);
    for (std::int64_t k = 1; k < hx; ++k) {
      const C a = buf[k], b = std::conj(buf[nx - k]);
      s0[k] = (a + b) * T(0.5);
      if (pair) s1[k] = rot<false>(C(a - b)) * T(0.5);
    }
  }
}

template <class T>
void PortableFft3Plan<T>::x_inverse(C* spectrum, T* real, T scale, std::vector<C>& scratch) const {
  const std::int64_t nx = dims_[0], hx = nx / 2 + 1, rows = dims_[1] * dims_[2];
  if (even_x_) {
    // The forward trick undone at twice the scale: E_k = X_k + conj X_{h−k},
    // O_k = (X_k − conj X_{h−k})·e^{+2πik/nx}, Z_k = E_k + i·O_k; DFT⁻¹_h(Z) = nx·(x_2m + i·x_2m+1).
    const std::int64_t h = nx / 2;
    C* work = scratch.data();
    for (std::int64_t row = 0; row < rows; ++row) {
      C* line = spectrum + row * hx;
      T* dst = real + row * nx;
      const T x0 = line[0].real(), xh = line[h].real();
      line[0] = C(x0 + xh, x0 - xh);
      for (std::int64_t k = 1; 2 * k <= h; ++k) {
        const C a = line[k], b = std::conj(line[h - k]);
        const C e = a + b;
        const C o = mul_conj(C(a - b), x_twiddles_[static_cast<std::size_t>(k)]);
        line[k] = e + rot<true>(o);
        line[h - k] = std::conj(e) + rot<true>(std::conj(o));
      }
      x_.inverse(line, work);
      for (std::int64_t m = 0; m < h; ++m) {
        dst[2 * m] = line[m].real() * scale;
        dst[2 * m + 1] = line[m].imag() * scale;
      }
    }
    return;
  }
  // Odd nx: two Hermitian lines per complex transform, Z = X1 + i·X2 over the full length.
  C* buf = scratch.data();
  C* work = buf + nx;
  for (std::int64_t row = 0; row < rows; row += 2) {
    const bool pair = row + 1 < rows;
    const C* s0 = spectrum + row * hx;
    const C* s1 = s0 + hx;
    buf[0] = C(s0[0].real(), pair ? s1[0].real() : T(0));
    for (std::int64_t k = 1; k < hx; ++k) {
      const C a = s0[k], b = pair ? s1[k] : C(0, 0);
      buf[k] = C(a.real() - b.imag(), a.imag() + b.real());
      buf[nx - k] = C(a.real() + b.imag(), b.real() - a.imag());
    }
    x_.inverse(buf, work);
    T* r0 = real + row * nx;
    T* r1 = r0 + nx;
    for (std::int64_t t = 0; t < nx; ++t) r0[t] = buf[t].real() * scale;
    if (pair)
      for (std::int64_t t = 0; t < nx; ++t) r1[t] = buf[t].imag() * scale;
  }
}

template <class T>
void PortableFft3Plan<T>::forward(const T* real, C* spectrum) const {
  const std::int64_t hx = dims_[0] / 2 + 1, ny = dims_[1], nz = dims_[2];
  std::vector<C> scratch(scratch_size());
  x_forward(real, spectrum, scratch);
  for (std::int64_t k = 0; k < nz; ++k) lines(spectrum + k * hx * ny, hx, hx, y_, false, scratch);
  lines(spectrum, hx * ny, hx * ny, z_, false, scratch);
}

template <class T>
void PortableFft3Plan<T>::inverse(C* spectrum, T* real, T scale) const {
  const std::int64_t hx = dims_[0] / 2 + 1, ny = dims_[1], nz = dims_[2];
  std::vector<C> scratch(scratch_size());
  lines(spectrum, hx * ny, hx * ny, z_, true, scratch);
  for (std::int64_t k = 0; k < nz; ++k) lines(spectrum + k * hx * ny, hx, hx, y_, true, scratch);
  x_inverse(spectrum, real, scale, scratch);
}

template <class T>
PortableRealFft3<T>::PortableRealFft3(const Dims3& dims)
    : dims_(checked(dims)),
      real_(static_cast<std::size_t>(dims[0] * dims[1] * dims[2]) * sizeof(T), MemCategory::Other),
      spectrum_(static_cast<std::size_t>((dims[0] / 2 + 1) * dims[1] * dims[2]) * sizeof(std::complex<T>),
                MemCategory::Other),
      plan_(dims) {}

template <class T>
void PortableRealFft3<T>::forward() {
  plan_.forward(real(), spectrum());
}

template <class T>
void PortableRealFft3<T>::inverse() {
  plan_.inverse(spectrum(), real(), T(1) / static_cast<T>(real_count()));
}

template class ComplexFft<float>;
template class ComplexFft<double>;
template class PortableFft3Plan<float>;
template class PortableFft3Plan<double>;
template class PortableRealFft3<float>;
template class PortableRealFft3<double>;

}  // namespace qsmcore::physics
