// A small U-Net-like ONNX graph for plan-level kernel tests (tests/kernels: bf16_conv_test.cpp,
// winograd_plan_test.cpp): two levels, max-pool, ConvTranspose up-sampling, skip concat, a
// residual add; and the error measure those tests compare a backend with the reference backend by.
#pragma once
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "onnx/onnx_writer.h"
#include "qsmcore/tensor.h"

namespace qsmtest {

inline std::vector<float> uniform_values(std::int64_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

/// Two levels of a U-Net on [1, 1, d, h, w] (h, w even): conv 1→16, conv 16→16, max-pool,
/// conv 16→32, conv 32→32, ConvTranspose 32→16, concat with the skip, conv 32→16, conv 16→16,
/// + the first conv's output (a residual), conv 16→1. ReLU after each conv but the last;
/// weights uniform in ±1.5/√fan-in (activations keep their scale through the layers).
inline onnxw::GraphParts unet_like_graph(const qsmcore::Shape& x, unsigned seed) {
  using namespace onnxw;
  GraphParts p;
  p.inputs.push_back(value_info("x", 1, x));
  p.outputs.push_back(value_info("y", 1, {}));
  auto weight = [&](const std::string& name, const qsmcore::Shape& s) {
    const float scale = 1.5f / std::sqrt(static_cast<float>(qsmcore::numel(s) / s[0]));
    p.initializers.push_back(float_tensor(name, s, uniform_values(qsmcore::numel(s), seed++, -scale, scale)));
  };
  auto conv = [&](const std::string& in, const std::string& out, std::int64_t c, std::int64_t m, bool relu) {
    weight(out + "_w", {m, c, 3, 3, 3});
    weight(out + "_b", {m});
    const std::string raw = relu ? out + "_pre" : out;
    p.nodes.push_back(
        node("Conv", {in, out + "_w", out + "_b"}, {raw}, out + "_conv", {attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
    if (relu) p.nodes.push_back(node("Relu", {raw}, {out}, out + "_relu"));
  };
  conv("x", "c1", 1, 16, true);
  conv("c1", "c2", 16, 16, true);
  p.nodes.push_back(
      node("MaxPool", {"c2"}, {"p"}, "pool", {attr_ints("kernel_shape", {2, 2, 2}), attr_ints("strides", {2, 2, 2})}));
  conv("p", "c3", 16, 32, true);
  conv("c3", "c4", 32, 32, true);
  weight("up_w", {32, 16, 2, 2, 2});
  weight("up_b", {16});
  p.nodes.push_back(node("ConvTranspose", {"c4", "up_w", "up_b"}, {"u"}, "up",
                         {attr_ints("kernel_shape", {2, 2, 2}), attr_ints("strides", {2, 2, 2})}));
  p.nodes.push_back(node("Concat", {"u", "c2"}, {"cat"}, "cat", {attr_int("axis", 1)}));
  conv("cat", "c5", 32, 16, true);
  conv("c5", "c6", 16, 16, true);
  p.nodes.push_back(node("Add", {"c6", "c1"}, {"r"}, "res"));
  conv("r", "y", 16, 1, false);
  return p;
}

/// Max |got − want| over want's range (max − min); +inf where either holds a NaN or Inf, so a
/// bound on it fails on them.
inline double error_over_range(const qsmcore::Tensor& got, const qsmcore::Tensor& want) {
  const float* a = want.data<float>();
  const float* b = got.data<float>();
  double lo = a[0], hi = a[0], err = 0.0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    lo = std::min<double>(lo, a[i]);
    hi = std::max<double>(hi, a[i]);
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return err / std::max(hi - lo, 1e-30);
}

}  // namespace qsmtest
