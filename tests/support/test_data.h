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

}  // namespace qsmtest
