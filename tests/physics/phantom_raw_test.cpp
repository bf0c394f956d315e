// The head phantom's raw-scan options (extracerebral, air_outside, head-wide φ₀): the wrapped
// phase is the truth phase modulo 2π; signal lies where the documented shells put it (CSF and
// scalp with signal and their R2*, skull and outside air without); φ₀ is one quadratic bowl
// over every voxel with signal; the air around the head adds, inside the brain, the field of an
// ellipsoidal hole in air (demagnetising factor, Osborn 1945) on the forward model's periodic
// grid; and with the new options off the phantom is the default one.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "qsmcore/phantom.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace {

constexpr double kPi = std::numbers::pi;

// The geometry phantom.h documents (normalised coordinates, ellipsoids centred at 0).
constexpr Vec3 kBrain{0.72, 0.86, 0.70}, kSkullIn{0.78, 0.92, 0.76}, kSkullOut{0.84, 0.96, 0.82},
    kScalpOut{0.90, 0.99, 0.88};

PhantomOptions raw(std::int64_t n) {
  PhantomOptions o;
  o.dims = {n, n, n};
  o.extracerebral = true;
  o.air_outside = true;
  return o;
}

double coord(std::int64_t p, std::int64_t n) {
  return 2.0 * (double(p) + 0.5) / double(n) - 1.0;
}

double ellipsoid(const Vec3& s, double x, double y, double z) {
  return (x / s[0]) * (x / s[0]) + (y / s[1]) * (y / s[1]) + (z / s[2]) * (z / s[2]);
}

// Distance of a to the nearest multiple of 2π.
double off_2pi(double a) {
  return std::abs(a - 2.0 * kPi * std::round(a / (2.0 * kPi)));
}

bool same_values(const Volume& a, const Volume& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), std::size_t(a.size()) * sizeof(double)) == 0;
}

TEST(RawPhantom, NewOptionsOffGiveTheDefaultPhantom) {
  // Guards the defaults: every new option off by default, so the demo, the trained network's
  // tests and everything else built on the default phantom see the same values.
  PhantomOptions d;
  d.dims = {32, 32, 32};
  d.peak_snr = 40;  // noise included: its stream must not move either
  PhantomOptions off = d;
  off.extracerebral = false;
  off.air_outside = false;
  const Phantom a = make_head_phantom(d), b = make_head_phantom(off);
  EXPECT_TRUE(same_values(a.chi, b.chi));
  EXPECT_TRUE(same_values(a.total_field, b.total_field));
  EXPECT_TRUE(same_values(a.local_field, b.local_field));
  EXPECT_TRUE(same_values(a.mask, b.mask));
  EXPECT_TRUE(same_values(a.magnitude, b.magnitude));
  EXPECT_TRUE(same_values(a.phase, b.phase));
  // And the default's signal is the brain's alone, φ₀ too.
  const Volume phi0 = head_phantom_phase_offset(d);
  for (std::int64_t i = 0; i < a.mask.voxels(); ++i)
    if (a.mask.data()[i] == 0.0) {
      ASSERT_EQ(phi0.data()[i], 0.0);
    }
}

TEST(RawPhantom, WrappedPhaseIsTheTruthPhaseModulo2Pi) {
  const PhantomOptions o = raw(48);
  const Phantom p = make_head_phantom(o);
  const Volume phi0 = head_phantom_phase_offset(o);
  std::int64_t with_signal = 0, outside_brain = 0;
  std::vector<double> lo(o.te_s.size(), INFINITY), hi(o.te_s.size(), -INFINITY);
  for (std::int64_t i = 0; i < p.mask.voxels(); ++i) {
    if (p.magnitude.frame(0)[i] == 0.0) continue;
    ++with_signal;
    outside_brain += p.mask.data()[i] == 0.0;
    for (std::size_t e = 0; e < o.te_s.size(); ++e) {
      const double truth = ppm_to_phase(p.total_field.data()[i], o.te_s[e], o.b0_t) + phi0.data()[i];
      const double wrapped = p.phase.frame(std::int64_t(e))[i];
      ASSERT_TRUE(wrapped > -kPi && wrapped <= kPi) << wrapped;
      ASSERT_LT(off_2pi(wrapped - truth), 1e-9) << "voxel " << i << " echo " << e;
      if (p.mask.data()[i] != 0.0) {
        lo[e] = std::min(lo[e], truth);
        hi[e] = std::max(hi[e], truth);
      }
    }
  }
  EXPECT_GT(outside_brain, with_signal / 5) << "the head around the brain gives signal";
  // The point of a raw scan: the last echo's phase wraps many times inside the brain.
  EXPECT_GT(hi.back() - lo.back(), 6.0 * kPi);
}

