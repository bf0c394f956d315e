// Data-movement operators over any fixed-size dtype: Concat, Split, Slice, Pad, Tile, Gather
// and Transpose. Slice, Pad and Tile are all "output index -> input index per dim" copies and
// share one kernel (gather_by_maps).
#include <algorithm>
#include <cstring>

#include "core/checked_size.h"
#include "graph/ops/common.h"

namespace qsmcore::graph {
namespace ops {
namespace {

using Map = std::vector<std::int64_t>;  // output index -> input index along one dim; -1 = fill

/// out[o0, .., ok] = in[maps[0][o0], .., maps[k][ok]], or `fill` where any map gives -1.
void gather_by_maps(const Tensor& in, const Tensor& out, const std::vector<Map>& maps, const std::byte* fill) {
  const std::size_t rank = maps.size(), es = dtype_size(in.dtype());
  const auto* src = static_cast<const std::byte*>(in.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  if (out.numel() == 0) return;
  if (rank == 0) {
    std::memcpy(dst, src, es);
    return;
  }
  const auto st = strides_of(in.shape());
  const Map& last = maps.back();
  const auto inner = static_cast<std::int64_t>(last.size());
  bool contiguous = last[0] >= 0;  // a run of consecutive input elements: one memcpy per row
  for (std::int64_t j = 1; j < inner && contiguous; ++j) contiguous = last[static_cast<std::size_t>(j)] == last[0] + j;
  parallel_for(out.numel() / inner, inner, [&](std::int64_t r) {
    std::byte* o = dst + static_cast<std::size_t>(r * inner) * es;
    std::int64_t off = 0, rem = r;
    bool filled = false;
    for (std::size_t k = rank - 1; k-- > 0;) {
      const std::int64_t ik = maps[k][static_cast<std::size_t>(rem % static_cast<std::int64_t>(maps[k].size()))];
      rem /= static_cast<std::int64_t>(maps[k].size());
      if (ik < 0) filled = true;
      off += ik * st[k];
    }
    if (contiguous && !filled) {
      std::memcpy(o, src + static_cast<std::size_t>(off + last[0]) * es, static_cast<std::size_t>(inner) * es);
      return;
    }
    for (std::int64_t j = 0; j < inner; ++j) {
      const std::int64_t ij = last[static_cast<std::size_t>(j)];
      const std::byte* from = filled || ij < 0 ? fill : src + static_cast<std::size_t>(off + ij) * es;
      std::memcpy(o + static_cast<std::size_t>(j) * es, from, es);
    }
  });
}


// ---- Slice ---------------------------------------------------------------------------------
std::vector<Map> slice_maps(const Node& n, const Inputs& in, Shape* lengths_only) {
  const Shape& x = in[0].shape;
  const auto rank = static_cast<std::int64_t>(x.size());
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (in.size() >= 3) {  // opset 10+: starts, ends, [axes], [steps] inputs
    starts = const_ints(n, in, 1, "starts");
    ends = const_ints(n, in, 2, "ends");
    if (has_input(in, 3)) axes = const_ints(n, in, 3, "axes");
    if (has_input(in, 4)) steps = const_ints(n, in, 4, "steps");
  } else {  // opset 1: attributes
    starts = n.attrs.get_ints("starts");
    ends = n.attrs.get_ints("ends");
    axes = n.attrs.get_ints("axes");
  }
  if (starts.size() != ends.size()) invalid(n, "starts and ends have different lengths");
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) invalid(n, "starts, ends, axes and steps differ in length");
  std::vector<Map> maps(x.size());
  std::vector<bool> seen(x.size(), false);
  if (lengths_only) *lengths_only = x;
  for (std::size_t i = 0; !lengths_only && i < x.size(); ++i)
    for (std::int64_t j = 0; j < x[i]; ++j) maps[i].push_back(j);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<std::size_t>(normalize_axis(n, axes[i], rank, "axes value"));
    if (seen[a]) invalid(n, "axes repeat axis " + std::to_string(a));
    seen[a] = true;
    const std::int64_t dim = x[a], step = steps[i];
    if (step == 0) invalid(n, "steps must not be 0");
    std::int64_t s = starts[i], e = ends[i];
    // Starts/ends may be INT64 min/max sentinels: clamp before adding anything.
    s = std::clamp(s, -dim - 1, dim + 1);
    e = std::clamp(e, -dim - 1, dim + 1);
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<std::int64_t>(s, 0, dim);
      e = std::clamp<std::int64_t>(e, 0, dim);
    } else {
      s = std::clamp<std::int64_t>(s, 0, dim - 1);
      e = std::clamp<std::int64_t>(e, -1, dim - 1);
    }
    // Counted, not stepped to the end: s + step can wrap for a step from the file.
    const std::int64_t mag = step > 0 ? step : step == INT64_MIN ? INT64_MAX : -step;
    const std::int64_t span = step > 0 ? e - s : s - e;
    const std::int64_t count = span > 0 ? (span - 1) / mag + 1 : 0;
    if (lengths_only) {
      (*lengths_only)[a] = count;
      continue;
    }
    maps[a].clear();
    for (std::int64_t c = 0; c < count; ++c) maps[a].push_back(s + c * step);
  }
  return maps;
}

// ---- Pad -----------------------------------------------------------------------------------
std::vector<std::int64_t> pad_amounts(const Node& n, const Inputs& in) {
  const std::size_t rank = in[0].shape.size();
  auto pads = has_input(in, 1) ? const_ints(n, in, 1, "pads") : n.attrs.get_ints("pads");
  if (has_input(in, 3)) unsupported(n, "the axes input (opset 18) is not supported");
  if (pads.size() != 2 * rank) invalid(n, "pads " + ints_to_string(pads) + " must have " + std::to_string(2 * rank) + " values");
  return pads;
}

std::vector<Map> pad_maps(const Node& n, const Inputs& in, Shape* lengths_only) {
  const Shape& x = in[0].shape;
  const std::size_t rank = x.size();
  const auto pads = pad_amounts(n, in);
  const std::string mode = n.attrs.get_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") unsupported(n, "unsupported mode '" + mode + "'");
  std::vector<Map> maps(rank);
  for (auto p : pads)
    if (p > kMaxTensorBytes || p < -kMaxTensorBytes) invalid(n, "pads " + ints_to_string(pads) + " are out of range");
  if (lengths_only) lengths_only->clear();
  for (std::size_t k = 0; k < rank; ++k) {
    // Bounded above: dims and pads are at most 2^40, so this sum cannot wrap.
    const std::int64_t dim = x[k], b = pads[k], e = pads[k + rank], len = dim + b + e;
    if (len < 0) invalid(n, "pads " + ints_to_string(pads) + " remove more than dim " + std::to_string(k) + " holds");
    if (lengths_only) {
      lengths_only->push_back(len);  // the maps are built only once the output shape is accepted
      continue;
    }
    if (mode != "constant" && dim == 0 && len > 0) invalid(n, mode + " padding of an empty dim");
    if (mode == "reflect" && dim == 1 && len > 1) invalid(n, "reflect padding needs at least 2 elements in dim " + std::to_string(k));
    for (std::int64_t o = 0; o < len; ++o) {
      std::int64_t i = o - b;
      if (i < 0 || i >= dim) {
        if (mode == "constant") i = -1;
        else if (mode == "edge") i = std::clamp<std::int64_t>(i, 0, dim - 1);
        else {  // reflect without repeating the edge, with period 2 * (dim - 1)
          const std::int64_t p = 2 * (dim - 1);
          i = ((i % p) + p) % p;
          if (i >= dim) i = p - i;
        }
      }
      maps[k].push_back(i);
    }
  }
  return maps;
}

/// The pad value as bytes of the data dtype: constant_value input (opset 11+) or 'value' attr.
std::vector<std::byte> pad_fill(const Node& n, std::span<const Tensor> in) {
  const DType t = in[0].dtype();
  std::vector<std::byte> bytes(dtype_size(t), std::byte{0});
  if (has_input(in, 2)) {
    if (in[2].dtype() != t) invalid(n, "constant_value dtype differs from the data dtype");
    if (in[2].numel() >= 1) std::memcpy(bytes.data(), in[2].raw(), bytes.size());
    return bytes;
  }
  const float v = n.attrs.get_float("value", 0.0f);
  if (t == DType::F16 || t == DType::BF16) {
    const std::uint16_t h = t == DType::F16 ? float_to_half(v) : float_to_bf16(v);
    std::memcpy(bytes.data(), &h, 2);
    return bytes;
  }
  dispatch_numeric(n, t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T tv = static_cast<T>(v);
    std::memcpy(bytes.data(), &tv, sizeof(T));
  });
  return bytes;
}

