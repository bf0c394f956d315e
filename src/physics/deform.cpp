// The atlas phantom's random deformation (deform.h): a small affine and a smooth elastic field
// built from sinusoidal modes (random-field augmentation in the spirit of Simard et al., ICDAR
// 2003, here with closed-form modes so that the field costs no memory and is the same at any
// grid and thread count).
#include "physics/deform.h"

#include <cmath>
#include <numbers>

#include "physics/atlas_labels.h"
#include "physics/pcg.h"

namespace qsmcore::atlas {
namespace {

constexpr double kMaxRotationDeg = 10.0;
constexpr double kGlobalScale = 0.06;  // volume factor (1 ± 0.06)³: within ±19 %
constexpr double kAxisScale = 0.03;    // each axis's own, volume-preserving: axes within ±10 %
constexpr int kModes = 4;
constexpr double kMinWavelengthMm = 60.0, kMaxWavelengthMm = 140.0;
constexpr double kMinAmplitudeMm = 1.0, kMaxAmplitudeMm = 3.0;
// Σ|a||k| bounds the displacement's gradient: below 1 the map x ↦ x + u(x) is invertible; 0.4
// keeps the local volume change within (0.6, 1.4)³ even where every mode adds up.
constexpr double kMaxGradient = 0.4;

Vec3 unit_vector(physics::Pcg32& rng) {
  Vec3 v{rng.normal(), rng.normal(), rng.normal()};
  const double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  for (double& x : v) x /= n;
  return v;
}

double uniform(physics::Pcg32& rng, double lo, double hi) {
  return lo + (hi - lo) * rng.uniform();
}

}  // namespace

Warp::Warp() : m_{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}} {}

Warp Warp::random(std::uint64_t seed) {
  physics::Pcg32 rng(seed, 0xA71A5);
  Warp w;
  // Rotation by θ about û (Rodrigues), then scaling: M = R·diag(s).
  const Vec3 u = unit_vector(rng);
  const double th = uniform(rng, -kMaxRotationDeg, kMaxRotationDeg) * std::numbers::pi / 180.0;
  const double c = std::cos(th), s = std::sin(th);
  const double g = 1.0 + uniform(rng, -kGlobalScale, kGlobalScale);
  double a[3], prod = 1.0;
  for (double& x : a) prod *= (x = 1.0 + uniform(rng, -kAxisScale, kAxisScale));
  const double norm = std::cbrt(prod);
  for (int r = 0; r < 3; ++r)
    for (int q = 0; q < 3; ++q) {
      const double cross = r == q ? 0.0 : (r + 1) % 3 == q ? -u[3 - r - q] : u[3 - r - q];
      const double rot = (r == q ? c : 0.0) + (1.0 - c) * u[r] * u[q] + s * cross;
      w.m_[r][q] = rot * g * a[q] / norm;
    }
  double gradient = 0.0;
  for (int n = 0; n < kModes; ++n) {
    Mode m;
    const Vec3 kd = unit_vector(rng), ad = unit_vector(rng);
    const double k = 2.0 * std::numbers::pi / uniform(rng, kMinWavelengthMm, kMaxWavelengthMm);
    const double amp = uniform(rng, kMinAmplitudeMm, kMaxAmplitudeMm);
    for (int c3 = 0; c3 < 3; ++c3) {
      m.k[c3] = k * kd[c3];
      m.a[c3] = amp * ad[c3];
    }
    m.phase = uniform(rng, 0.0, 2.0 * std::numbers::pi);
    gradient += amp * k;
    w.modes_.push_back(m);
  }
  if (gradient > kMaxGradient)
    for (Mode& m : w.modes_)
      for (double& x : m.a) x *= kMaxGradient / gradient;
  return w;
}

Vec3 Warp::mni(const Vec3& p) const {
  Vec3 q = kCanonCentre;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) q[r] += m_[r][c] * p[c];
  for (const Mode& m : modes_) {
    const double s = std::sin(m.k[0] * p[0] + m.k[1] * p[1] + m.k[2] * p[2] + m.phase);
    for (int r = 0; r < 3; ++r) q[r] += m.a[r] * s;
  }
  return q;
}

}  // namespace qsmcore::atlas
