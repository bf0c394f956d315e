// oneDNN kernels for pooling, concat, normalisation, ConvTranspose, softmax and matmul against
// the reference backend: small in-memory ONNX models, seeded random inputs, outputs compared
// within 1e-5 of their range; each case also checks that the oneDNN kernel really ran (a
// silent fallback to the reference would make the comparison vacuous).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "onnx/onnx_writer.h"
#include "qsmcore/onnx_model.h"
#include "runtime/plan.h"

using namespace qsmtest::onnxw;
using qsmcore::Backend;
using qsmcore::DType;
using qsmcore::OnnxModel;
using qsmcore::Shape;
using qsmcore::Tensor;

namespace {

std::vector<float> random_values(std::int64_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

/// A model under construction: inputs get random data of a fixed shape.
struct Net {
  GraphParts p;
  std::vector<Shape> in_shapes;
  unsigned seed = 1;
  std::int64_t opset = 17;

  void input(const std::string& name, const Shape& s) {
    p.inputs.push_back(value_info(name, 1, s));
    in_shapes.push_back(s);
  }
  void output(const std::string& name) { p.outputs.push_back(value_info(name, 1, {})); }
  void weight(const std::string& name, const Shape& s, float lo = -0.5f, float hi = 0.5f) {
    p.initializers.push_back(float_tensor(name, s, random_values(qsmcore::numel(s), seed++, lo, hi)));
  }
  void add(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
           const std::vector<Proto>& attrs = {}) {
    p.nodes.push_back(node(op, in, out, out[0] + "_" + op, attrs));
  }
  /// Conv with k^d kernel, pads (k-1)/2, bias.
  void conv(const std::string& x, const std::string& y, std::int64_t c, std::int64_t m, int dims = 3, std::int64_t k = 3) {
    Shape w{m, c};
    for (int i = 0; i < dims; ++i) w.push_back(k);
    weight(y + "_w", w);
    weight(y + "_b", {m});
    add("Conv", {x, y + "_w", y + "_b"}, {y}, {attr_ints("pads", std::vector<std::int64_t>(2 * dims, (k - 1) / 2))});
  }
};

OnnxModel load(const Net& n, Backend b) {
  qsmcore::ModelOptions o;
  o.backend = b;
  o.threads = 2;
  const Proto m = model(graph(n.p), n.opset);
  return OnnxModel::load(m.bytes, o, "test.onnx");
}

/// Runs the net on both backends and compares; returns the oneDNN plan's impl names by op type.
std::vector<std::pair<std::string, std::string>> compare(const Net& net, double rel_tol = 1e-5) {
  std::vector<Tensor> inputs;
  unsigned s = 1000;
  for (const auto& shape : net.in_shapes) inputs.push_back(Tensor::from_vector(shape, random_values(qsmcore::numel(shape), s++)));
  OnnxModel ref = load(net, Backend::Reference);
  OnnxModel dnn = load(net, Backend::OneDnn);
  const auto want = ref.run(inputs);
  const auto got = dnn.run(inputs);
  EXPECT_EQ(want.size(), got.size());
  for (std::size_t o = 0; o < want.size() && o < got.size(); ++o) {
    EXPECT_EQ(want[o].shape(), got[o].shape());
    if (want[o].shape() != got[o].shape()) continue;
    const float* a = want[o].data<float>();
    const float* b = got[o].data<float>();
    const auto [lo, hi] = std::minmax_element(a, a + want[o].numel());
    const double tol = std::max(rel_tol * (*hi - *lo), 1e-7);
    std::int64_t bad = 0, first = -1;
    for (std::int64_t i = 0; i < want[o].numel(); ++i)
      if (!(std::abs(double(a[i]) - double(b[i])) <= tol)) bad++, first = first < 0 ? i : first;
    EXPECT_EQ(bad, 0) << "output " << o << ": first mismatch at " << first << ": ref " << a[first] << " onednn " << b[first];
  }
  std::vector<std::pair<std::string, std::string>> impls;
  for (const auto& st : dnn.plan_for(net.in_shapes).steps()) {
    // Reorders are recorded under their step name ("reorder:<value>") to tell edges from interior.
    impls.emplace_back(st.op_type == "Reorder" ? st.name : st.op_type, st.kernel->impl_name());
    if (std::getenv("QSM_TEST_DUMP_PLAN")) std::printf("  %-20s %-28s %s\n", st.op_type.c_str(), st.name.c_str(), st.kernel->impl_name().c_str());
  }
  return impls;
}

/// Expects every step of this op type to run on a non-reference kernel.
void expect_onednn(const std::vector<std::pair<std::string, std::string>>& impls, const std::string& op) {
  int seen = 0;
  for (const auto& [type, impl] : impls) {
    if (type != op) continue;
    ++seen;
    EXPECT_NE(impl, "ref") << op << " fell back to the reference kernel";
  }
  EXPECT_GT(seen, 0) << "no " << op << " step in the plan";
}

void expect_ref(const std::vector<std::pair<std::string, std::string>>& impls, const std::string& op) {
  for (const auto& [type, impl] : impls) {
    if (type == op) {
      EXPECT_EQ(impl, "ref") << op << " should have been declined";
    }
  }
}

int count_op(const std::vector<std::pair<std::string, std::string>>& impls, const std::string& op) {
  return static_cast<int>(std::count_if(impls.begin(), impls.end(), [&](const auto& p) { return p.first == op; }));
}

/// Reorders of anything but the graph input x and output y (the hot chain must not have any).
int interior_reorders(const std::vector<std::pair<std::string, std::string>>& impls) {
  return static_cast<int>(std::count_if(impls.begin(), impls.end(), [](const auto& p) {
    return p.first.rfind("reorder:", 0) == 0 && p.first != "reorder:x" && p.first != "reorder:y";
  }));
}

// ---- pooling ---------------------------------------------------------------------------------

Net pool_net(const std::string& op, const Shape& x, const std::vector<Proto>& attrs, bool after_conv = true) {
  Net n;
  n.input("x", x);
  if (after_conv) {
    // A conv in front makes the pool read oneDNN's blocked layout.
    n.conv("x", "c", x[1], 12, static_cast<int>(x.size()) - 2);
    n.add(op, {"c"}, {"y"}, attrs);
  } else {
    n.add(op, {"x"}, {"y"}, attrs);
  }
  n.output("y");
  return n;
}

TEST(OneDnnPool, MaxPool2Blocked3d) {
  expect_onednn(compare(pool_net("MaxPool", {1, 3, 8, 10, 6}, {attr_ints("kernel_shape", {2, 2, 2}), attr_ints("strides", {2, 2, 2})})), "MaxPool");
}

TEST(OneDnnPool, MaxPoolPadsCeilMode) {
  expect_onednn(compare(pool_net("MaxPool", {2, 5, 7, 9, 6},
                                 {attr_ints("kernel_shape", {3, 3, 2}), attr_ints("strides", {2, 2, 2}),
                                  attr_ints("pads", {1, 1, 0, 1, 0, 0}), attr_int("ceil_mode", 1)})),
                "MaxPool");
}

TEST(OneDnnPool, MaxPoolDilated2dPlain) {
  expect_onednn(compare(pool_net("MaxPool", {1, 3, 11, 12},
                                 {attr_ints("kernel_shape", {3, 2}), attr_ints("dilations", {2, 3}), attr_ints("pads", {1, 0, 2, 1})},
                                 false)),
                "MaxPool");
}

TEST(OneDnnPool, MaxPoolWithIndicesDeclines) {
  Net n;
  n.input("x", {1, 2, 6, 6});
  n.add("MaxPool", {"x"}, {"y", "i"}, {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2})});
  n.output("y");
  expect_ref(compare(n), "MaxPool");
}

