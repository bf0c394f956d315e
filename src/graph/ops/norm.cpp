// Normalisations: BatchNormalization (inference, and training_mode's batch statistics),
// InstanceNormalization and LayerNormalization (opset 17). Statistics are accumulated in double
// so that large planes (64^3 voxels) keep their digits; each plane/row is one thread's work.
#include <cmath>

#include "graph/ops/common.h"

namespace qsmcore::graph {
namespace ops {
namespace {

struct MeanVar {
  double mean = 0, var = 0;
};

/// Mean and population variance of `count` elements spaced `stride` apart in `planes` groups
/// (group g starts at g * group_stride): for BatchNorm the groups are the batch items.
MeanVar mean_var(const float* x, std::int64_t planes, std::int64_t group_stride, std::int64_t count) {
  double s = 0;
  for (std::int64_t g = 0; g < planes; ++g)
    for (std::int64_t i = 0; i < count; ++i) s += x[g * group_stride + i];
  const double total = static_cast<double>(planes * count);
  MeanVar mv;
  mv.mean = total > 0 ? s / total : 0;
  double q = 0;
  for (std::int64_t g = 0; g < planes; ++g)
    for (std::int64_t i = 0; i < count; ++i) {
      const double d = x[g * group_stride + i] - mv.mean;
      q += d * d;
    }
  mv.var = total > 0 ? q / total : 0;
  return mv;
}

void expect_channel_vector(const Node& n, const ValueType& v, std::int64_t c, const char* what) {
  expect_float(n, v.dtype, what);
  if (numel(v.shape) != c || v.shape.size() != 1)
    invalid(n, std::string(what) + " has shape " + shape_to_string(v.shape) + ", expected [" + std::to_string(c) + "]");
}

OpDef batch_norm() {
  OpDef d;
  d.name = "BatchNormalization";
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 5, 5);
    expect_float(n, in[0].dtype, "X");
    if (in[0].shape.size() < 2) invalid(n, "X must have rank >= 2, got " + shape_to_string(in[0].shape));
    if (n.attrs.get_int("spatial", 1) != 1) unsupported(n, "spatial=0 is not supported");
    const std::int64_t c = in[0].shape[1];
    const char* names[] = {"X", "scale", "B", "mean", "var"};
    for (std::size_t i = 1; i < 5; ++i) expect_channel_vector(n, in[i], c, names[i]);
    std::vector<ValueType> out{{DType::F32, in[0].shape, nullptr}};
    // Optional training outputs (running mean / var), when the node names them.
    for (std::size_t i = 1; i < std::min<std::size_t>(n.outputs.size(), 3); ++i) out.push_back({DType::F32, {c}, nullptr});
    if (n.outputs.size() > 3) unsupported(n, "saved_mean/saved_var outputs (opset < 14 training) are not supported");
    return out;
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const bool training = n.attrs.get_int("training_mode", 0) != 0;
    const float eps = n.attrs.get_float("epsilon", 1e-5f), momentum = n.attrs.get_float("momentum", 0.9f);
    const std::int64_t batch = in[0].dim(0), c = in[0].dim(1), plane = in[0].numel() / std::max<std::int64_t>(batch * c, 1);
    const float* x = in[0].data<float>();
    const float *scale = in[1].data<float>(), *bias = in[2].data<float>();
    const float *mean = in[3].data<float>(), *var = in[4].data<float>();
    float* y = out[0].data<float>();
    parallel_for(c, batch * plane, [&](std::int64_t ch) {
      double m = mean[ch], v = var[ch];
      if (training) {
        const MeanVar mv = mean_var(x + ch * plane, batch, c * plane, plane);
        m = mv.mean, v = mv.var;
        if (out.size() > 1 && out[1].defined()) out[1].data<float>()[ch] = static_cast<float>(mean[ch] * momentum + m * (1 - momentum));
        if (out.size() > 2 && out[2].defined()) out[2].data<float>()[ch] = static_cast<float>(var[ch] * momentum + v * (1 - momentum));
      } else {
        // Inference with running-statistics outputs requested: pass the inputs through.
        if (out.size() > 1 && out[1].defined()) out[1].data<float>()[ch] = mean[ch];
        if (out.size() > 2 && out[2].defined()) out[2].data<float>()[ch] = var[ch];
      }
      const float a = static_cast<float>(scale[ch] / std::sqrt(v + eps));
      const float b = static_cast<float>(bias[ch] - m * a);
      for (std::int64_t bi = 0; bi < batch; ++bi) {
        const std::int64_t off = (bi * c + ch) * plane;
        for (std::int64_t i = 0; i < plane; ++i) y[off + i] = x[off + i] * a + b;
      }
    });
  };
  return d;
}

OpDef instance_norm() {
  OpDef d;
  d.name = "InstanceNormalization";
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 3, 3);
    expect_float(n, in[0].dtype, "X");
    if (in[0].shape.size() < 3) invalid(n, "X must have rank >= 3, got " + shape_to_string(in[0].shape));
    expect_channel_vector(n, in[1], in[0].shape[1], "scale");
    expect_channel_vector(n, in[2], in[0].shape[1], "B");
    return one(DType::F32, in[0].shape);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const float eps = n.attrs.get_float("epsilon", 1e-5f);
    const std::int64_t c = in[0].dim(1), planes = in[0].dim(0) * c;
    const std::int64_t plane = in[0].numel() / std::max<std::int64_t>(planes, 1);
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    parallel_for(planes, plane, [&](std::int64_t p) {
      const MeanVar mv = mean_var(x + p * plane, 1, 0, plane);
      const std::int64_t ch = p % c;
      const float a = static_cast<float>(in[1].data<float>()[ch] / std::sqrt(mv.var + eps));
      const float b = static_cast<float>(in[2].data<float>()[ch] - mv.mean * a);
      for (std::int64_t i = 0; i < plane; ++i) y[p * plane + i] = x[p * plane + i] * a + b;
    });
  };
  return d;
}

