// The fit behind NetworkMemory: it recovers a line it was given, and its envelope never puts a
// measured point above the prediction (an under-prediction is a failure, memory.md M2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "qsmcore/error.h"
#include "qsmcore/measure.h"

namespace {

TEST(LinearFit, RecoversAnExactLine) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const std::int64_t fixed = static_cast<std::int64_t>(rng() % 500'000'000);
    const std::int64_t per = static_cast<std::int64_t>(rng() % 2000) + 1;
    std::vector<std::uint64_t> x;
    std::vector<std::int64_t> y;
    for (std::uint64_t v : {32768ull, 65536ull, 131072ull, 262144ull}) {
      x.push_back(v);
      y.push_back(fixed + per * static_cast<std::int64_t>(v));
    }
    const qsmcore::LinearFit f = qsmcore::fit_fixed_plus_per_voxel(x, y);
    EXPECT_NEAR(f.slope, static_cast<double>(per), 1e-6);
    EXPECT_NEAR(f.intercept, static_cast<double>(fixed), 1e-2 * static_cast<double>(per) + 1.0);
    EXPECT_LT(f.max_abs_residual, 1.0);
    EXPECT_EQ(f.bytes_per_voxel, static_cast<std::uint64_t>(per));
    EXPECT_EQ(f.fixed_bytes, static_cast<std::uint64_t>(fixed));
  }
}

TEST(LinearFit, EnvelopeCoversEveryNoisyPoint) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0.0, 3e6);
  std::vector<std::uint64_t> x;
  std::vector<std::int64_t> y;
  for (int i = 1; i <= 6; ++i) {
    const std::uint64_t v = static_cast<std::uint64_t>(i) * 40000;
    x.push_back(v);
    y.push_back(static_cast<std::int64_t>(1e8 + 700.4 * static_cast<double>(v) + noise(rng)));
  }
  const qsmcore::LinearFit f = qsmcore::fit_fixed_plus_per_voxel(x, y);
  EXPECT_GT(f.max_abs_residual, 0.0);
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_GE(static_cast<std::int64_t>(f.fixed_bytes + f.bytes_per_voxel * x[i]), y[i]) << "point " << i;
  EXPECT_GE(static_cast<double>(f.bytes_per_voxel), f.slope);
}

// Offsets ±a about y = F + 200·x that leave the least-squares line where it was (they sum to 0
// and are orthogonal to x): the wasm32 bound is the envelope (F + a), raised by the scatter (a,
// or 0.5 % of the largest point where a is less; page-rounded) and one page.
TEST(LinearFit, WasmBoundIsTheEnvelopePlusTheScatterAndAPage) {
  constexpr std::int64_t kF = 20'000'000, kPage = 65536;
  // 3 MB: above the 0.5 % (362 KB here) and above the 1 MiB that once capped the allowance.
  for (const std::int64_t a : {std::int64_t{300'000}, std::int64_t{3'000'000}}) {
    SCOPED_TRACE(a);
    std::vector<std::uint64_t> x;
    std::vector<std::int64_t> y;
    const std::int64_t d[] = {a, -a, -a, a};
    for (int i = 0; i < 4; ++i) {
      x.push_back(static_cast<std::uint64_t>(i + 1) * 65536);
      y.push_back(kF + 200 * static_cast<std::int64_t>(x.back()) + d[i]);
    }
    const qsmcore::LinearFit f = qsmcore::fit_wasm_heap_growth(x, y);
    ASSERT_EQ(f.bytes_per_voxel, 200u);
    EXPECT_NEAR(f.max_abs_residual, static_cast<double>(a), 1.0);
    const auto least = static_cast<std::int64_t>(std::ceil(0.005 * static_cast<double>(y.back())));
    const std::int64_t allowance = std::max(a, least);
    const std::int64_t scatter = (allowance + kPage - 1) / kPage * kPage;
    EXPECT_EQ(static_cast<std::int64_t>(f.fixed_bytes), kF + a + scatter + kPage);
  }
}

TEST(LinearFit, RefusesFewerThanTwoDistinctVoxelCounts) {
  EXPECT_THROW(qsmcore::fit_fixed_plus_per_voxel({4096, 4096, 4096}, {1, 2, 3}), qsmcore::Error);
  EXPECT_THROW(qsmcore::fit_fixed_plus_per_voxel({1, 2}, {1}), qsmcore::Error);
}

}  // namespace