TEST(OneDnnPool, AveragePoolExcludePad) {
  expect_onednn(compare(pool_net("AveragePool", {1, 4, 7, 8, 9},
                                 {attr_ints("kernel_shape", {3, 3, 3}), attr_ints("pads", {1, 1, 1, 1, 1, 1})})),
                "AveragePool");
}

TEST(OneDnnPool, AveragePoolIncludePad) {
  expect_onednn(compare(pool_net("AveragePool", {1, 4, 7, 8, 9},
                                 {attr_ints("kernel_shape", {3, 3, 3}), attr_ints("strides", {2, 2, 2}),
                                  attr_ints("pads", {1, 1, 1, 1, 1, 1}), attr_int("count_include_pad", 1)})),
                "AveragePool");
}

TEST(OneDnnPool, AveragePoolCeilModeExcludePad) {
  expect_onednn(compare(pool_net("AveragePool", {1, 3, 8, 7},
                                 {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_int("ceil_mode", 1)})),
                "AveragePool");
}

TEST(OneDnnPool, AveragePoolCeilModeIncludePadStillCorrect) {
  // The ceil overflow is not counted by ONNX but would be by oneDNN: declined, still correct.
  const auto impls = compare(pool_net("AveragePool", {1, 3, 8, 7},
                                      {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_int("ceil_mode", 1),
                                       attr_ints("pads", {1, 1, 1, 1}), attr_int("count_include_pad", 1)}));
  expect_ref(impls, "AveragePool");
}

TEST(OneDnnPool, AveragePoolDilated) {
  expect_onednn(compare(pool_net("AveragePool", {1, 2, 9, 10},
                                 {attr_ints("kernel_shape", {2, 3}), attr_ints("dilations", {2, 2}), attr_ints("pads", {1, 1, 1, 1})},
                                 false)),
                "AveragePool");
}

TEST(OneDnnPool, GlobalPools) {
  expect_onednn(compare(pool_net("GlobalAveragePool", {2, 3, 6, 7, 5}, {})), "GlobalAveragePool");
  expect_onednn(compare(pool_net("GlobalMaxPool", {2, 3, 6, 7, 5}, {})), "GlobalMaxPool");
  expect_onednn(compare(pool_net("GlobalAveragePool", {1, 5, 9, 4}, {}, false)), "GlobalAveragePool");
}

// ---- concat ----------------------------------------------------------------------------------

