// Shape-manipulating operators whose data is a plain copy: Reshape, Flatten, Squeeze,
// Unsqueeze; plus Shape, Expand, ConstantOfShape and Constant. Shape arguments given as
// inputs (opset >= 5 / 13) must be plan-time constants; older opsets give them as attributes.
#include <algorithm>
#include <cstring>

#include "graph/ops/common.h"

namespace qsmcore::graph {
namespace ops {
namespace {

void copy_bytes(const Tensor& in, const Tensor& out) {
  if (in.raw() != out.raw() && out.nbytes()) std::memcpy(out.raw(), in.raw(), out.nbytes());
}

/// An op whose output is input 0's bytes under a new shape.
OpDef view_op(const char* name, std::vector<int> const_inputs, std::function<Shape(const Node&, const Inputs&)> shape) {
  OpDef d;
  d.name = name;
  d.inplace_ok = true;  // same bytes, same dtype: only the shape changes
  d.const_inputs = std::move(const_inputs);
  d.infer = [shape](const Node& n, const Inputs& in) {
    if (in.empty() || !in[0].present()) invalid(n, "missing input 0");
    expect_fixed_size(n, in[0].dtype);
    return one(in[0].dtype, shape(n, in));
  };
  d.ref = [](const Node&, std::span<const Tensor> in, std::span<Tensor> out) { copy_bytes(in[0], out[0]); };
  return d;
}

Shape reshape_shape(const Node& n, const Inputs& in) {
  const Shape& x = in[0].shape;
  // Opset 1-4 carry the target as an attribute; later opsets as a constant input.
  std::vector<std::int64_t> target = has_input(in, 1) ? const_ints(n, in, 1, "shape") : n.attrs.get_ints("shape");
  if (!has_input(in, 1) && !n.attrs.has("shape")) invalid(n, "missing the target shape");
  const bool allowzero = n.attrs.get_int("allowzero", 0) != 0;
  Shape out(target.size());
  std::int64_t known = 1, infer_at = -1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    std::int64_t v = target[i];
    if (v == 0 && !allowzero) {
      if (i >= x.size()) invalid(n, "shape " + ints_to_string(target) + " copies dim " + std::to_string(i) + " that " + shape_to_string(x) + " lacks");
      v = x[i];
    }
    if (v == -1) {
      if (infer_at >= 0) invalid(n, "shape " + ints_to_string(target) + " has more than one -1");
      infer_at = static_cast<std::int64_t>(i);
      continue;
    }
    if (v < 0) invalid(n, "shape " + ints_to_string(target) + " has a negative dim");
    out[i] = v;
    // The target comes from the file: its product must not wrap before it is compared.
    if (__builtin_mul_overflow(known, v, &known))
      invalid(n, "shape " + ints_to_string(target) + " has more elements than an int64 can count");
  }
  const std::int64_t total = numel(x);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) invalid(n, "cannot reshape " + shape_to_string(x) + " into " + ints_to_string(target));
    out[static_cast<std::size_t>(infer_at)] = total / known;
  }
  if (numel(out) != total) invalid(n, "cannot reshape " + shape_to_string(x) + " into " + ints_to_string(target));
  return out;
}

Shape flatten_shape(const Node& n, const Inputs& in) {
  const Shape& x = in[0].shape;
  const auto rank = static_cast<std::int64_t>(x.size());
  std::int64_t axis = n.attrs.get_int("axis", 1);
  if (axis < -rank || axis > rank) invalid(n, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  std::int64_t a = 1, b = 1;
  for (std::int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= x[static_cast<std::size_t>(i)];
  return {a, b};
}

/// Axes from input 1 (opset 13) or the 'axes' attribute (older); `present` tells whether any were given.
std::vector<std::int64_t> axes_arg(const Node& n, const Inputs& in, bool& present) {
  present = has_input(in, 1) || n.attrs.has("axes");
  return has_input(in, 1) ? const_ints(n, in, 1, "axes") : n.attrs.get_ints("axes");
}

std::vector<bool> axis_mask(const Node& n, const std::vector<std::int64_t>& axes, std::int64_t rank) {
  std::vector<bool> mask(static_cast<std::size_t>(rank), false);
  for (auto a : axes) {
    const auto i = static_cast<std::size_t>(normalize_axis(n, a, rank, "axes value"));
    if (mask[i]) invalid(n, "axes " + ints_to_string(axes) + " repeat an axis");
    mask[i] = true;
  }
  return mask;
}

Shape squeeze_shape(const Node& n, const Inputs& in) {
  const Shape& x = in[0].shape;
  bool given = false;
  const auto axes = axes_arg(n, in, given);
  const auto mask = axis_mask(n, axes, static_cast<std::int64_t>(x.size()));
  Shape out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (given && mask[i] && x[i] != 1) invalid(n, "cannot squeeze axis " + std::to_string(i) + " of " + shape_to_string(x) + ": size is not 1");
    if ((given && mask[i]) || (!given && x[i] == 1)) continue;
    out.push_back(x[i]);
  }
  return out;
}

Shape unsqueeze_shape(const Node& n, const Inputs& in) {
  const Shape& x = in[0].shape;
  bool given = false;
  const auto axes = axes_arg(n, in, given);
  if (!given) invalid(n, "missing axes");
  const auto rank = static_cast<std::int64_t>(x.size() + axes.size());
  const auto mask = axis_mask(n, axes, rank);
  Shape out;
  std::size_t k = 0;
  for (std::int64_t i = 0; i < rank; ++i) out.push_back(mask[static_cast<std::size_t>(i)] ? 1 : x[k++]);
  return out;
}

OpDef shape_op() {
  OpDef d;
  d.name = "Shape";
  auto range = [](const Node& n, std::int64_t rank, std::int64_t& b, std::int64_t& e) {
    auto clampi = [rank](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
    b = clampi(n.attrs.get_int("start", 0));
    e = clampi(n.attrs.get_int("end", rank));
    if (e < b) e = b;
  };
  d.infer = [range](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 1);
    std::int64_t b = 0, e = 0;
    range(n, static_cast<std::int64_t>(in[0].shape.size()), b, e);
    return one(DType::I64, {e - b});
  };
  d.ref = [range](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    std::int64_t b = 0, e = 0;
    range(n, in[0].rank(), b, e);
    for (std::int64_t i = b; i < e; ++i) out[0].data<std::int64_t>()[i - b] = in[0].dim(i);
  };
  return d;
}

OpDef expand_op() {
  OpDef d;
  d.name = "Expand";
  d.const_inputs = {1};
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 2, 2);
    expect_fixed_size(n, in[0].dtype);
    return one(in[0].dtype, broadcast_shapes(n, {in[0].shape, const_ints(n, in, 1, "shape")}));
  };
  d.ref = [](const Node&, std::span<const Tensor> in, std::span<Tensor> out) {
    const Broadcast bc(out[0].shape(), {in[0].shape()});
    const std::size_t es = dtype_size(in[0].dtype());
    const auto* src = static_cast<const std::byte*>(in[0].raw());
    auto* dst = static_cast<std::byte*>(out[0].raw());
    const std::int64_t inner = bc.inner(), st = bc.inner_stride(0);
    parallel_for(bc.rows(), inner, [&](std::int64_t r) {
      const std::int64_t base = bc.row_offset(0, r);
      std::byte* o = dst + static_cast<std::size_t>(r * inner) * es;
      if (st == 1) {
        std::memcpy(o, src + static_cast<std::size_t>(base) * es, static_cast<std::size_t>(inner) * es);
      } else {
        for (std::int64_t j = 0; j < inner; ++j)
          std::memcpy(o + static_cast<std::size_t>(j) * es, src + static_cast<std::size_t>(base + j * st) * es, es);
      }
    });
  };
  return d;
}

