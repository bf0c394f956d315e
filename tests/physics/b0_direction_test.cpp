// B0 in voxel axes from the affine: axial, flipped (LPS), rotated about x by 20°, anisotropic;
// parsing --b0-dir; the axial-only warning.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "qsmcore/error.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace {

Affine rotated_about_x(double deg, const Vec3& vox) {
  const double t = deg * std::numbers::pi / 180.0, c = std::cos(t), s = std::sin(t);
  Affine a = Affine::scaling(vox);
  // R·diag(vox) with R = Rx(t): columns (1,0,0), (0,c,s), (0,−s,c).
  a.m[1][1] = c * vox[1];
  a.m[2][1] = s * vox[1];
  a.m[1][2] = -s * vox[2];
  a.m[2][2] = c * vox[2];
  return a;
}

TEST(B0Direction, AxialAndFlippedAffinesGiveVoxelZ) {
  const Vec3 b = b0_dir_from_affine(Affine::scaling({0.9, 0.9, 2.0}));
  EXPECT_NEAR(b[2], 1.0, 1e-15);
  Affine lps = Affine::scaling({1, 1, 1});
  lps.m[0][0] = lps.m[1][1] = -1.0;
  EXPECT_NEAR(b0_dir_from_affine(lps)[2], 1.0, 1e-15);
  EXPECT_EQ(b0_obliquity_deg(b), 0.0);
  EXPECT_FALSE(axial_only_warning(b, "xQSM").has_value());
}

TEST(B0Direction, RotatedAffineGivesTheRotatedDirection) {
  const double t = 20.0 * std::numbers::pi / 180.0;
  const Vec3 b = b0_dir_from_affine(rotated_about_x(20.0, {1.0, 0.8, 2.0}));
  EXPECT_NEAR(b[0], 0.0, 1e-15);
  EXPECT_NEAR(b[1], std::sin(t), 1e-15);
  EXPECT_NEAR(b[2], std::cos(t), 1e-15);
  EXPECT_NEAR(b0_obliquity_deg(b), 20.0, 1e-12);
  const auto w = axial_only_warning(b, "QSMnet");
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("QSMnet"), std::string::npos) << *w;
  EXPECT_NE(w->find("20.0°"), std::string::npos) << *w;
  EXPECT_FALSE(axial_only_warning(b, "QSMnet", 25.0).has_value());
}

TEST(B0Direction, ParsesAndNormalisesTheOption) {
  const Vec3 b = parse_b0_dir("0, 3,4");
  EXPECT_NEAR(b[1], 0.6, 1e-15);
  EXPECT_NEAR(b[2], 0.8, 1e-15);
  for (const char* bad : {"0,0", "0,0,0", "1,2,x", "1,2,3,4", "1;2;3", ""}) EXPECT_THROW(parse_b0_dir(bad), Error) << bad;
}

}  // namespace
}  // namespace qsmcore