TEST(OneDnnConcat, BlockedChannelsNotMultipleOf8) {
  // 12 + 5 + plain 3 channels: blocked sources with padded last blocks.
  Net n;
  n.input("x", {1, 3, 6, 5, 7});
  n.conv("x", "a", 3, 12);
  n.conv("x", "b", 3, 5);
  n.add("Concat", {"a", "b", "x"}, {"c"}, {attr_int("axis", 1)});
  // A Relu between keeps the Concat (a Concat read only by a Conv is split into convs).
  n.add("Relu", {"c"}, {"cr"});
  n.conv("cr", "y", 20, 6);
  n.output("y");
  expect_onednn(compare(n), "Concat");
}

TEST(OneDnnConcat, BlockedOutputAndSpatialAxis) {
  Net n;
  n.input("x", {1, 4, 6, 5, 7});
  n.conv("x", "a", 4, 8);
  n.conv("x", "b", 4, 8);
  n.add("Concat", {"a", "b"}, {"c"}, {attr_int("axis", 1)});
  n.add("Concat", {"a", "b"}, {"d"}, {attr_int("axis", -2)});
  n.output("c");
  n.output("d");
  expect_onednn(compare(n), "Concat");
}

TEST(OneDnnConcat, PlainWithConstant) {
  Net n;
  n.input("x", {2, 3, 4});
  n.weight("k", {2, 2, 4});
  n.add("Concat", {"x", "k"}, {"y"}, {attr_int("axis", 1)});
  n.output("y");
  expect_onednn(compare(n), "Concat");
}

// ---- normalisation ---------------------------------------------------------------------------

void bn_weights(Net& n, const std::string& p, std::int64_t c) {
  n.weight(p + "_s", {c}, 0.5f, 1.5f);
  n.weight(p + "_b", {c});
  n.weight(p + "_m", {c});
  n.weight(p + "_v", {c}, 0.2f, 2.0f);
}

TEST(OneDnnNorm, BatchNormAfterPoolBlocked) {
  // BN after a pool is not folded into a conv.
  Net n;
  n.input("x", {1, 3, 8, 8, 6});
  n.conv("x", "c", 3, 11);
  n.add("MaxPool", {"c"}, {"p"}, {attr_ints("kernel_shape", {2, 2, 2}), attr_ints("strides", {2, 2, 2})});
  bn_weights(n, "bn", 11);
  n.add("BatchNormalization", {"p", "bn_s", "bn_b", "bn_m", "bn_v"}, {"y"}, {attr_float("epsilon", 1e-3f)});
  n.output("y");
  expect_onednn(compare(n), "BatchNormalization");
}

TEST(OneDnnNorm, BatchNormPlain) {
  Net n;
  n.input("x", {2, 5, 7, 3});
  bn_weights(n, "bn", 5);
  n.add("BatchNormalization", {"x", "bn_s", "bn_b", "bn_m", "bn_v"}, {"y"});
  n.output("y");
  expect_onednn(compare(n), "BatchNormalization");
}

TEST(OneDnnNorm, InstanceNormPlain) {
  Net n;
  n.input("x", {2, 3, 5, 7, 9});
  n.weight("s", {3}, 0.5f, 1.5f);
  n.weight("b", {3});
  n.add("InstanceNormalization", {"x", "s", "b"}, {"y"});
  n.output("y");
  expect_onednn(compare(n), "InstanceNormalization");
}

TEST(OneDnnNorm, InstanceNormBlockedPaddedChannels) {
  Net n;
  n.input("x", {2, 3, 5, 6, 7});
  n.conv("x", "c", 3, 12);
  n.weight("s", {12}, 0.5f, 1.5f);
  n.weight("b", {12});
  n.add("InstanceNormalization", {"c", "s", "b"}, {"i"}, {attr_float("epsilon", 1e-4f)});
  n.add("Relu", {"i"}, {"r"});
  n.conv("r", "y", 12, 4);
  n.output("y");
  const auto impls = compare(n);
  expect_onednn(impls, "InstanceNormalization");
  EXPECT_EQ(interior_reorders(impls), 0);
}

// ---- ConvTranspose ---------------------------------------------------------------------------

Net deconv_net(const Shape& x, std::int64_t m, const std::vector<std::int64_t>& k, const std::vector<Proto>& attrs,
               const std::string& act = "", std::int64_t group = 1, bool bias = true, bool conv_first = true) {
  Net n;
  n.input("x", x);
  std::string src = "x";
  std::int64_t c = x[1];
  if (conv_first) {
    n.conv("x", "c", x[1], 16, static_cast<int>(x.size()) - 2);
    src = "c";
    c = 16;
  }
  Shape w{c, m / group};
  w.insert(w.end(), k.begin(), k.end());
  n.weight("w", w);
  std::vector<std::string> in{src, "w"};
  if (bias) {
    n.weight("b", {m});
    in.push_back("b");
  }
  auto a = attrs;
  if (group > 1) a.push_back(attr_int("group", group));
  n.add("ConvTranspose", in, {act.empty() ? "y" : "d"}, a);
  if (!act.empty()) n.add(act, {"d"}, {"y"});
  n.output("y");
  return n;
}