// ---- Tile ----------------------------------------------------------------------------------
std::vector<Map> tile_maps(const Node& n, const Inputs& in, Shape* lengths_only) {
  const Shape& x = in[0].shape;
  const auto reps = const_ints(n, in, 1, "repeats");
  if (reps.size() != x.size()) invalid(n, "repeats " + ints_to_string(reps) + " must have one value per dim of " + shape_to_string(x));
  std::vector<Map> maps(x.size());
  if (lengths_only) lengths_only->clear();
  for (std::size_t k = 0; k < x.size(); ++k) {
    if (reps[k] < 0) invalid(n, "repeats must not be negative");
    std::int64_t len = 0;
    if (__builtin_mul_overflow(x[k], reps[k], &len))
      invalid(n, "repeats " + ints_to_string(reps) + " of " + shape_to_string(x) + " overflow an int64");
    if (lengths_only) {
      lengths_only->push_back(len);
      continue;
    }
    for (std::int64_t o = 0; o < len; ++o) maps[k].push_back(o % x[k]);
  }
  return maps;
}

// With a non-null Shape*, a maps function only computes the output's length per dim: shape
// inference must not allocate per output index before the shape has been checked.
using MapsFn = std::vector<Map> (*)(const Node&, const Inputs&, Shape*);

OpDef map_op(const char* name, std::vector<int> consts, MapsFn maps_fn) {
  OpDef d;
  d.name = name;
  d.const_inputs = std::move(consts);
  d.infer = [maps_fn](const Node& n, const Inputs& in) {
    if (in.empty() || !in[0].present()) invalid(n, "missing input 0");
    expect_fixed_size(n, in[0].dtype);
    Shape out;
    maps_fn(n, in, &out);
    return one(in[0].dtype, out);
  };
  d.ref = [maps_fn](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    // Re-derive the maps with the constant inputs visible (they are real tensors here).
    Inputs types = types_of(in);
    for (std::size_t i = 0; i < in.size(); ++i) types[i].value = in[i].defined() ? &in[i] : nullptr;
    const std::vector<std::byte> fill = n.op_type == "Pad" ? pad_fill(n, in) : std::vector<std::byte>(8, std::byte{0});
    gather_by_maps(in[0], out[0], maps_fn(n, types, nullptr), fill.data());
  };
  return d;
}

