// Head phantom: χ and mask follow the tissue table (bilateral symmetry, zero outside the mask),
// the local field is the forward model of χ, phase is the wrapped unit conversion of the total
// field, magnitude decays by exp(−ΔTE·R2*), the shim residual is orthogonal to its basis, a
// tilted B0 is recoverable from the written affine, noise is seeded, and TKD on the local field
// lands near the classical figures (physics.md §6).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "onnx/test_util.h"
#include "qsmcore/metrics.h"
#include "qsmcore/phantom.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace {

PhantomOptions small() {
  PhantomOptions o;
  o.dims = {48, 56, 48};
  o.te_s = {0.004, 0.012};
  return o;
}

TEST(Phantom, ChiAndMaskFollowTheTable) {
  PhantomOptions o = small();
  o.phase_offset = false;
  const Phantom p = make_head_phantom(o);
  const auto tissues = head_phantom_tissues();
  std::int64_t in = 0;
  for (std::int64_t k = 0; k < 48; ++k)
    for (std::int64_t j = 0; j < 56; ++j)
      for (std::int64_t i = 0; i < 48; ++i) {
        const double c = p.chi.at(i, j, k);
        if (p.mask.at(i, j, k) == 0.0) {
          ASSERT_EQ(c, 0.0);
          continue;
        }
        ++in;
        bool known = false;
        for (const auto& t : tissues) known |= c == t.chi_ppm;
        ASSERT_TRUE(known) << c;
        ASSERT_EQ(c, p.chi.at(47 - i, j, k)) << "left/right mirror";
      }
  // The brain ellipsoid's volume fraction of the box: (4/3)π·0.72·0.86·0.70/8 ≈ 0.227.
  EXPECT_NEAR(double(in) / (48 * 56 * 48), 4.0 / 3.0 * std::numbers::pi * 0.72 * 0.86 * 0.70 / 8.0, 0.01);
  // Local field: the forward model of χ alone.
  const Volume f = forward_field(p.chi, {0, 0, 1});
  for (std::int64_t i = 0; i < f.voxels(); ++i) ASSERT_NEAR(p.local_field.data()[i], f.data()[i], 1e-12);
}

TEST(Phantom, PhaseAndMagnitudeFollowTheSignalModel) {
  PhantomOptions o = small();
  o.phase_offset = false;
  const Phantom p = make_head_phantom(o);
  const auto tissues = head_phantom_tissues();
  for (std::int64_t i = 0; i < p.mask.voxels(); ++i) {
    if (p.mask.data()[i] == 0.0) {
      ASSERT_EQ(p.magnitude.frame(0)[i], 0.0);
      continue;
    }
    for (std::int64_t e = 0; e < 2; ++e) {
      const double want = wrap_phase(2 * std::numbers::pi * p.total_field.data()[i] * 7.0 * 42.58 * o.te_s[e]);
      const double diff = wrap_phase(p.phase.frame(e)[i] - want);
      ASSERT_NEAR(diff, 0.0, 1e-9);
    }
    // Same tissue, two echoes: the ratio is exp(−ΔTE·R2*) for that tissue's R2*.
    const double ratio = p.magnitude.frame(1)[i] / p.magnitude.frame(0)[i];
    bool matched = false;
    for (const auto& t : tissues)
      if (p.chi.data()[i] == t.chi_ppm) matched |= std::abs(ratio - std::exp(-0.008 * t.r2s_hz)) < 1e-12;
    ASSERT_TRUE(matched) << ratio;
  }
}

TEST(Phantom, ShimResidualIsOrthogonalToItsBasis) {
  const Phantom p = make_head_phantom(small());
  std::vector<double> dots(9, 0.0);
  double scale = 0.0;
  for (std::int64_t k = 0; k < 48; ++k)
    for (std::int64_t j = 0; j < 56; ++j)
      for (std::int64_t i = 0; i < 48; ++i) {
        if (p.mask.at(i, j, k) == 0.0) continue;
        const auto b = shim_basis(p.mask.dims(), i, j, k);
        for (int r = 0; r < 9; ++r) dots[r] += b[r] * p.total_field.at(i, j, k);
        scale += std::abs(p.total_field.at(i, j, k));
      }
  for (int r = 0; r < 9; ++r) EXPECT_NEAR(dots[r] / scale, 0.0, 1e-9) << r;
}

TEST(Phantom, TiltedB0IsWrittenIntoTheAffine) {
  PhantomOptions o = small();
  o.b0_dir = {0.0, std::sin(0.35), std::cos(0.35)};
  o.background = false;
  const Phantom p = make_head_phantom(o);
  const Vec3 b = b0_dir_from_affine(p.chi.affine());
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(b[a], o.b0_dir[a], 1e-12);
  const Volume f = forward_field(p.chi, o.b0_dir);
  for (std::int64_t i = 0; i < f.voxels(); ++i) ASSERT_NEAR(p.local_field.data()[i], f.data()[i], 1e-12);
}

TEST(Phantom, NoiseIsSeeded) {
  PhantomOptions o = small();
  o.peak_snr = 50;
  o.seed = 7;
  const Phantom a = make_head_phantom(o), b = make_head_phantom(o);
  o.seed = 8;
  const Phantom c = make_head_phantom(o);
  EXPECT_EQ(std::memcmp(a.phase.data(), b.phase.data(), a.phase.size() * sizeof(double)), 0);
  EXPECT_NE(std::memcmp(a.phase.data(), c.phase.data(), a.phase.size() * sizeof(double)), 0);
}

TEST(Phantom, TkdRecoversChiRoughly) {
  PhantomOptions o = small();
  o.background = false;
  const Phantom p = make_head_phantom(o);
  const Volume chi = tkd(p.local_field, p.mask, {0, 0, 1});
  const QsmMetrics m = compute_metrics(chi, p.chi, &p.mask);
  // QSM-CI lists TKD at NRMSE 36 % / XSIM 0.78 on its head phantom; ours is coarser (48³) and
  // piecewise constant, so only the ballpark is checked.
  EXPECT_LT(m.nrmse, 80.0);
  EXPECT_GT(m.cc, 0.6);
}

TEST(Phantom, BadOptionsAreRefused) {
  PhantomOptions o = small();
  o.te_s = {0.004, -1.0};
  EXPECT_NE(qsmtest::error_of([&] { make_head_phantom(o); }, ErrorKind::InvalidInput).find("echo times"),
            std::string::npos);
  o = small();
  o.dims = {8, 48, 48};
  EXPECT_NE(qsmtest::error_of([&] { make_head_phantom(o); }, ErrorKind::InvalidInput).find("between 16"),
            std::string::npos);
}

}  // namespace
}  // namespace qsmcore
