// The SHARP family's shared steps (src/bgremove/smv_kernel.h) against definitions evaluated the
// slow way: the distance transform against brute-force distances, the ball erosion against the
// SMV-threshold erosion (S∗M > 1 − ε by FFT on a grid padded so the volume's outside is outside)
// and against the brute-force "whole ball inside", the kernel's convolution against ball means,
// and the FFT sizes against their definition.
#include "bgremove/smv_kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "bgremove/smv_reference.h"
#include "core/parallel.h"
#include "physics/fft.h"
#include "physics/pcg.h"
#include "qsmcore/masking.h"

namespace qsmcore::bgremove {
namespace {

TEST(SmvKernel, DistanceTransformIsTheExactSquaredDistanceToTheOutside) {
  // Brute force over every outside voxel, the volume framed by one layer of outside voxels.
  const Dims3 d{14, 12, 11};
  const Vec3 voxel{1.0, 1.25, 0.9};
  const Volume mask = blob_mask(d, voxel);
  const AccountedArray<double> dist = squared_distance_to_outside(mask);
  std::int64_t checked = 0;
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        double best = INFINITY;
        for (std::int64_t c = -1; c <= d[2]; ++c)
          for (std::int64_t b = -1; b <= d[1]; ++b)
            for (std::int64_t a = -1; a <= d[0]; ++a) {
              const bool beyond = a < 0 || b < 0 || c < 0 || a >= d[0] || b >= d[1] || c >= d[2];
              if (!beyond && mask.at(a, b, c) > 0.5) continue;
              const double x = (a - i) * voxel[0], y = (b - j) * voxel[1], z = (c - k) * voxel[2];
              best = std::min(best, x * x + y * y + z * z);
            }
        const double got = dist[static_cast<std::size_t>(mask.index(i, j, k))];
        ASSERT_NEAR(got, best, 1e-9 * best + 1e-12) << "voxel " << i << "," << j << "," << k;
        checked += mask.at(i, j, k) > 0.5 ? 1 : 0;
      }
  EXPECT_GT(checked, 200);
}

struct ErosionCase {
  Vec3 voxel;
  double radius;
};

class SmvErosion : public ::testing::TestWithParam<ErosionCase> {};

TEST_P(SmvErosion, DistanceTransformErosionEqualsSmvThresholdAndBruteForce) {
  const ErosionCase c = GetParam();
  const Volume mask = blob_mask({40, 36, 30}, c.voxel);
  const Volume edt = erode_by_ball(mask, c.radius);
  const std::int64_t kept = count_inside(edt);
  EXPECT_GT(kept, 100);                       // a real erosion: something is left ...
  EXPECT_LT(kept, count_inside(mask) - 100);  // ... and something is taken
  EXPECT_EQ(differing_voxels(edt, smv_threshold_erosion(mask, c.radius)), 0);
  EXPECT_EQ(differing_voxels(edt, brute_force_erosion(mask, c.radius)), 0);
}

// Radii on the sphere of lattice points (2 mm at 1 mm voxels: (2,0,0) counts as inside), off it,
// and anisotropic voxels.
INSTANTIATE_TEST_SUITE_P(Radii, SmvErosion,
                         ::testing::Values(ErosionCase{{1, 1, 1}, 1.0}, ErosionCase{{1, 1, 1}, 2.0},
                                           ErosionCase{{1, 1, 1}, 3.3}, ErosionCase{{1.0, 1.25, 0.9}, 2.5},
                                           ErosionCase{{0.8, 0.8, 2.0}, 3.0}));

// (δ − S)∗f from the kernel's spectrum equals f minus its mean over the ball, wherever the ball
// lies in the volume (there no wrap can reach), at both precisions.
template <class T>
void check_complement_convolution(double tol) {
  const Dims3 d{20, 18, 22};  // the grid rounds 22 up to 24
  const Vec3 voxel{1.0, 1.1, 0.9};
  const double r = 2.6;
  physics::Pcg32 rng(7);
  std::vector<double> f(static_cast<std::size_t>(d[0] * d[1] * d[2]));
  for (double& x : f) x = rng.uniform() - 0.5;
  physics::RealFft3<T> fft(smv_grid(d), 1);
  const AccountedArray<T> c = smv_complement(fft, voxel, r);
  load_volume(fft, d, [&](std::int64_t v) { return f[static_cast<std::size_t>(v)]; });
  apply_complement(fft, c.data());
  const auto offsets = ball_offsets(voxel, r);
  std::int64_t checked = 0;
  for (std::int64_t k = 3; k < d[2] - 3; ++k)
    for (std::int64_t j = 3; j < d[1] - 3; ++j)
      for (std::int64_t i = 3; i < d[0] - 3; ++i) {
        double mean = 0.0;
        for (const auto& o : offsets)
          mean += f[static_cast<std::size_t>(i + o[0] + d[0] * (j + o[1] + d[1] * (k + o[2])))];
        mean /= static_cast<double>(offsets.size());
        const double want = f[static_cast<std::size_t>(i + d[0] * (j + d[1] * k))] - mean;
        const Dims3& g = fft.dims();
        ASSERT_NEAR(static_cast<double>(fft.real()[i + g[0] * (j + g[1] * k)]), want, tol);
        ++checked;
      }
  EXPECT_GT(checked, 1000);
}

TEST(SmvKernel, ComplementConvolutionIsFieldMinusBallMean) {
  check_complement_convolution<double>(1e-12);
  check_complement_convolution<float>(2e-6);
}

TEST(SmvKernel, BallVoxelsCountsTheLatticePointsWithinTheRadius) {
  for (const auto& [voxel, r] : {std::pair{Vec3{1, 1, 1}, 1.0}, {Vec3{1, 1, 1}, 2.0}, {Vec3{1, 1.25, 0.9}, 3.7}})
    EXPECT_EQ(ball_voxels(voxel, r), static_cast<std::int64_t>(ball_offsets(voxel, r).size()));
  EXPECT_EQ(ball_voxels({1, 1, 1}, 1.0), 7);  // the centre and its six face neighbours
}

// The lengths themselves: physics' SmoothFftLength test.
TEST(SmvKernel, TheFftGridIsTheVolumeRoundedUpToEvenFastLengths) {
  EXPECT_EQ(smv_fft_grid({181, 217, 181}), (Dims3{192, 224, 192}));
  EXPECT_EQ(smv_fft_grid({128, 128, 128}), (Dims3{128, 128, 128}));
}

}  // namespace
}  // namespace qsmcore::bgremove
