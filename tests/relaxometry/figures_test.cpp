// The figures of the relaxometry maps, printed rather than asserted (run with
// --gtest_also_run_disabled_tests --gtest_filter='*Figures*'): bias and spread of each R2*
// estimator under noise, and seconds and bytes per voxel at 181×217×181 × 4 echoes on the
// calling thread count. Timing is reported, never asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "qsmcore/memory.h"
#include "qsmcore/relaxometry.h"
#include "relaxometry/decay.h"
#include "relaxometry/vein.h"

namespace qsmcore {
namespace {

using testing::Noise;

struct Method {
  const char* name;
  R2starOptions o;
};

std::vector<Method> methods() {
  std::vector<Method> m(4);
  m[0] = {"log-linear S^2", {}};
  m[1] = {"log-linear OLS", {}};
  m[1].o.weighting = LogLinearWeighting::Unweighted;
  m[2] = {"ARLO corrected", {}};
  m[2].o.method = R2starMethod::Arlo;
  m[3] = {"ARLO published", {}};
  m[3].o.method = R2starMethod::Arlo;
  m[3].o.arlo_simpson_correction = false;
  return m;
}

// The Cramér–Rao bound on R2*'s standard deviation for S0·exp(−R·TE) + N(0, σ²), S0 unknown.
double crlb(double r, const std::vector<double>& te, double sigma) {
  double a = 0.0, b = 0.0, c = 0.0;
  for (const double t : te) {
    const double e2 = std::exp(-2.0 * r * t);
    a += e2;
    b += t * e2;
    c += t * t * e2;
  }
  return sigma / std::sqrt(c - b * b / a);
}

TEST(RelaxometryFigures, DISABLED_R2starBiasAndSpreadAtSnr50) {
  const double snr = 50.0;  // S0/σ: the signal at TE = 0 over the noise per channel
  const std::vector<std::vector<double>> te_sets{{0.004, 0.012, 0.020, 0.028}, {0.004, 0.012, 0.020}};
  for (const auto& te : te_sets)
    for (const Noise noise : {Noise::Rician, Noise::Gaussian})
      for (const double r : {5.0, 20.0, 50.0, 150.0}) {
        Volume mag = testing::decay_volume(
            {32, 32, 32}, te, [&](std::int64_t) { return r; }, [](std::int64_t) { return 1.0; });
        testing::add_noise(mag, 1.0 / snr, noise, 1000 + static_cast<std::uint64_t>(r));
        std::printf("%zu echoes %-8s R2* %5.0f Hz  CRLB sd %6.3f |", te.size(),
                    noise == Noise::Rician ? "Rician" : "Gaussian", r, crlb(r, te, 1.0 / snr));
        for (const Method& m : methods()) {
          const testing::Stats s = testing::stats(r2star_map(mag, te, nullptr, m.o));
          std::printf(" %s bias %+7.3f sd %6.3f |", m.name, s.mean - r, s.sd);
        }
        std::printf("\n");
      }
}

TEST(RelaxometryFigures, DISABLED_SecondsAndBytesAtFullSize) {
  const Dims3 d{181, 217, 181};
  const std::vector<double> te{0.004, 0.012, 0.020, 0.028};
  Volume mag = testing::decay_volume(
      d, te, [](std::int64_t i) { return 5.0 + static_cast<double>(i % 97); }, [](std::int64_t) { return 1.0; });
  testing::add_noise(mag, 0.02, Noise::Rician, 3);
  Volume mask = Volume::zeros(d, mag.geometry());
  // An ellipsoid of about half the box: a head's brain mask.
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const double x = (i - 90.0) / 80.0, y = (j - 108.0) / 100.0, z = (k - 90.0) / 80.0;
        mask.at(i, j, k) = x * x + y * y + z * z <= 1.0 ? 1.0 : 0.0;
      }
  Volume field = Volume::zeros(d, mag.geometry());
  for (std::int64_t i = 0; i < field.voxels(); ++i)
    field.data()[i] = 20.0 * std::sin(0.05 * static_cast<double>(i % 181));
  const auto n = static_cast<double>(mag.voxels());
  // The shortest of three runs (the machine may be shared), and the peak of the first.
  const auto run = [&](const char* name, auto&& f) {
    double best = 1e300, bytes = 0.0;
    for (int rep = 0; rep < 3; ++rep) {
      reset_memory_peak();
      const std::int64_t base = memory_current();
      const auto t0 = std::chrono::steady_clock::now();
      f();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (rep == 0) bytes = static_cast<double>(memory_peak() - base) / n;
    }
    std::printf("%-22s %6.3f s on %d thread(s), %5.2f B/voxel above the inputs\n", name, best, max_threads(), bytes);
  };
  for (const Method& m : methods()) run(m.name, [&] { Volume r = r2star_map(mag, te, &mask, m.o); });
  run("T2* from R2*", [&] { Volume t = t2star_from_r2star(mask); });
  run("SWI (tanh) + mIP", [&] { SwiResult r = swi(mag, field, mask, te); });
  SwiOptions classic;
  classic.scaling = SwiPhaseScaling::Classic;
  run("SWI (classic) + mIP", [&] { SwiResult r = swi(mag, field, mask, te, classic); });
}

TEST(RelaxometryFigures, DISABLED_SwiInteriorChangeUnderABackgroundGradient) {
  // How much a smooth background changes the image where the high-pass window is whole, as its
  // in-plane gradient grows (scale 1: 15–27 Hz and 10 Hz per 32 voxels), per scaling.
  using namespace testing::vein;
  const Volume mask = cylinder_mask(), mag = magnitude();
  const Volume plain = field({true, false});
  for (const double g : {0.0, 0.1, 0.25, 0.5, 1.0, 2.0}) {
    const Volume bg = field({true, true, 0.5, g});
    std::printf("gradient x%.2f:", g);
    for (const auto s : {SwiPhaseScaling::Tanh, SwiPhaseScaling::Classic}) {
      SwiOptions o;
      o.scaling = s;
      std::printf("  %s %.4f", s == SwiPhaseScaling::Tanh ? "tanh" : "classic",
                  interior_change(swi(mag, plain, mask, kTe, o), swi(mag, bg, mask, kTe, o), mag));
    }
    std::printf("\n");
  }
}

}  // namespace
}  // namespace qsmcore