TEST(OneDnnDeconv, K2S2FastPath3dRelu) {
  const auto impls = compare(deconv_net({1, 3, 5, 6, 7}, 8, {2, 2, 2}, {attr_ints("strides", {2, 2, 2})}, "Relu"));
  expect_onednn(impls, "ConvTranspose");
  for (const auto& [op, impl] : impls) {
    if (op == "ConvTranspose") {
      EXPECT_NE(impl.find("deconv_k=s"), std::string::npos) << impl;
    }
  }
  EXPECT_EQ(count_op(impls, "Relu"), 0);  // fused
}

TEST(OneDnnDeconv, K2S2ChannelsNotMultipleOf8Sigmoid) {
  // Sigmoid(0) = 0.5 in the padding lanes must not leak into the output.
  expect_onednn(compare(deconv_net({2, 3, 3, 4, 5}, 5, {2, 2, 2}, {attr_ints("strides", {2, 2, 2})}, "Sigmoid")), "ConvTranspose");
  expect_onednn(compare(deconv_net({1, 6, 3, 4, 5}, 13, {2, 2, 2}, {attr_ints("strides", {2, 2, 2})}, "", 1, false, false)),
                "ConvTranspose");
}

TEST(OneDnnDeconv, K2S2TwoAndOneDim) {
  expect_onednn(compare(deconv_net({1, 4, 6, 7}, 12, {2, 2}, {attr_ints("strides", {2, 2})})), "ConvTranspose");
  expect_onednn(compare(deconv_net({2, 4, 9}, 3, {2}, {attr_ints("strides", {2})}, "Tanh")), "ConvTranspose");
}

TEST(OneDnnDeconv, GeneralStridesPadsOutputPadding) {
  expect_onednn(compare(deconv_net({1, 3, 4, 5, 3}, 6, {3, 3, 3},
                                   {attr_ints("strides", {2, 2, 2}), attr_ints("pads", {1, 1, 1, 1, 1, 1}),
                                    attr_ints("output_padding", {1, 0, 1})},
                                   "LeakyRelu")),
                "ConvTranspose");
}

TEST(OneDnnDeconv, GroupsAndDilation) {
  expect_onednn(compare(deconv_net({1, 4, 5, 6}, 6, {3, 2}, {attr_ints("dilations", {2, 1}), attr_ints("strides", {1, 2})}, "", 2)),
                "ConvTranspose");
}

TEST(OneDnnDeconv, SumPostOpThenRelu) {
  // ConvTranspose + Add(skip) + Relu: Sum and activation fused, addend in dst's layout.
  for (bool k2 : {true, false}) {
    Net n;
    n.input("x", {1, 4, 4, 5, 3});
    n.input("s", {1, 8, 8, 10, 6});
    n.conv("s", "skip", 8, 8);
    n.conv("x", "c", 4, 16);
    const std::int64_t k = k2 ? 2 : 4;
    n.weight("w", {16, 8, k, k, k});
    n.weight("b", {8});
    std::vector<Proto> a{attr_ints("strides", {2, 2, 2})};
    if (!k2) a.push_back(attr_ints("pads", {1, 1, 1, 1, 1, 1}));
    n.add("ConvTranspose", {"c", "w", "b"}, {"d"}, a);
    n.add("Add", {"d", "skip"}, {"e"});
    n.add("Relu", {"e"}, {"y"});
    n.output("y");
    const auto impls = compare(n);
    expect_onednn(impls, "ConvTranspose");
    EXPECT_EQ(count_op(impls, "Add"), 0);
  }
}

TEST(OneDnnDeconv, KernelEqualsStrideBeyondTwo) {
  // xQSM's octave upsampling is 4x4x4 / 4; an anisotropic k = s is the same sub-lattice case.
  for (const auto& [k, act] : std::vector<std::pair<std::vector<std::int64_t>, std::string>>{
           {{4, 4, 4}, "Relu"}, {{2, 1, 3}, "Sigmoid"}, {{3, 2}, ""}}) {
    const Shape x = k.size() == 3 ? Shape{1, 3, 3, 4, 5} : Shape{2, 5, 4, 3};
    const auto impls = compare(deconv_net(x, 5, k, {attr_ints("strides", k)}, act));
    expect_onednn(impls, "ConvTranspose");
    for (const auto& [op, impl] : impls)
      if (op == "ConvTranspose") {
        EXPECT_NE(impl.find("deconv_k=s"), std::string::npos) << impl;
      }
  }
}

TEST(OneDnnDeconv, KernelEqualsStrideAccumulatesOntoItsSumAddend) {
  // Conv(x) + ConvT(low) -> Relu: the Add and the Relu become post-ops of the sub-lattice
  // deconvolution, which gathers the addend into each sub-lattice before accumulating.
  for (std::int64_t m : {16, 13}) {  // 13: padding lanes of the channel block
    Net n;
    n.input("x", {1, 3, 8, 6, 4});
    n.input("low", {1, 5, 4, 3, 2});
    n.conv("x", "c", 3, m);
    n.weight("w", {5, m, 2, 2, 2});
    n.weight("b", {m});
    n.add("ConvTranspose", {"low", "w", "b"}, {"d"}, {attr_ints("strides", {2, 2, 2})});
    n.add("Add", {"c", "d"}, {"e"});
    n.add("Relu", {"e"}, {"y"});
    n.output("y");
    const auto impls = compare(n);
    expect_onednn(impls, "ConvTranspose");
    EXPECT_EQ(count_op(impls, "Add"), 0);
    EXPECT_EQ(count_op(impls, "Relu"), 0);
    for (const auto& [op, impl] : impls)
      if (op == "ConvTranspose") {
        EXPECT_NE(impl.find("deconv_k=s"), std::string::npos) << impl;
      }
  }
}