/// Scale or bias of LayerNormalization expanded to the full normalised block (they may be
/// given with fewer dims and broadcast, unidirectionally, onto X.shape[axis:]).
std::vector<float> expand_to_block(const Node& n, const Tensor& t, const Shape& block) {
  if (broadcast_shapes(n, {block, t.shape()}) != block)
    invalid(n, "scale/bias shape " + shape_to_string(t.shape()) + " does not broadcast to " + shape_to_string(block));
  std::vector<float> v(static_cast<std::size_t>(numel(block)));
  const Broadcast bc(block, {t.shape()});
  const float* src = t.data<float>();
  for (std::int64_t r = 0; r < bc.rows(); ++r)
    for (std::int64_t j = 0; j < bc.inner(); ++j)
      v[static_cast<std::size_t>(r * bc.inner() + j)] = src[bc.row_offset(0, r) + j * bc.inner_stride(0)];
  return v;
}

OpDef layer_norm() {
  OpDef d;
  d.name = "LayerNormalization";
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 2, 3);
    for (const auto& v : in)
      if (v.present()) expect_float(n, v.dtype);
    const Shape& x = in[0].shape;
    const auto rank = static_cast<std::int64_t>(x.size());
    const std::int64_t axis = normalize_axis(n, n.attrs.get_int("axis", -1), rank);
    const Shape block(x.begin() + axis, x.end());
    for (std::size_t i = 1; i < in.size(); ++i)
      if (in[i].present() && broadcast_shapes(n, {block, in[i].shape}) != block)
        invalid(n, std::string(i == 1 ? "Scale " : "B ") + shape_to_string(in[i].shape) + " does not broadcast to " + shape_to_string(block));
    Shape stat(x.begin(), x.begin() + axis);
    stat.resize(x.size(), 1);
    std::vector<ValueType> out{{DType::F32, x, nullptr}};
    for (std::size_t i = 1; i < std::min<std::size_t>(n.outputs.size(), 3); ++i) out.push_back({DType::F32, stat, nullptr});
    return out;
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const Shape& x = in[0].shape();
    const std::int64_t axis = normalize_axis(n, n.attrs.get_int("axis", -1), in[0].rank());
    const float eps = n.attrs.get_float("epsilon", 1e-5f);
    const Shape block(x.begin() + axis, x.end());
    const std::int64_t len = numel(block), rows = len ? in[0].numel() / len : 0;
    const std::vector<float> scale = expand_to_block(n, in[1], block);
    const std::vector<float> bias = has_input(in, 2) ? expand_to_block(n, in[2], block) : std::vector<float>(scale.size(), 0.0f);
    const float* px = in[0].data<float>();
    float* py = out[0].data<float>();
    float* pm = out.size() > 1 && out[1].defined() ? out[1].data<float>() : nullptr;
    float* pi = out.size() > 2 && out[2].defined() ? out[2].data<float>() : nullptr;
    parallel_for(rows, len, [&](std::int64_t r) {
      const MeanVar mv = mean_var(px + r * len, 1, 0, len);
      const double inv = 1.0 / std::sqrt(mv.var + eps);
      if (pm) pm[r] = static_cast<float>(mv.mean);
      if (pi) pi[r] = static_cast<float>(inv);
      for (std::int64_t i = 0; i < len; ++i)
        py[r * len + i] = static_cast<float>((px[r * len + i] - mv.mean) * inv) * scale[static_cast<std::size_t>(i)] + bias[static_cast<std::size_t>(i)];
    });
  };
  return d;
}

}  // namespace
}  // namespace ops

void register_norm_ops(OpRegistry& r) {
  r.add(ops::batch_norm());
  r.add(ops::instance_norm());
  r.add(ops::layer_norm());
}

}  // namespace qsmcore::graph
