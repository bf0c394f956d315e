// Metrics on analytic cases: identical images (NRMSE 0, HFEN 0, XSIM 1, CC 1), a scaled
// prediction (NRMSE 100·|α−1|, HFEN |α−1| by linearity, GXE = |α−1|·rms∇ref), constant images
// (XSIM = (2ab + C1)/(a² + b² + C1)), the ROI bounding box, scipy's filter building blocks
// (reflect indexing, kernel moments, the LoG of a wide Gaussian against its continuous form).
#include <gtest/gtest.h>

#include <cmath>

#include "onnx/test_util.h"
#include "physics/filters.h"
#include "qsmcore/error.h"
#include "qsmcore/metrics.h"

namespace qsmcore {
namespace {

Volume smooth(const Dims3& d) {
  Volume v = Volume::zeros(d, Geometry::isotropic(1.0));
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i)
        v.at(i, j, k) = 0.05 * std::sin(0.4 * i + 0.1) * std::cos(0.3 * j) + 0.02 * std::sin(0.5 * k) + 0.1;
  return v;
}

Volume constant(const Dims3& d, double c) {
  Volume v = Volume::zeros(d, Geometry::isotropic(1.0));
  for (double& x : v.values()) x = c;
  return v;
}

TEST(Metrics, IdenticalImagesArePerfect) {
  const Volume r = smooth({12, 10, 9});
  const QsmMetrics m = compute_metrics(r, r);
  EXPECT_EQ(m.rmse, 0.0);
  EXPECT_EQ(m.nrmse, 0.0);
  EXPECT_EQ(m.hfen, 0.0);
  EXPECT_EQ(m.gxe, 0.0);
  EXPECT_NEAR(m.xsim, 1.0, 1e-12);
  EXPECT_NEAR(m.cc, 1.0, 1e-12);
  EXPECT_EQ(m.roi_voxels, 12 * 10 * 9);
}

TEST(Metrics, ScaledPredictionFollowsLinearity) {
  const Volume r = smooth({12, 10, 9});
  for (double alpha : {0.5, 1.3, 2.0}) {
    Volume p = r.clone();
    for (double& x : p.values()) x *= alpha;
    const QsmMetrics m = compute_metrics(p, r);
    double norm2 = 0.0;
    for (double x : r.values()) norm2 += x * x;
    EXPECT_NEAR(m.nrmse, 100.0 * std::abs(alpha - 1.0), 1e-10);
    EXPECT_NEAR(m.rmse, std::abs(alpha - 1.0) * std::sqrt(norm2 / r.voxels()), 1e-14);
    EXPECT_NEAR(m.mad, std::abs(alpha - 1.0) * 0.1, 0.05);
    EXPECT_NEAR(m.hfen, std::abs(alpha - 1.0), 1e-12);
    EXPECT_NEAR(m.cc, 1.0, 1e-12);
    const QsmMetrics self = compute_metrics(Volume::zeros_like(r), r, &p);  // gxe of 0 vs ref = rms∇ref
    EXPECT_NEAR(m.gxe, std::abs(alpha - 1.0) * self.gxe, 1e-14);
  }
}

TEST(Metrics, XsimOfConstantImagesIsTheLuminanceTerm) {
  // No variance anywhere: SSIM reduces to (2ab + C1)/(a² + b² + C1) with C1 = (0.01·1)².
  const double C1 = 1e-4;
  for (const auto& [a, b] : {std::pair{0.05, 0.08}, std::pair{0.1, -0.02}, std::pair{0.3, 0.3}}) {
    const QsmMetrics m = compute_metrics(constant({6, 7, 8}, a), constant({6, 7, 8}, b));
    EXPECT_NEAR(m.xsim, (2 * a * b + C1) / (a * a + b * b + C1), 1e-12) << a << " " << b;
  }
}

TEST(Metrics, RoiCropsToItsBoundingBox) {
  const Volume r = smooth({16, 16, 16});
  Volume p = r.clone();
  Volume roi = Volume::zeros_like(r);
  for (std::int64_t k = 4; k < 9; ++k)
    for (std::int64_t j = 3; j < 12; ++j)
      for (std::int64_t i = 2; i < 7; ++i) roi.at(i, j, k) = 1.0;
  p.at(0, 0, 0) += 1.0;  // outside the box: no metric may see it
  const QsmMetrics m = compute_metrics(p, r, &roi);
  EXPECT_EQ(m.roi_voxels, 5 * 9 * 5);
  EXPECT_EQ(m.box_begin, (Dims3{2, 3, 4}));
  EXPECT_EQ(m.box_end, (Dims3{7, 12, 9}));
  EXPECT_EQ(m.nrmse, 0.0);
  EXPECT_EQ(m.hfen, 0.0);
  EXPECT_NEAR(m.xsim, 1.0, 1e-12);
}

TEST(Metrics, BadInputsAreNamed) {
  const Volume r = smooth({8, 8, 8});
  EXPECT_NE(qsmtest::error_of([&] { compute_metrics(r, smooth({8, 8, 9})); }, ErrorKind::InvalidInput).find("grid"),
            std::string::npos);
  const Volume z = Volume::zeros_like(r);
  EXPECT_NE(qsmtest::error_of([&] { compute_metrics(z, r); }, ErrorKind::InvalidInput).find("ROI is empty"),
            std::string::npos);
  EXPECT_NE(qsmtest::error_of([&] { compute_metrics(r, z); }, ErrorKind::InvalidInput).find("reference is zero"),
            std::string::npos);
}

TEST(Filters, ReflectIndexingIsScipys) {
  // scipy "reflect": d c b a | a b c d | d c b a
  const std::int64_t want[] = {2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0};
  for (std::int64_t p = -6; p < 8; ++p) EXPECT_EQ(physics::reflect_index(p, 4), want[p + 6]) << p;
}

TEST(Filters, GaussianKernelsHaveTheirMoments) {
  const auto g0 = physics::gaussian_kernel1d(1.5, 0);
  const auto g2 = physics::gaussian_kernel1d(1.5, 2);
  ASSERT_EQ(g0.size(), 13u);  // radius int(4·1.5 + 0.5) = 6
  double s0 = 0, m2 = 0, s2 = 0, mm2 = 0;
  for (int x = -6; x <= 6; ++x) {
    s0 += g0[x + 6];
    m2 += x * x * g0[x + 6];
    s2 += g2[x + 6];
    mm2 += 0.5 * x * x * g2[x + 6];
  }
  EXPECT_NEAR(s0, 1.0, 1e-15);
  EXPECT_NEAR(m2, 2.25, 1e-3);  // σ², up to truncation at 4σ
  EXPECT_NEAR(s2, 0.0, 1e-3);   // a second derivative kills constants…
  EXPECT_NEAR(mm2, 1.0, 5e-3);  // …and maps x²/2 to 1 (the truncated 4th moment costs 0.2 %)
}

TEST(Filters, LaplacianOfAWideGaussianMatchesTheContinuousOne) {
  // G_s * (Gaussian of std s0) is a Gaussian of std S = √(s0² + s²), amplitude (s0/S)³; its
  // Laplacian is A·(r²/S⁴ − 3/S²)·exp(−r²/2S²).
  const double s0 = 4.0, s = 1.5, S2 = s0 * s0 + s * s, A = std::pow(s0 * s0 / S2, 1.5);
  const Dims3 d{40, 40, 40};
  Volume v = Volume::zeros(d, Geometry::isotropic(1.0));
  const auto r2 = [](std::int64_t i, std::int64_t j, std::int64_t k) {
    return double((i - 20) * (i - 20) + (j - 20) * (j - 20) + (k - 20) * (k - 20));
  };
  for (std::int64_t k = 0; k < 40; ++k)
    for (std::int64_t j = 0; j < 40; ++j)
      for (std::int64_t i = 0; i < 40; ++i) v.at(i, j, k) = std::exp(-r2(i, j, k) / (2 * s0 * s0));
  const Volume l = physics::gaussian_laplace(v, s);
  const double peak = 3.0 / S2 * A;
  for (std::int64_t i = 10; i <= 30; i += 2) {
    const double want = A * (r2(i, 20, 20) / (S2 * S2) - 3.0 / S2) * std::exp(-r2(i, 20, 20) / (2 * S2));
    EXPECT_NEAR(l.at(i, 20, 20), want, 0.01 * peak) << i;
  }
}

// QSM-CI's demeaned NRMSE on cases whose value follows from its definition alone.
TEST(DemeanedNrmse, IsZeroForAnOffsetOneHundredForZeroAndCountsWhatWasLeftOut) {
  const Dims3 d{8, 6, 5};
  Volume ref = Volume::zeros(d, Geometry::isotropic(1.0)), mask = Volume::zeros_like(ref);
  for (std::int64_t i = 0; i < ref.voxels(); ++i) {
    ref.data()[i] = std::sin(0.37 * static_cast<double>(i)) + 0.2;
    mask.data()[i] = i % 7 == 0 ? 0.0 : 1.0;
  }
  Volume shifted = ref.clone(), zero = Volume::zeros_like(ref), doubled = ref.clone();
  for (double& x : shifted.values()) x += 3.5;  // a constant is not scored
  EXPECT_NEAR(demeaned_nrmse(shifted, ref, mask), 0.0, 1e-9);
  EXPECT_NEAR(demeaned_nrmse(zero, ref, mask), 100.0, 1e-9);  // nothing predicted: the whole reference is error
  // p = 2r: (p − p̄) − (r − r̄) = r − r̄, so the error is the reference's own norm.
  for (double& x : doubled.values()) x *= 2.0;
  EXPECT_NEAR(demeaned_nrmse(doubled, ref, mask), 100.0, 1e-9);
  // One voxel left at 0 (eroded) counts: the error is exactly that voxel's deviation, spread by
  // the mean's shift over the n voxels of the mask.
  Volume eroded = ref.clone();
  eroded.data()[1] = 0.0;
  double n = 0.0, mr = 0.0, norm = 0.0;
  for (std::int64_t i = 0; i < ref.voxels(); ++i)
    if (mask.data()[i] > 0.5) {
      mr += ref.data()[i];
      n += 1.0;
    }
  mr /= n;
  for (std::int64_t i = 0; i < ref.voxels(); ++i)
    if (mask.data()[i] > 0.5) norm += (ref.data()[i] - mr) * (ref.data()[i] - mr);
  const double dv = -ref.data()[1];  // the change at voxel 1
  const double want = 100.0 * std::sqrt((dv * dv * (1.0 - 1.0 / n)) / norm);
  EXPECT_NEAR(demeaned_nrmse(eroded, ref, mask), want, 1e-9);
  Volume bad = ref.clone();
  bad.data()[2] = std::nan("");
  EXPECT_THROW(demeaned_nrmse(bad, ref, mask), Error);
}

}  // namespace
}  // namespace qsmcore
