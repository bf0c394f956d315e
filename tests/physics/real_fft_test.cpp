// RealFft3's spectrum is made by its first forward() and may be released between transforms
// (NeXtQSM's FFT step under a budget, issue #16): the real buffer alone is held until then, and
// a spectrum made again gives the bits of one kept, against a naive DFT as oracle of the values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <numbers>
#include <random>
#include <vector>

#include "physics/fft.h"
#include "qsmcore/memory.h"

namespace qsmcore::physics {
namespace {

std::vector<double> random_volume(const Dims3& d, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(d[0] * d[1] * d[2]));
  for (double& x : v) x = u(rng);
  return v;
}

// One round: forward, a spectral weight that is Hermitian-safe (real, depending on |k|), inverse.
std::vector<double> round_trip(RealFft3<double>& fft, const std::vector<double>& in, bool release_between) {
  std::copy(in.begin(), in.end(), fft.real());
  fft.forward();
  for (std::int64_t i = 0; i < fft.spectrum_count(); ++i) fft.spectrum()[i] *= 1.0 / (1.0 + static_cast<double>(i % 7));
  fft.inverse();
  if (release_between) fft.release_spectrum();
  return {fft.real(), fft.real() + fft.real_count()};
}

TEST(RealFft3, HoldsItsRealBufferAloneUntilTheFirstForward) {
  const Dims3 d{24, 20, 18};
  const std::int64_t before = memory_current();
  RealFft3<double> fft(d);
  EXPECT_EQ(memory_current() - before, fft.real_count() * 8) << "the spectrum was made before it was needed";
  std::vector<double> v = random_volume(d, 1);
  round_trip(fft, v, true);
  EXPECT_EQ(memory_current() - before, fft.real_count() * 8) << "a released spectrum is still held";
}

TEST(RealFft3, ASpectrumReleasedAndMadeAgainGivesTheBitsOfOneKept) {
  for (const Dims3& d : {Dims3{24, 20, 18}, Dims3{17, 12, 9}, Dims3{64, 64, 64}}) {
    RealFft3<double> kept(d), released(d);
    for (unsigned seed = 1; seed <= 3; ++seed) {
      const std::vector<double> v = random_volume(d, seed);
      const std::vector<double> a = round_trip(kept, v, false), b = round_trip(released, v, true);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0) << d[0] << "x" << d[1] << "x" << d[2];
    }
  }
}

TEST(RealFft3, TheSpectrumAfterARelease) {
  // A single cosine mode along x: one peak of N/2 at k = 3 (naive DFT: Σ cos(2π·3i/n)·e^{−2πi·3i/n}).
  const Dims3 d{16, 4, 2};
  RealFft3<double> fft(d);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::int64_t z = 0; z < d[2]; ++z)
      for (std::int64_t y = 0; y < d[1]; ++y)
        for (std::int64_t x = 0; x < d[0]; ++x)
          fft.real()[x + d[0] * (y + d[1] * z)] =
              std::cos(2.0 * std::numbers::pi * 3.0 * static_cast<double>(x) / 16.0);
    fft.forward();
    const double n = static_cast<double>(fft.real_count());
    for (std::int64_t i = 0; i < fft.spectrum_count(); ++i) {
      const double want = i == 3 ? n / 2 : 0.0;
      ASSERT_TRUE(std::isfinite(fft.spectrum()[i].real()));
      EXPECT_NEAR(std::abs(fft.spectrum()[i] - std::complex<double>(want, 0.0)), 0.0, 1e-9 * n) << "bin " << i;
    }
    fft.release_spectrum();
  }
}

// Each length is the smallest ≥ n whose factors are all ≤ the largest prime (and even when
// asked), checked against every length below it.
TEST(SmoothFftLength, IsTheSmallestSmoothLengthAtLeastN) {
  for (int largest : {5, 7}) {
    const auto smooth = [largest](std::int64_t m) {
      for (std::int64_t p : {2, 3, 5, 7})
        if (p <= largest)
          while (m % p == 0) m /= p;
      return m == 1;
    };
    for (std::int64_t n = 0; n <= 300; ++n)
      for (bool even : {false, true}) {
        const std::int64_t f = physics::smooth_fft_length(n, largest, even);
        const auto ok = [&](std::int64_t m) { return smooth(m) && (!even || m % 2 == 0); };
        ASSERT_GE(f, std::max<std::int64_t>(n, 1));
        ASSERT_TRUE(ok(f)) << n << " -> " << f;
        for (std::int64_t m = std::max<std::int64_t>(n, 1); m < f; ++m) ASSERT_FALSE(ok(m)) << n << " -> " << f;
      }
  }
  EXPECT_EQ(physics::smooth_fft_length(181), 189);
  EXPECT_EQ(physics::smooth_fft_length(181, 5), 192);
  EXPECT_EQ(physics::smooth_fft_length(181, 7, true), 192);
}

}  // namespace
}  // namespace qsmcore::physics