// ---- Concat / Split --------------------------------------------------------------------------
/// Splits a shape at `axis` into (rows before, elements per unit of axis).
void outer_inner(const Shape& s, std::size_t axis, std::int64_t& outer, std::int64_t& inner) {
  outer = inner = 1;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i < axis) outer *= s[i];
    else if (i > axis) inner *= s[i];
  }
}

OpDef concat_op() {
  OpDef d;
  d.name = "Concat";
  d.infer = [](const Node& n, const Inputs& in) {
    if (in.empty()) invalid(n, "expects at least one input");
    if (!n.attrs.has("axis")) invalid(n, "missing required attribute 'axis'");
    const Shape& s0 = in[0].shape;
    const auto axis = static_cast<std::size_t>(normalize_axis(n, n.attrs.get_int("axis", 0), static_cast<std::int64_t>(s0.size())));
    Shape out = s0;
    out[axis] = 0;
    for (const auto& v : in) {
      expect_fixed_size(n, v.dtype);
      if (v.dtype != in[0].dtype) invalid(n, "inputs have different dtypes");
      bool ok = v.shape.size() == s0.size();
      for (std::size_t i = 0; ok && i < s0.size(); ++i) ok = i == axis || v.shape[i] == s0[i];
      if (!ok) invalid(n, "cannot concatenate " + shape_to_string(v.shape) + " with " + shape_to_string(s0) + " on axis " + std::to_string(axis));
      out[axis] += v.shape[axis];
    }
    return one(in[0].dtype, out);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const auto axis = static_cast<std::size_t>(normalize_axis(n, n.attrs.get_int("axis", 0), out[0].rank()));
    const std::size_t es = dtype_size(out[0].dtype());
    std::int64_t outer = 0, inner = 0;
    outer_inner(out[0].shape(), axis, outer, inner);
    const std::int64_t out_row = out[0].dim(static_cast<std::int64_t>(axis)) * inner;
    auto* dst = static_cast<std::byte*>(out[0].raw());
    std::int64_t at = 0;
    for (const auto& t : in) {
      const std::int64_t row = t.dim(static_cast<std::int64_t>(axis)) * inner;
      const auto* src = static_cast<const std::byte*>(t.raw());
      if (row == 0) continue;  // an empty input has no storage (memcpy from null is UB)
      parallel_for(outer, row, [&](std::int64_t r) {
        std::memcpy(dst + static_cast<std::size_t>(r * out_row + at) * es, src + static_cast<std::size_t>(r * row) * es, static_cast<std::size_t>(row) * es);
      });
      at += row;
    }
  };
  return d;
}