// ---- graph rewrites against an independent formulation ---------------------------------------

/// Runs `a` and `b` (same inputs) on oneDNN and expects equal outputs within 1e-5 of the range.
void expect_same_function(const Net& a, const Net& b, bool split_b = true) {
  std::vector<Tensor> inputs;
  unsigned s = 2000;
  for (const auto& shape : a.in_shapes) inputs.push_back(Tensor::from_vector(shape, random_values(qsmcore::numel(shape), s++)));
  qsmcore::ModelOptions o;
  o.threads = 2;
  o.split_concat_convs = split_b;
  OnnxModel ma = load(a, Backend::OneDnn);
  OnnxModel mb = OnnxModel::load(model(graph(b.p), b.opset).bytes, o, "b.onnx");
  const Tensor want = mb.run(inputs)[0], got = ma.run(inputs)[0];
  ASSERT_EQ(want.shape(), got.shape());
  const float* x = want.data<float>();
  const auto [lo, hi] = std::minmax_element(x, x + want.numel());
  for (std::int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.data<float>()[i], x[i], 1e-5 * (*hi - *lo)) << "voxel " << i;
}

// BatchNormalization as the analytic per-channel affine map x·s + t, written with Mul/Add of
// [1, C, 1, 1, 1] constants (no rewrite matches those): the oracle for the BN folds. Adds the
// BN parameters y_g/_b/_m/_v and the affine y_s/_t.
void bn_as_affine(Net& n, const std::string& y, std::int64_t c, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> g(0.5f, 1.5f), b(-0.5f, 0.5f), mu(-0.3f, 0.3f), var(0.2f, 2.0f);
  std::vector<float> gamma(c), beta(c), mean(c), v(c), s(c), t(c);
  for (std::int64_t i = 0; i < c; ++i) {
    gamma[i] = g(rng), beta[i] = b(rng), mean[i] = mu(rng), v[i] = var(rng);
    s[i] = static_cast<float>(gamma[i] / std::sqrt(double(v[i]) + 1e-5));
    t[i] = static_cast<float>(beta[i] - mean[i] * double(s[i]));
  }
  n.p.initializers.push_back(float_tensor(y + "_g", {c}, gamma));
  n.p.initializers.push_back(float_tensor(y + "_b", {c}, beta));
  n.p.initializers.push_back(float_tensor(y + "_m", {c}, mean));
  n.p.initializers.push_back(float_tensor(y + "_v", {c}, v));
  n.p.initializers.push_back(float_tensor(y + "_s", {1, c, 1, 1, 1}, s));
  n.p.initializers.push_back(float_tensor(y + "_t", {1, c, 1, 1, 1}, t));
}

TEST(GraphRewrites, BatchNormFoldsIntoConvTransposeAndThroughAnAdd) {
  // xQSM's octave blocks: relu(conv(h) + BN(convT(l))) and relu(BN(convT(h') + conv(l'))).
  auto build = [](bool as_bn) {
    Net n;
    n.input("h", {1, 4, 8, 6, 4});
    n.input("l", {1, 6, 4, 3, 2});
    n.conv("h", "c", 4, 8);
    n.weight("w", {6, 8, 2, 2, 2});
    n.weight("wb", {8});
    n.add("ConvTranspose", {"l", "w", "wb"}, {"d"}, {attr_ints("strides", {2, 2, 2})});
    bn_as_affine(n, "bn1", 8, 7);
    bn_as_affine(n, "bn2", 8, 8);
    if (as_bn) {
      n.add("BatchNormalization", {"d", "bn1_g", "bn1_b", "bn1_m", "bn1_v"}, {"dn"});
    } else {
      n.add("Mul", {"d", "bn1_s"}, {"ds"});
      n.add("Add", {"ds", "bn1_t"}, {"dn"});
    }
    n.add("Add", {"c", "dn"}, {"e"});
    n.add("Relu", {"e"}, {"r"});
    // Second block: BN after the Add of a conv and a deconv.
    n.conv("r", "c2", 8, 8);
    n.weight("w2", {6, 8, 2, 2, 2});
    n.add("ConvTranspose", {"l", "w2"}, {"d2"}, {attr_ints("strides", {2, 2, 2})});
    n.add("Add", {"d2", "c2"}, {"sum"});
    if (as_bn) {
      n.add("BatchNormalization", {"sum", "bn2_g", "bn2_b", "bn2_m", "bn2_v"}, {"sn"});
    } else {
      n.add("Mul", {"sum", "bn2_s"}, {"ss"});
      n.add("Add", {"ss", "bn2_t"}, {"sn"});
    }
    n.add("Relu", {"sn"}, {"y"});
    n.output("y");
    return n;
  };
  const Net folded = build(true), oracle = build(false);
  expect_same_function(folded, oracle);
  OnnxModel m = load(folded, Backend::OneDnn);
  for (const auto& st : m.plan_for(folded.in_shapes).steps()) {
    EXPECT_NE(st.op_type, "BatchNormalization") << "a BN was not folded";
    EXPECT_NE(st.op_type, "Add") << "an Add was not fused as a Sum post-op";
    EXPECT_NE(st.op_type, "Relu");
  }
}