OpDef constant_of_shape() {
  OpDef d;
  d.name = "ConstantOfShape";
  d.const_inputs = {0};
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 1);
    const auto dims = const_ints(n, in, 0, "shape");
    for (auto v : dims)
      if (v < 0) invalid(n, "shape " + ints_to_string(dims) + " has a negative dim");
    const Tensor* v = n.attrs.get_tensor("value");
    if (v != nullptr && v->numel() != 1) invalid(n, "value must hold exactly one element");
    if (v != nullptr) expect_fixed_size(n, v->dtype());
    return one(v ? v->dtype() : DType::F32, dims);
  };
  d.ref = [](const Node& n, std::span<const Tensor>, std::span<Tensor> out) {
    const Tensor* v = n.attrs.get_tensor("value");
    const std::size_t es = dtype_size(out[0].dtype());
    auto* o = static_cast<std::byte*>(out[0].raw());
    const float zero = 0.0f;
    const void* src = v ? v->raw() : &zero;
    for (std::int64_t i = 0; i < out[0].numel(); ++i) std::memcpy(o + static_cast<std::size_t>(i) * es, src, es);
  };
  return d;
}

/// Constant's value from whichever attribute carries it (value, value_float(s), value_int(s)).
Tensor constant_value(const Node& n) {
  if (const Tensor* t = n.attrs.get_tensor("value")) {
    expect_fixed_size(n, t->dtype());
    return *t;
  }
  if (n.attrs.has("value_float")) return Tensor::from_vector<float>({}, {n.attrs.get_float("value_float", 0)}, MemCategory::Weights);
  if (n.attrs.has("value_floats")) {
    auto v = n.attrs.get_floats("value_floats");
    return Tensor::from_vector<float>({static_cast<std::int64_t>(v.size())}, v, MemCategory::Weights);
  }
  if (n.attrs.has("value_int")) return Tensor::from_vector<std::int64_t>({}, {n.attrs.get_int("value_int", 0)}, MemCategory::Weights);
  if (n.attrs.has("value_ints")) {
    auto v = n.attrs.get_ints("value_ints");
    return Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(v.size())}, v, MemCategory::Weights);
  }
  for (const char* s : {"value_string", "value_strings", "sparse_value"})
    if (n.attrs.has(s)) unsupported(n, std::string("attribute '") + s + "' is not supported");
  invalid(n, "has no value attribute");
}

OpDef constant_op() {
  OpDef d;
  d.name = "Constant";
  d.infer = [](const Node& n, const Inputs&) {
    const Tensor t = constant_value(n);
    return one(t.dtype(), t.shape());
  };
  d.ref = [](const Node& n, std::span<const Tensor>, std::span<Tensor> out) { copy_bytes(constant_value(n), out[0]); };
  return d;
}

}  // namespace
}  // namespace ops

void register_shape_ops(OpRegistry& r) {
  r.add(ops::view_op("Reshape", {1}, ops::reshape_shape));
  r.add(ops::view_op("Flatten", {}, ops::flatten_shape));
  r.add(ops::view_op("Squeeze", {1}, ops::squeeze_shape));
  r.add(ops::view_op("Unsqueeze", {1}, ops::unsqueeze_shape));
  r.add(ops::shape_op());
  r.add(ops::expand_op());
  r.add(ops::constant_of_shape());
  r.add(ops::constant_op());
}

}  // namespace qsmcore::graph