std::vector<std::int64_t> split_sizes(const Node& n, const Inputs& in, std::size_t& axis) {
  const Shape& x = in[0].shape;
  axis = static_cast<std::size_t>(normalize_axis(n, n.attrs.get_int("axis", 0), static_cast<std::int64_t>(x.size())));
  auto split = has_input(in, 1) ? const_ints(n, in, 1, "split") : n.attrs.get_ints("split");
  const auto parts = static_cast<std::int64_t>(n.outputs.size());
  if (split.empty()) {
    if (parts == 0 || x[axis] % parts != 0)
      invalid(n, "dim " + std::to_string(x[axis]) + " cannot be split into " + std::to_string(parts) + " equal parts");
    split.assign(static_cast<std::size_t>(parts), x[axis] / parts);
  }
  std::int64_t sum = 0;
  for (auto v : split) {
    if (v < 0) invalid(n, "split " + ints_to_string(split) + " has a negative size");
    if (__builtin_add_overflow(sum, v, &sum)) invalid(n, "split " + ints_to_string(split) + " overflows an int64");
  }
  if (static_cast<std::int64_t>(split.size()) != parts || sum != x[axis])
    invalid(n, "split " + ints_to_string(split) + " does not divide dim " + std::to_string(x[axis]) + " into " + std::to_string(parts) + " outputs");
  return split;
}

OpDef split_op() {
  OpDef d;
  d.name = "Split";
  d.const_inputs = {1};
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 2);
    expect_fixed_size(n, in[0].dtype);
    std::size_t axis = 0;
    std::vector<ValueType> out;
    for (auto len : split_sizes(n, in, axis)) {
      Shape s = in[0].shape;
      s[axis] = len;
      out.push_back({in[0].dtype, s, nullptr});
    }
    return out;
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const auto axis = static_cast<std::size_t>(normalize_axis(n, n.attrs.get_int("axis", 0), in[0].rank()));
    const std::size_t es = dtype_size(in[0].dtype());
    std::int64_t outer = 0, inner = 0;
    outer_inner(in[0].shape(), axis, outer, inner);
    const std::int64_t in_row = in[0].dim(static_cast<std::int64_t>(axis)) * inner;
    const auto* src = static_cast<const std::byte*>(in[0].raw());
    std::int64_t at = 0;
    for (auto& t : out) {
      if (!t.defined()) continue;  // unused optional output: the planner may leave it out
      const std::int64_t row = t.dim(static_cast<std::int64_t>(axis)) * inner;
      auto* dst = static_cast<std::byte*>(t.raw());
      if (row == 0) continue;  // an empty output has no storage (memcpy to null is UB)
      parallel_for(outer, row, [&](std::int64_t r) {
        std::memcpy(dst + static_cast<std::size_t>(r * row) * es, src + static_cast<std::size_t>(r * in_row + at) * es, static_cast<std::size_t>(row) * es);
      });
      at += row;
    }
  };
  return d;
}