TEST(GraphRewrites, PoolingMovesAheadOfAConcatSoItsConvsSplit) {
  // The octave block reads cat(a, b) with a conv and, average-pooled, with another conv: the
  // pool is applied per part and both convs split, so no Concat is built. Oracle: the same
  // file with concat splitting (and the hoist with it) off.
  Net n;
  n.input("x", {1, 3, 8, 6, 4});
  n.conv("x", "a", 3, 8);
  n.conv("x", "b", 3, 5);
  n.add("Concat", {"a", "b"}, {"cat"}, {attr_int("axis", 1)});
  n.conv("cat", "hh", 13, 6);
  n.add("AveragePool", {"cat"}, {"p"}, {attr_ints("kernel_shape", {2, 2, 2}), attr_ints("strides", {2, 2, 2})});
  n.conv("p", "hl", 13, 4);
  n.weight("up", {4, 6, 2, 2, 2});
  n.add("ConvTranspose", {"hl", "up"}, {"u"}, {attr_ints("strides", {2, 2, 2})});
  n.add("Add", {"hh", "u"}, {"y"});
  n.output("y");
  expect_same_function(n, n, /*split_b=*/false);
  for (Backend be : {Backend::OneDnn, Backend::Reference}) {
    OnnxModel m = load(n, be);
    for (const auto& st : m.plan_for(n.in_shapes).steps()) EXPECT_NE(st.op_type, "Concat");
  }
}

TEST(GraphRewrites, ExecutionOrderRunsTheBranchThatFreesFirst) {
  // Two independent branches, each widening to 16 channels and narrowing back to 1; the file
  // interleaves them (both 16-channel tensors alive at once). Run branch by branch, at most one
  // wide tensor is alive: the planned peak must be that of the better order.
  Net n;
  n.input("x", {1, 1, 40, 48});
  n.conv("x", "a1", 1, 16, 2);
  n.conv("x", "b1", 1, 16, 2);
  n.conv("a1", "a2", 16, 1, 2);
  n.conv("b1", "b2", 16, 1, 2);
  n.add("Add", {"a2", "b2"}, {"y"});
  n.output("y");
  compare(n);
  OnnxModel m = load(n, Backend::OneDnn);
  const auto& live = m.plan_for(n.in_shapes).live_bytes();
  const std::size_t wide = 16 * 40 * 48 * sizeof(float);
  const std::size_t peak = *std::max_element(live.begin(), live.end());
  EXPECT_LT(peak, 2 * wide) << "both wide tensors are alive at once";
  EXPECT_GE(peak, wide);
}

// ---- streamed convolution chains -------------------------------------------------------------

/// Runs `n` with and without depth-slab chains; expects equal outputs (1e-5 of the range), a
/// chain step in the streamed plan, and a smaller activation peak.
void expect_chain_matches(const Net& n) {
  std::vector<Tensor> inputs;
  unsigned s = 3000;
  for (const auto& shape : n.in_shapes) inputs.push_back(Tensor::from_vector(shape, random_values(qsmcore::numel(shape), s++)));
  qsmcore::ModelOptions o;
  o.threads = 2;
  const auto bytes = model(graph(n.p), n.opset).bytes;
  OnnxModel streamed = OnnxModel::load(bytes, o, "chain.onnx");
  o.stream_conv_chains = false;
  OnnxModel layerwise = OnnxModel::load(bytes, o, "layers.onnx");
  const Tensor want = layerwise.run(inputs)[0], got = streamed.run(inputs)[0];
  ASSERT_EQ(want.shape(), got.shape());
  const float* x = want.data<float>();
  const auto [lo, hi] = std::minmax_element(x, x + want.numel());
  for (std::int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.data<float>()[i], x[i], 1e-5 * (*hi - *lo)) << "voxel " << i;
  int chains = 0;
  for (const auto& st : streamed.plan_for(n.in_shapes).steps()) chains += st.op_type == "qsm.ConvChain" ? 1 : 0;
  EXPECT_GT(chains, 0) << "no chain was formed";
  EXPECT_LT(streamed.plan_for(n.in_shapes).memory().run_peak_bytes(),
            layerwise.plan_for(n.in_shapes).memory().run_peak_bytes());
}

TEST(ConvChain, PlainChainOfMixedKernelsAtEveryDepth) {
  // Kernels 3, 5 (depth reach 2) and 1, channel counts changing, activations fused. Depths from
  // the smallest the pass streams (36: windows of slab + 4 planes within a sixth of the depth)
  // through ragged last slabs (37, 45) to an exact multiple of the slab (48).
  for (std::int64_t d : {36, 37, 45, 48}) {
    Net n;
    n.input("x", {1, 2, d, 9, 7});
    n.conv("x", "c1", 2, 12);
    n.add("Relu", {"c1"}, {"r1"});
    n.conv("r1", "c2", 12, 8, 3, 5);
    n.add("LeakyRelu", {"c2"}, {"r2"}, {attr_float("alpha", 0.1f)});
    n.conv("r2", "c3", 8, 16, 3, 1);
    n.add("Relu", {"c3"}, {"r3"});
    n.conv("r3", "y", 16, 3);
    n.output("y");
    SCOPED_TRACE("depth " + std::to_string(d));
    expect_chain_matches(n);
  }
}

