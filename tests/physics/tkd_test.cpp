// TKD against its closed form on single Fourier modes: a mode with |D(k)| ≥ t is recovered
// exactly, one with |D(k)| < t comes back scaled by |D(k)|/t; a mask off the field's grid is
// refused.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "onnx/test_util.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace {

Volume mode(const Dims3& d, const Vec3& vox, const std::int64_t m[3]) {
  Volume v = Volume::zeros(d, Geometry::with_voxel(vox));
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i)
        v.at(i, j, k) = std::cos(2 * std::numbers::pi *
                                 (double(m[0] * i) / d[0] + double(m[1] * j) / d[1] + double(m[2] * k) / d[2]));
  return v;
}

TEST(Tkd, InvertsModesAboveTheThresholdAndScalesThoseBelow) {
  const Dims3 d{16, 16, 16};
  const Vec3 vox{1, 1, 1}, b{0, 0, 1};
  Volume mask = Volume::zeros(d, Geometry::isotropic(1.0));
  for (double& x : mask.values()) x = 1.0;
  const std::int64_t modes[][3] = {{0, 0, 2}, {3, 0, 0}, {1, 1, 1}, {2, 1, 3}, {1, 0, 1}};
  for (const auto& m : modes) {
    const Volume chi = mode(d, vox, m);
    ForwardOptions fo;
    fo.kernel = KernelOptions::lpcnn_modl();
    fo.padding = Padding::None;
    const Volume field = forward_field(chi, b, fo);
    TkdOptions to;
    to.threshold = 0.19;
    const Volume rec = tkd(field, mask, b, to);
    const double D = dipole_value(d, vox, b, to.kernel, m[0], m[1], m[2]);
    const double gain = std::abs(D) >= to.threshold ? 1.0 : std::abs(D) / to.threshold;
    for (std::int64_t i = 0; i < chi.voxels(); ++i)
      ASSERT_NEAR(rec.data()[i], gain * chi.data()[i], 1e-12) << m[0] << m[1] << m[2] << " D=" << D;
  }
}

TEST(Tkd, RefusesAMaskOnAnotherGrid) {
  const Volume f = Volume::zeros({8, 8, 8}, Geometry::isotropic(1.0));
  const Volume m = Volume::zeros({8, 8, 9}, Geometry::isotropic(1.0));
  const std::string msg = qsmtest::error_of([&] { tkd(f, m, {0, 0, 1}); }, ErrorKind::InvalidInput);
  EXPECT_NE(msg.find("8×8×9"), std::string::npos) << msg;
}

}  // namespace
}  // namespace qsmcore
