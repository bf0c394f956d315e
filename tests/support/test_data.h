// Where the generated test data lives (set by tools/test.sh and .ci/run) and how the tests
// talk to the reference engine (ONNX Runtime through node). A test whose data is missing fails
// with the variable to set, unless QSM_ALLOW_MISSING_DATA=1 (then it is skipped, visibly).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/npy.h"
#include "qsmcore/tensor.h"

namespace qsmtest {

/// Folder named by an environment variable, or "" when unset/missing.
inline std::string data_dir(const char* var) {
  const char* v = std::getenv(var);
  if (v == nullptr || !std::filesystem::is_directory(v)) return "";
  return v;
}

inline bool allow_missing_data() {
  const char* v = std::getenv("QSM_ALLOW_MISSING_DATA");
  return v != nullptr && std::string(v) == "1";
}

#define QSM_REQUIRE_DATA(dir, var)                                                       \
  do {                                                                                   \
    if ((dir).empty()) {                                                                 \
      if (::qsmtest::allow_missing_data()) GTEST_SKIP() << var " is not set";            \
      FAIL() << var " must name the generated test data folder (see tools/test.sh)";     \
    }                                                                                    \
  } while (0)

/// Seeded standard-normal f32 tensor.
inline qsmcore::Tensor random_tensor(const qsmcore::Shape& s, unsigned seed) {
  qsmcore::Tensor t = qsmcore::Tensor::empty(qsmcore::DType::F32, s);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : t.span<float>()) v = nd(rng);
  return t;
}

/// Runs ONNX Runtime (tools/ort/run.js via node) on named .npy inputs; returns the output
/// folder. Fails the test on a non-zero exit.
inline std::string run_ort(const std::string& model, const std::vector<std::pair<std::string, std::string>>& inputs,
                           const std::string& out_dir, int threads = 2) {
  const char* runner = std::getenv("QSM_ORT_RUNNER");
  std::string cmd = std::string("node ") + (runner ? runner : QSM_SOURCE_DIR "/tools/ort/run.js") + " '" + model + "'";
  for (const auto& [name, file] : inputs) cmd += " --in '" + name + "=" + file + "'";
  cmd += " --out '" + out_dir + "' --threads " + std::to_string(threads) + " > '" + out_dir + ".log' 2>&1";
  std::filesystem::create_directories(out_dir);
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << "ONNX Runtime failed: " << cmd;
  return out_dir;
}

/// A running worst difference: max(worst, d), except that a difference that is not finite (a NaN
/// or an infinity in either operand, where the references of these tests are finite) makes it
/// NaN for good, which fails every EXPECT_LE / EXPECT_GT / EXPECT_NEAR it meets. std::max(w, NaN)
/// returns w, so a plain max accumulator lets a NaN anywhere but in the first place pass.
inline double worse(double worst, double d) {
  return std::isfinite(d) && !std::isnan(worst) ? std::max(worst, d) : std::numeric_limits<double>::quiet_NaN();
}

/// Every output equal to the reference bit for bit (a non-finite value included): runs that must
/// not change a single bit (spilled, in arena pieces) against the plain run.
inline void expect_bitwise(const std::vector<qsmcore::Tensor>& a, const std::vector<qsmcore::Tensor>& ref,
                           const std::string& what) {
  ASSERT_EQ(a.size(), ref.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), ref[i].shape()) << what;
    ASSERT_EQ(a[i].nbytes(), ref[i].nbytes()) << what;
    EXPECT_EQ(std::memcmp(a[i].raw(), ref[i].raw(), a[i].nbytes()), 0) << what << ": output " << i << " differs";
  }
}

/// max |a - b| / (max(b) - min(b)) over the elements, the range taken over b's finite values.
/// +inf when the shapes or dtypes differ. NaN (which fails every comparison) when a is not
/// finite where the reference b is, or when a non-finite b is not matched exactly (NaN by NaN,
/// an infinity by the same infinity).
inline double relative_max_error(const qsmcore::Tensor& a, const qsmcore::Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != qsmcore::DType::F32 || b.dtype() != qsmcore::DType::F32) return INFINITY;
  float lo = INFINITY, hi = -INFINITY;
  for (float v : b.span<float>()) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  double worst = 0.0;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (!std::isfinite(pb[i])) {
      const bool same = std::isnan(pb[i]) ? std::isnan(pa[i]) : pa[i] == pb[i];
      if (!same) return std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    worst = worse(worst, std::fabs(static_cast<double>(pa[i]) - pb[i]));
  }
  const double range = hi > lo ? hi - lo : 1.0;
  return worst / range;
}

/// Whether a graph thresholds computed values: NeXtQSM's VJP graph does 38 times (Greater ->
/// Where, the ReLU derivative of the forward pass).
inline bool is_threshold_graph(const std::string& file) {
  return file == "nextqsm-vjp.onnx";
}

/// The agreement of a threshold graph's output with a reference engine's. A conv output within
/// rounding of 0 flips its mask voxel between engines that sum in a different order (seen:
/// -1.3e-7 in ONNX Runtime, +2.1e-7 natively, values up to 7.7), and the following convolutions
/// spread the flip over a few % of the output (at the reduced twin's 1-voxel bottleneck one tie
/// can move half of it). Elementwise 1e-5 is ill-posed there; the criterion is that at least
/// `min_share` of the voxels match to 1e-5 × range and none is off by more than 5 % of the range
/// — a wrong kernel, geometry or layout moves every voxel, a rounding tie moves some. Engines
/// that round alike (oneDNN, ONNX Runtime, the reference backend: 1e-7 apart before the first
/// threshold) keep 90 %; the SIMD128 kernels round further from them (1e-6) and tie more often:
/// 41 % (either Winograd kernel) on one seeded input, 58 % and 100 % (F(4×4), F(2×2)) on another.
/// Returns the share that matched.
inline double expect_threshold_graph_match(const qsmcore::Tensor& got, const qsmcore::Tensor& want,
                                           const std::string& what, double min_share = 0.9) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  if (got.shape() != want.shape()) return 0.0;
  float lo = INFINITY, hi = -INFINITY;
  for (float v : want.span<float>()) lo = std::min(lo, v), hi = std::max(hi, v);
  std::int64_t close = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i)
    close += std::fabs(got.data<float>()[i] - want.data<float>()[i]) <= 1e-5f * (hi - lo) ? 1 : 0;
  const double frac = static_cast<double>(close) / static_cast<double>(want.numel());
  EXPECT_GE(frac, min_share) << what << ": too many voxels differ for rounding ties";
  EXPECT_LE(relative_max_error(got, want), 0.05) << what << ": a voxel differs by more than a tie can explain";
  return frac;
}

}  // namespace qsmtest