TEST(RawPhantom, CsfAndScalpHaveSignalSkullAndAirNone) {
  const PhantomOptions o = raw(64);
  const Phantom p = make_head_phantom(o);
  enum { kInBrain, kCsf, kSkull, kScalp, kAir };
  std::array<std::int64_t, 5> count{};
  const double dte = o.te_s[1] - o.te_s[0];
  for (std::int64_t k = 32; k < 64; ++k)  // z > 0: above the air cavities
    for (std::int64_t j = 0; j < 64; ++j)
      for (std::int64_t i = 0; i < 64; ++i) {
        const double x = coord(i, 64), y = coord(j, 64), z = coord(k, 64);
        const double eb = ellipsoid(kBrain, x, y, z), ei = ellipsoid(kSkullIn, x, y, z),
                     eo = ellipsoid(kSkullOut, x, y, z), es = ellipsoid(kScalpOut, x, y, z);
        bool near_boundary = false;
        for (double e : {eb, ei, eo, es}) near_boundary |= std::abs(e - 1.0) < 1e-6;
        if (near_boundary) continue;
        const int region = eb < 1 ? kInBrain : ei < 1 ? kCsf : eo < 1 ? kSkull : es < 1 ? kScalp : kAir;
        ++count[region];
        const double m0 = p.magnitude.at(i, j, k, 0), m1 = p.magnitude.at(i, j, k, 1);
        ASSERT_EQ(p.mask.at(i, j, k), region == kInBrain ? 1.0 : 0.0) << i << "," << j << "," << k;
        if (region != kInBrain) {
          ASSERT_EQ(p.chi.at(i, j, k), 0.0) << "χ truth stays the brain's";
        }
        if (region == kSkull || region == kAir) {
          ASSERT_EQ(m0, 0.0) << region;
        } else {
          ASSERT_GT(m0, 0.0) << region;
        }
        // T2* decay between echoes: the ventricles' R2* (5 Hz) in CSF, the scalp's 50 Hz.
        if (region == kCsf) {
          ASSERT_NEAR(m1 / m0, std::exp(-dte * 5.0), 1e-12);
        } else if (region == kScalp) {
          ASSERT_NEAR(m1 / m0, std::exp(-dte * 50.0), 1e-12);
        }
      }
  for (int r = 0; r < 5; ++r) EXPECT_GT(count[r], 100) << "region " << r;
}

// Least-squares fit of the full quadratic (10 terms) to v over the voxels where `where` is
// non-zero; returns the largest residual.
double quadratic_residual(const Volume& v, const Volume& where) {
  constexpr int n = 10;
  std::array<std::array<double, n + 1>, n> A{};
  const auto basis = [&](std::int64_t i, std::int64_t j, std::int64_t k) {
    const double x = coord(i, v.nx()), y = coord(j, v.ny()), z = coord(k, v.nz());
    return std::array<double, n>{1, x, y, z, x * x, y * y, z * z, x * y, x * z, y * z};
  };
  for (std::int64_t k = 0; k < v.nz(); ++k)
    for (std::int64_t j = 0; j < v.ny(); ++j)
      for (std::int64_t i = 0; i < v.nx(); ++i) {
        if (where.at(i, j, k) == 0.0) continue;
        const auto b = basis(i, j, k);
        for (int r = 0; r < n; ++r) {
          for (int c = 0; c < n; ++c) A[r][c] += b[r] * b[c];
          A[r][n] += b[r] * v.at(i, j, k);
        }
      }
  for (int c = 0; c < n; ++c) {  // Gauss–Jordan with partial pivoting
    int piv = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(A[r][c]) > std::abs(A[piv][c])) piv = r;
    std::swap(A[c], A[piv]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = A[r][c] / A[c][c];
      for (int q = c; q <= n; ++q) A[r][q] -= f * A[c][q];
    }
  }
  double worst = 0.0;
  for (std::int64_t k = 0; k < v.nz(); ++k)
    for (std::int64_t j = 0; j < v.ny(); ++j)
      for (std::int64_t i = 0; i < v.nx(); ++i) {
        if (where.at(i, j, k) == 0.0) continue;
        const auto b = basis(i, j, k);
        double fit = 0.0;
        for (int r = 0; r < n; ++r) fit += b[r] * A[r][n] / A[r][r];
        worst = std::max(worst, std::abs(fit - v.at(i, j, k)));
      }
  return worst;
}

