// The portable FFT (physics/portable_fft.h, the WebAssembly build's FFT) against a naive DFT,
// against FFTW (RealFft3 where the build has QSM_HAVE_FFTW) on random volumes with every axis
// length kind (1, powers of 2, 3- and 5-smooth, small primes, primes run through Bluestein), and
// against closed forms: a single cosine mode has one spectral peak of N/2, a delta a flat
// spectrum. Errors are relative to the largest magnitude; any non-finite value fails.
#include "physics/portable_fft.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "physics/fft.h"
#include "qsmcore/error.h"

namespace qsmcore::physics {
namespace {

using cd = std::complex<double>;

// Every axis length the tests cover: 1, powers of two, 3·4, 3·5, 2²·5², 3², primes up to 47
// (direct butterflies: 3, 5, 7, 17, 31, 37) and above (Bluestein: 97, 181).
const std::int64_t kSizes[] = {1, 2, 3, 5, 7, 8, 9, 12, 15, 16, 17, 31, 37, 64, 97, 100, 181};

std::string name(const Dims3& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

// Shapes putting each length on each axis (the other two small and varied), and mixed ones.
std::vector<Dims3> shapes() {
  const std::int64_t small[] = {1, 2, 3, 5, 6, 7, 8, 9, 12};
  std::vector<Dims3> out = {{17, 12, 9}, {181, 7, 5},  {8, 97, 3},  {1, 1, 64},  {37, 31, 16}, {1, 1, 1},
                            {100, 2, 1}, {15, 16, 17}, {2, 181, 3}, {3, 5, 181}, {31, 17, 37}, {64, 9, 15}};
  int i = 0;
  for (std::int64_t s : kSizes)
    for (int axis = 0; axis < 3; ++axis, ++i) {
      Dims3 d{small[i % 9], small[(i * 5 + 3) % 9], 0};
      d[2] = d[axis];
      d[axis] = s;
      out.push_back(d);
    }
  return out;
}

std::vector<double> random_volume(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

// max |got − want| / max |want|; +∞ when any value is non-finite.
template <class A, class B>
double rel_error(const A* got, const B* want, std::int64_t n) {
  double worst = 0.0, scale = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const cd g(got[i]), w(want[i]);
    if (!std::isfinite(g.real()) || !std::isfinite(g.imag()) || !std::isfinite(w.real()) || !std::isfinite(w.imag()))
      return INFINITY;
    worst = std::max(worst, std::abs(g - w));
    scale = std::max(scale, std::abs(w));
  }
  return scale > 0 ? worst / scale : worst;
}

// The largest error each test saw, printed at its end (the report's figures).
double g_worst = 0.0;

template <class A, class B>
::testing::AssertionResult within(const A* got, const B* want, std::int64_t n, double rel) {
  const double e = rel_error(got, want, n);
  if (e <= rel) {
    g_worst = std::max(g_worst, e);
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "relative error " << e << " > " << rel << " (inf: a non-finite value)";
}

// The 1-D DFT straight from its definition (angles reduced exactly, in double).
std::vector<cd> naive_dft(const std::vector<cd>& x, bool inverse) {
  const std::int64_t n = static_cast<std::int64_t>(x.size());
  std::vector<cd> y(x.size());
  for (std::int64_t k = 0; k < n; ++k) {
    cd s = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const double a = (inverse ? 2.0 : -2.0) * std::numbers::pi * static_cast<double>((j * k) % n) / double(n);
      s += x[static_cast<std::size_t>(j)] * cd(std::cos(a), std::sin(a));
    }
    y[static_cast<std::size_t>(k)] = s;
  }
  return y;
}

// Half spectrum of a real column-major volume by separable naive DFTs.
std::vector<cd> naive_r2c(const std::vector<double>& real, const Dims3& d) {
  std::vector<cd> v(real.begin(), real.end());
  const std::int64_t stride[3] = {1, d[0], d[0] * d[1]};
  for (int axis = 0; axis < 3; ++axis) {
    const std::int64_t n = d[axis];
    for (std::int64_t base = 0; base < d[0] * d[1] * d[2]; ++base) {
      if ((base / stride[axis]) % n != 0) continue;  // base: the line's first element
      std::vector<cd> line(static_cast<std::size_t>(n));
      for (std::int64_t t = 0; t < n; ++t)
        line[static_cast<std::size_t>(t)] = v[static_cast<std::size_t>(base + t * stride[axis])];
      line = naive_dft(line, false);
      for (std::int64_t t = 0; t < n; ++t)
        v[static_cast<std::size_t>(base + t * stride[axis])] = line[static_cast<std::size_t>(t)];
    }
  }
  const std::int64_t hx = d[0] / 2 + 1;
  std::vector<cd> half(static_cast<std::size_t>(hx * d[1] * d[2]));
  for (std::int64_t r = 0; r < d[1] * d[2]; ++r)
    for (std::int64_t i = 0; i < hx; ++i)
      half[static_cast<std::size_t>(r * hx + i)] = v[static_cast<std::size_t>(r * d[0] + i)];
  return half;
}

template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, double> ? 1e-12 : 1e-5;
}

template <class T>
void load(PortableRealFft3<T>& fft, const std::vector<double>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) fft.real()[i] = static_cast<T>(v[i]);
}

template <class T>
class PortableFft : public ::testing::Test {
 protected:
  void SetUp() override { g_worst = 0.0; }
  void TearDown() override { std::printf("  largest relative error: %.3g\n", g_worst); }
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(PortableFft, Precisions);

TYPED_TEST(PortableFft, ComplexPlanMatchesTheDefinitionForEveryLength) {
  using T = TypeParam;
  std::vector<std::int64_t> lengths;
  for (std::int64_t n = 1; n <= 128; ++n) lengths.push_back(n);
  for (std::int64_t n : {181, 210, 243, 256, 289, 343, 360, 509, 625, 1000, 1009, 1024, 1331, 2197})
    lengths.push_back(n);
  for (std::int64_t n : lengths) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const ComplexFft<T> fft(n);
    std::vector<double> re = random_volume(n, 7 + n), im = random_volume(n, 1000 + n);
    std::vector<cd> x(static_cast<std::size_t>(n));
    std::vector<std::complex<T>> data(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      data[i] = std::complex<T>(static_cast<T>(re[i]), static_cast<T>(im[i]));
      x[i] = cd(data[i]);
    }
    std::vector<std::complex<T>> work(static_cast<std::size_t>(fft.work_size()));
    fft.forward(data.data(), work.data());
    ASSERT_TRUE(within(data.data(), naive_dft(x, false).data(), n, tolerance<T>()));
    // inverse(forward(x)) = n·x
    fft.inverse(data.data(), work.data());
    for (auto& v : data) v /= static_cast<T>(n);
    ASSERT_TRUE(within(data.data(), x.data(), n, tolerance<T>()));
    std::vector<cd> xi(x);
    for (std::size_t i = 0; i < x.size(); ++i) data[i] = std::complex<T>(x[i]);
    fft.inverse(data.data(), work.data());
    ASSERT_TRUE(within(data.data(), naive_dft(xi, true).data(), n, tolerance<T>()));
  }
}

TYPED_TEST(PortableFft, RealTransformMatchesTheDefinition) {
  using T = TypeParam;
  for (const Dims3& d : shapes()) {
    SCOPED_TRACE(name(d));
    PortableRealFft3<T> fft(d);
    std::vector<double> v =
        random_volume(fft.real_count(), static_cast<std::uint64_t>(d[0] * 1000003 + d[1] * 1009 + d[2]));
    load(fft, v);
    for (double& x : v) x = static_cast<double>(static_cast<T>(x));
    fft.forward();
    ASSERT_TRUE(within(fft.spectrum(), naive_r2c(v, d).data(), fft.spectrum_count(), tolerance<T>()));
    for (std::int64_t i = 0; i < fft.real_count(); ++i)
      ASSERT_EQ(fft.real()[i], static_cast<T>(v[static_cast<std::size_t>(i)]));  // preserved
    fft.inverse();
    ASSERT_TRUE(within(fft.real(), v.data(), fft.real_count(), tolerance<T>()));
  }
}

TYPED_TEST(PortableFft, MatchesFftw) {
#if !QSM_HAVE_FFTW
  GTEST_SKIP() << "RealFft3 is the portable FFT itself in this build (no QSM_HAVE_FFTW)";
#else
  using T = TypeParam;
  for (const Dims3& d : shapes()) {
    SCOPED_TRACE(name(d));
    PortableRealFft3<T> fft(d);
    RealFft3<double> oracle(d);
    std::vector<double> v = random_volume(fft.real_count(), static_cast<std::uint64_t>(d[0] + 17 * d[1] + 289 * d[2]));
    load(fft, v);
    for (std::int64_t i = 0; i < fft.real_count(); ++i) oracle.real()[i] = static_cast<double>(fft.real()[i]);
    fft.forward();
    oracle.forward();
    ASSERT_TRUE(within(fft.spectrum(), oracle.spectrum(), fft.spectrum_count(), tolerance<T>()));
    // The inverse of the same (FFTW's) spectrum, then of its own: both give the volume back.
    for (std::int64_t i = 0; i < fft.spectrum_count(); ++i) fft.spectrum()[i] = std::complex<T>(oracle.spectrum()[i]);
    fft.inverse();
    oracle.inverse();
    ASSERT_TRUE(within(fft.real(), oracle.real(), fft.real_count(), tolerance<T>()));
    fft.forward();
    fft.inverse();
    ASSERT_TRUE(within(fft.real(), oracle.real(), fft.real_count(), tolerance<T>()));
  }
#endif
}

TYPED_TEST(PortableFft, CosineModeIsOnePeakOfHalfTheVolume) {
  using T = TypeParam;
  const struct {
    Dims3 d;
    std::int64_t m[3];
  } cases[] = {{{12, 9, 7}, {3, 2, 1}}, {{17, 37, 6}, {4, 5, 2}}, {{181, 5, 1}, {60, 1, 0}}, {{16, 1, 97}, {5, 0, 40}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(name(c.d));
    PortableRealFft3<T> fft(c.d);
    const Dims3& d = c.d;
    for (std::int64_t k = 0; k < d[2]; ++k)
      for (std::int64_t j = 0; j < d[1]; ++j)
        for (std::int64_t i = 0; i < d[0]; ++i) {
          const std::int64_t phase = ((c.m[0] * i) % d[0]) * d[1] * d[2] + ((c.m[1] * j) % d[1]) * d[0] * d[2] +
                                     ((c.m[2] * k) % d[2]) * d[0] * d[1];
          fft.real()[i + d[0] * (j + d[1] * k)] = static_cast<T>(
              std::cos(2 * std::numbers::pi * static_cast<double>(phase) / static_cast<double>(fft.real_count())));
        }
    fft.forward();
    // cos = (e^{iθ} + e^{−iθ})/2: N/2 at m; the −m peak lies at x = nx − m_x, outside the half spectrum.
    std::vector<cd> want(static_cast<std::size_t>(fft.spectrum_count()), 0.0);
    const std::int64_t hx = d[0] / 2 + 1;
    want[static_cast<std::size_t>(c.m[0] + hx * (c.m[1] + d[1] * c.m[2]))] =
        0.5 * static_cast<double>(fft.real_count());
    EXPECT_TRUE(within(fft.spectrum(), want.data(), fft.spectrum_count(), tolerance<T>()));
  }
}

TYPED_TEST(PortableFft, DeltaHasAFlatSpectrum) {
  using T = TypeParam;
  for (const Dims3& d : {Dims3{12, 9, 7}, Dims3{181, 3, 2}, Dims3{5, 37, 17}, Dims3{1, 1, 1}}) {
    SCOPED_TRACE(name(d));
    PortableRealFft3<T> fft(d);
    std::fill(fft.real(), fft.real() + fft.real_count(), T(0));
    // A delta at voxel (a, b, c): every coefficient has modulus 1 and phase −2π(k·a/nx + …).
    const std::int64_t a = d[0] / 3, b = d[1] / 2, cz = d[2] - 1;
    fft.real()[a + d[0] * (b + d[1] * cz)] = 1;
    fft.forward();
    const std::int64_t hx = d[0] / 2 + 1;
    std::vector<cd> want(static_cast<std::size_t>(fft.spectrum_count()));
    for (std::int64_t k = 0; k < d[2]; ++k)
      for (std::int64_t j = 0; j < d[1]; ++j)
        for (std::int64_t i = 0; i < hx; ++i) {
          const double ph =
              -2 * std::numbers::pi *
              (double((i * a) % d[0]) / d[0] + double((j * b) % d[1]) / d[1] + double((k * cz) % d[2]) / d[2]);
          want[static_cast<std::size_t>(i + hx * (j + d[1] * k))] = cd(std::cos(ph), std::sin(ph));
        }
    EXPECT_TRUE(within(fft.spectrum(), want.data(), fft.spectrum_count(), tolerance<T>()));
  }
}

TYPED_TEST(PortableFft, ObjectsRunConcurrently) {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  GTEST_SKIP() << "the single-threaded WebAssembly build has no threads";
#endif
  using T = TypeParam;
  const Dims3 d{37, 12, 17};
  const std::vector<double> v = random_volume(d[0] * d[1] * d[2], 5);
  PortableRealFft3<T> serial(d);
  load(serial, v);
  serial.forward();
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      PortableRealFft3<T> fft(d);
      load(fft, v);
      bool ok = true;
      for (int rep = 0; rep < 5; ++rep) {
        fft.forward();
        for (std::int64_t i = 0; i < fft.spectrum_count(); ++i) ok = ok && fft.spectrum()[i] == serial.spectrum()[i];
      }
      same[static_cast<std::size_t>(t)] = ok;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(same[static_cast<std::size_t>(t)]) << "thread " << t;
}

TEST(PortableFftCheck, NonFiniteValuesFailTheComparison) {
  const double want[] = {1.0, 2.0, 3.0};
  const double nan[] = {1.0, std::nan(""), 3.0};
  const double inf[] = {1.0, 2.0, INFINITY};
  EXPECT_TRUE(within(want, want, 3, 1e-12));
  EXPECT_FALSE(within(nan, want, 3, 1e-12));
  EXPECT_FALSE(within(inf, want, 3, 1e-12));
  EXPECT_FALSE(within(want, nan, 3, 1e-12));
  // A NaN in the volume reaches the spectrum, so a broken transform cannot pass as close.
  PortableRealFft3<double> fft({8, 5, 3});
  std::fill(fft.real(), fft.real() + fft.real_count(), 0.0);
  fft.real()[7] = std::nan("");
  fft.forward();
  std::vector<cd> zero(static_cast<std::size_t>(fft.spectrum_count()), 0.0);
  EXPECT_FALSE(within(fft.spectrum(), zero.data(), fft.spectrum_count(), 1.0));
}

TEST(PortableFftCheck, RefusesSizesOutOfRangeAsRealFft3Does) {
  for (const Dims3& d : {Dims3{0, 4, 4}, Dims3{4, -1, 4}, Dims3{4, 4, (std::int64_t{1} << 30) + 1}}) {
    try {
      PortableRealFft3<float> fft(d);
      ADD_FAILURE() << name(d) << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
      EXPECT_STREQ(e.what(), "FFT size out of range");
    }
    EXPECT_THROW(RealFft3<double>{d}, Error);
  }
  EXPECT_THROW(ComplexFft<double>(0), Error);
}

}  // namespace
}  // namespace qsmcore::physics