TEST(ConvChain, ResidualBlocksShareTheirInputsBytes) {
  // LPCNN's blocks: y = relu(x + conv(relu(conv(x)))); the block output may overwrite its input
  // plane by plane, which is only sound because the first conv has moved past those planes.
  Net n;
  n.input("x", {1, 1, 33, 10, 8});
  n.conv("x", "c0", 1, 16);
  n.add("Relu", {"c0"}, {"h0"});
  std::string h = "h0";
  for (int b = 0; b < 3; ++b) {
    const std::string p = "b" + std::to_string(b);
    n.conv(h, p + "a", 16, 16);
    n.add("Relu", {p + "a"}, {p + "ra"});
    n.conv(p + "ra", p + "b", 16, 16);
    n.add("Add", {h, p + "b"}, {p + "s"});
    n.add("Relu", {p + "s"}, {p + "h"});
    h = p + "h";
  }
  n.conv(h, "y", 16, 1);
  n.output("y");
  expect_chain_matches(n);
}

TEST(ConvChain, DecoderLevelFromASplitConcatenation) {
  // conv(cat(up, skip)) -> conv -> 1x1 head: the first layer sums two convolutions over two
  // full inputs; nothing else at full resolution is held.
  Net n;
  n.input("up", {1, 6, 25, 8, 6});
  n.input("skip", {1, 4, 25, 8, 6});
  n.add("Concat", {"up", "skip"}, {"cat"}, {attr_int("axis", 1)});
  n.conv("cat", "d1", 10, 8);
  n.add("Relu", {"d1"}, {"r1"});
  n.conv("r1", "d2", 8, 8);
  n.add("Relu", {"d2"}, {"r2"});
  n.conv("r2", "y", 8, 1, 3, 1);
  n.output("y");
  expect_chain_matches(n);
}

TEST(ConvChain, UpSamplingMadeAFewPlanesAtATime) {
  // The decoder's ConvTranspose (kernel = stride) feeds only the chain: its output is made from
  // the half-resolution input inside the chain, window by window (strides 2,2,2 and 2,1,3).
  for (const auto& st : std::vector<std::vector<std::int64_t>>{{2, 2, 2}, {2, 1, 3}}) {
    Net n;
    const Shape low{1, 8, 17, 5, 3};
    const Shape full{1, 4, 17 * st[0], 5 * st[1], 3 * st[2]};
    n.input("low", low);
    n.input("skip", full);
    n.weight("up_w", {8, 6, st[0], st[1], st[2]});
    n.weight("up_b", {6});
    n.add("ConvTranspose", {"low", "up_w", "up_b"}, {"u"}, {attr_ints("strides", st)});
    n.add("Relu", {"u"}, {"ur"});
    n.add("Concat", {"ur", "skip"}, {"cat"}, {attr_int("axis", 1)});
    n.conv("cat", "d1", 10, 8);
    n.add("Relu", {"d1"}, {"r1"});
    n.conv("r1", "y", 8, 2);
    n.output("y");
    expect_chain_matches(n);
    OnnxModel m = load(n, Backend::OneDnn);
    for (const auto& st2 : m.plan_for(n.in_shapes).steps()) EXPECT_NE(st2.op_type, "ConvTranspose");
  }
}

// ---- a U-Net-like chain: blocked layouts end to end ------------------------------------------

TEST(OneDnnChain, ConvPoolDeconvConcatStaysBlocked) {
  Net n;
  n.input("x", {1, 2, 8, 12, 10});
  n.conv("x", "e1", 2, 8);
  n.add("Relu", {"e1"}, {"r1"});
  n.add("MaxPool", {"r1"}, {"p1"}, {attr_ints("kernel_shape", {2, 2, 2}), attr_ints("strides", {2, 2, 2})});
  n.conv("p1", "e2", 8, 16);
  n.add("Relu", {"e2"}, {"r2"});
  n.weight("up_w", {16, 8, 2, 2, 2});
  n.weight("up_b", {8});
  n.add("ConvTranspose", {"r2", "up_w", "up_b"}, {"u"}, {attr_ints("strides", {2, 2, 2})});
  n.add("Concat", {"u", "r1"}, {"cat"}, {attr_int("axis", 1)});
  n.conv("cat", "d1", 16, 8);
  n.add("Relu", {"d1"}, {"r3"});
  n.conv("r3", "y", 8, 1, 3, 1);
  n.output("y");
  const auto impls = compare(n);
  // The Concat feeding d1 is split into two convs summed by a post-op (split_concat_convs).
  for (const char* op : {"MaxPool", "ConvTranspose", "Conv"}) expect_onednn(impls, op);
  for (const auto& [op, impl] : impls) EXPECT_NE(op, "Concat") << "the decoder concat should be split away";
  EXPECT_EQ(interior_reorders(impls), 0);
}