// ---- Gather / Transpose ------------------------------------------------------------------------
OpDef gather_op() {
  OpDef d;
  d.name = "Gather";
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 2, 2);
    expect_fixed_size(n, in[0].dtype);
    expect_dtype(n, in[1].dtype, {DType::I32, DType::I64}, "indices");
    const Shape& x = in[0].shape;
    const auto axis = static_cast<std::size_t>(normalize_axis(n, n.attrs.get_int("axis", 0), static_cast<std::int64_t>(x.size())));
    Shape out(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(axis));
    out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
    out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>(axis) + 1, x.end());
    return one(in[0].dtype, out);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const auto axis = static_cast<std::size_t>(normalize_axis(n, n.attrs.get_int("axis", 0), in[0].rank()));
    const auto idx = in[1].to_int64_vector();
    const std::int64_t dim = in[0].dim(static_cast<std::int64_t>(axis));
    const std::size_t es = dtype_size(in[0].dtype());
    std::int64_t outer = 0, inner = 0;
    outer_inner(in[0].shape(), axis, outer, inner);
    for (auto v : idx)
      if (v < -dim || v >= dim) throw Error(ErrorKind::InvalidInput, n.label() + ": index " + std::to_string(v) + " is out of range for dim " + std::to_string(dim));
    const auto* src = static_cast<const std::byte*>(in[0].raw());
    auto* dst = static_cast<std::byte*>(out[0].raw());
    const auto count = static_cast<std::int64_t>(idx.size());
    const std::size_t block = static_cast<std::size_t>(inner) * es;
    parallel_for(outer * count, inner, [&](std::int64_t job) {
      const std::int64_t r = job / count, j = job % count;
      const std::int64_t i = idx[static_cast<std::size_t>(j)] < 0 ? idx[static_cast<std::size_t>(j)] + dim : idx[static_cast<std::size_t>(j)];
      std::memcpy(dst + static_cast<std::size_t>(job) * block, src + static_cast<std::size_t>(r * dim + i) * block, block);
    });
  };
  return d;
}

std::vector<std::int64_t> perm_of(const Node& n, std::size_t rank) {
  std::vector<std::int64_t> def(rank);
  for (std::size_t i = 0; i < rank; ++i) def[i] = static_cast<std::int64_t>(rank - 1 - i);
  auto perm = n.attrs.get_ints("perm", def);
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank) invalid(n, "perm " + ints_to_string(perm) + " does not have " + std::to_string(rank) + " values");
  for (auto& p : perm) {
    p = normalize_axis(n, p, static_cast<std::int64_t>(rank), "perm value");
    if (seen[static_cast<std::size_t>(p)]) invalid(n, "perm " + ints_to_string(perm) + " is not a permutation");
    seen[static_cast<std::size_t>(p)] = true;
  }
  return perm;
}

OpDef transpose_op() {
  OpDef d;
  d.name = "Transpose";
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 1);
    expect_fixed_size(n, in[0].dtype);
    const auto perm = perm_of(n, in[0].shape.size());
    Shape out;
    for (auto p : perm) out.push_back(in[0].shape[static_cast<std::size_t>(p)]);
    return one(in[0].dtype, out);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    transpose_bytes(in[0].raw(), out[0].raw(), in[0].shape(), perm_of(n, static_cast<std::size_t>(in[0].rank())), dtype_size(in[0].dtype()));
  };
  return d;
}

}  // namespace
}  // namespace ops

void register_tensor_ops(OpRegistry& r) {
  r.add(ops::concat_op());
  r.add(ops::split_op());
  r.add(ops::map_op("Slice", {1, 2, 3, 4}, ops::slice_maps));
  r.add(ops::map_op("Pad", {1}, ops::pad_maps));
  r.add(ops::map_op("Tile", {1}, ops::tile_maps));
  r.add(ops::gather_op());
  r.add(ops::transpose_op());
}

}  // namespace qsmcore::graph