TEST(RawPhantom, PhaseOffsetIsOneSmoothBowlOverEveryVoxelWithSignal) {
  PhantomOptions o = raw(48);
  const Phantom p = make_head_phantom(o);
  const Volume phi0 = head_phantom_phase_offset(o);
  Volume signal = Volume::zeros_like(p.mask, 1);
  double lo = INFINITY, hi = -INFINITY;
  std::int64_t outside_brain = 0;
  for (std::int64_t i = 0; i < p.mask.voxels(); ++i) {
    if (p.magnitude.data()[i] == 0.0) {
      ASSERT_EQ(phi0.data()[i], 0.0);
      continue;
    }
    signal.data()[i] = 1.0;
    lo = std::min(lo, phi0.data()[i]);
    hi = std::max(hi, phi0.data()[i]);
    outside_brain += p.mask.data()[i] == 0.0;
  }
  ASSERT_GT(outside_brain, 1000);
  EXPECT_NEAR(hi - lo, kPi, 1e-12);  // qsm-forward's bowl spans π over where it is defined
  EXPECT_LT(quadratic_residual(phi0, signal), 1e-9);
  // It is what the scan carries: phase with φ₀ minus phase without is φ₀, modulo 2π.
  o.phase_offset = false;
  const Phantom flat = make_head_phantom(o);
  for (std::int64_t i = 0; i < p.mask.voxels(); ++i) {
    if (signal.data()[i] == 0.0) continue;
    ASSERT_LT(off_2pi(p.phase.data()[i] - flat.phase.data()[i] - phi0.data()[i]), 1e-9);
  }
}

// Demagnetising factor along z of an ellipsoid with semi-axes a, b, c (Osborn, Phys. Rev. 67,
// 351, 1945): N_z = abc/2 ∫₀^∞ ds / ((c² + s)·√((a² + s)(b² + s)(c² + s))), by the midpoint
// rule after s = t/(1 − t).
double demagnetising_z(double a, double b, double c) {
  constexpr int n = 200000;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const double t = (i + 0.5) / n, s = t / (1.0 - t), ds = 1.0 / ((1.0 - t) * (1.0 - t));
    sum += ds / ((c * c + s) * std::sqrt((a * a + s) * (b * b + s) * (c * c + s)));
  }
  return a * b * c / 2.0 * sum / n;
}

TEST(RawPhantom, AirOutsideAddsTheFieldOfAHeadShapedHoleInAir) {
  // By linearity, (air outside) − (no air outside) is the field of χ_air everywhere but the head
  // (the scalp ellipsoid). In the dipole kernel with D(0) = 1/3, a uniformly magnetised
  // ellipsoid has the uniform field Δχ·(1/3 − N_z) inside, so χ_air·(1 − head) gives
  // χ_air·N_z there; on the forward model's periodic 2N grid the k = 0 term adds −χ_air·f/3,
  // f the head's share of the padded grid (a cubic grid's images add nothing at the centre).
  constexpr std::int64_t n = 64;
  PhantomOptions o = raw(n);
  o.shim = false;
  o.phase_offset = false;
  o.te_s = {0.004};
  const Phantom with_air = make_head_phantom(o);
  o.air_outside = false;
  const Phantom without = make_head_phantom(o);
  std::int64_t head = 0;
  for (std::int64_t k = 0; k < n; ++k)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < n; ++i) head += ellipsoid(kScalpOut, coord(i, n), coord(j, n), coord(k, n)) <= 1.0;
  const double f = double(head) / double(8 * n * n * n);
  const double half = n / 2.0;  // 1 mm voxels
  const double want = 9.2 * (demagnetising_z(kScalpOut[0] * half, kScalpOut[1] * half, kScalpOut[2] * half) - f / 3.0);
  double sum = 0.0, worst = 0.0;
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < with_air.mask.voxels(); ++i) {
    if (with_air.mask.data()[i] == 0.0) continue;
    const double d = with_air.total_field.data()[i] - without.total_field.data()[i];
    ASSERT_TRUE(std::isfinite(d));
    sum += d;
    worst = std::max(worst, std::abs(d - want));
    ++count;
  }
  // About 3.1 ppm; a staircase surface 2-4 voxels from the brain leaves ±0.09 ppm at 64³.
  EXPECT_NEAR(sum / double(count), want, 0.01);
  EXPECT_LT(worst, 0.15);
}

}  // namespace
}  // namespace qsmcore