// ---- softmax ---------------------------------------------------------------------------------

TEST(OneDnnSoftmax, AxesAndLog) {
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (std::int64_t axis : {1, -1, 0}) {
      Net n;
      n.input("x", {3, 4, 5, 6});
      n.add(op, {"x"}, {"y"}, {attr_int("axis", axis)});
      n.output("y");
      expect_onednn(compare(n), op);
    }
}

TEST(OneDnnSoftmax, LegacyOpsetCoercesTo2d) {
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (std::int64_t axis : {1, 2}) {
      Net n;
      n.opset = 11;
      n.input("x", {2, 3, 4, 5});
      n.add(op, {"x"}, {"y"}, {attr_int("axis", axis)});
      n.output("y");
      expect_onednn(compare(n), op);
    }
}

// ---- matmul / gemm ---------------------------------------------------------------------------

TEST(OneDnnMatMul, ConstantAndBatchedBroadcast) {
  Net a;
  a.input("x", {7, 12});
  a.weight("w", {12, 9});
  a.add("MatMul", {"x", "w"}, {"y"});
  a.output("y");
  expect_onednn(compare(a), "MatMul");

  Net b;
  b.input("x", {2, 3, 4, 5});
  b.input("z", {3, 5, 6});
  b.add("MatMul", {"x", "z"}, {"y"});
  b.output("y");
  expect_onednn(compare(b), "MatMul");

  Net c;
  c.input("x", {2, 3, 4, 5});
  c.weight("w", {5, 6});
  c.add("MatMul", {"x", "w"}, {"y"});
  c.output("y");
  expect_onednn(compare(c), "MatMul");
}

TEST(OneDnnMatMul, GemmVariants) {
  struct V {
    bool ta, tb;
    float alpha, beta;
    Shape c;
    bool b_const;
  };
  for (const V& v : {V{false, false, 1.0f, 1.0f, {}, true}, V{true, false, 0.5f, 2.0f, {9}, true},
                     V{false, true, 1.0f, 0.5f, {7, 9}, true}, V{true, true, 1.0f, 1.0f, {1, 9}, false},
                     V{false, false, 1.0f, 1.0f, {7, 1}, false}}) {
    Net n;
    n.input("a", v.ta ? Shape{11, 7} : Shape{7, 11});
    const Shape bs = v.tb ? Shape{9, 11} : Shape{11, 9};
    if (v.b_const) n.weight("b", bs);
    else n.input("b", bs);
    std::vector<std::string> in{"a", "b"};
    if (!v.c.empty()) {
      n.weight("c", v.c);
      in.push_back("c");
    }
    n.add("Gemm", in, {"y"},
          {attr_int("transA", v.ta), attr_int("transB", v.tb), attr_float("alpha", v.alpha), attr_float("beta", v.beta)});
    n.output("y");
    expect_onednn(compare(n), "Gemm");
  }
}

// ---- resize ----------------------------------------------------------------------------------

Net resize_net(const std::vector<float>& scales, const std::vector<Proto>& attrs, bool after_conv = true) {
  Net n;
  n.input("x", {1, 3, 4, 5, 6});
  std::string src = "x";
  if (after_conv) {
    n.conv("x", "c", 3, 8);
    src = "c";
  }
  n.p.initializers.push_back(float_tensor("roi", {0}, {}));
  n.p.initializers.push_back(float_tensor("scales", {5}, scales));
  n.add("Resize", {src, "roi", "scales"}, {"y"}, attrs);
  n.output("y");
  return n;
}

TEST(OneDnnResize, LinearHalfPixel) {
  expect_onednn(compare(resize_net({1, 1, 2, 2, 2}, {attr_string("mode", "linear")})), "Resize");
  expect_onednn(compare(resize_net({1, 1, 1.5f, 2, 0.5f}, {attr_string("mode", "linear")}, false)), "Resize");
  expect_onednn(compare(resize_net({1, 1, 2, 3, 2},
                                   {attr_string("mode", "linear"), attr_string("coordinate_transformation_mode", "pytorch_half_pixel")})),
                "Resize");
}

TEST(OneDnnResize, NearestIntegerFactors) {
  expect_onednn(compare(resize_net({1, 1, 2, 2, 2},
                                   {attr_string("coordinate_transformation_mode", "asymmetric"), attr_string("nearest_mode", "floor")})),
                "Resize");
  expect_onednn(compare(resize_net({1, 1, 3, 2, 4}, {}, false)), "Resize");
  expect_onednn(compare(resize_net({1, 1, 2, 3, 1}, {attr_string("nearest_mode", "round_prefer_ceil")})), "Resize");
}

TEST(OneDnnResize, UnmatchedVariantsDecline) {
  expect_ref(compare(resize_net({1, 1, 1.5f, 2, 2}, {})), "Resize");
  expect_ref(compare(resize_net({1, 1, 2, 2, 2}, {attr_string("mode", "linear"), attr_string("coordinate_transformation_mode", "align_corners")})),
             "Resize");
}

}  // namespace
