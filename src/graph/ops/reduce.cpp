// ReduceSum and ReduceMean: axes as attribute (all opsets of ReduceMean up to 17, ReduceSum up
// to 12) or as an optional constant input (ReduceSum 13+), keepdims, noop_with_empty_axes.
// Each output element is reduced by one thread, floats accumulating in double.
#include <algorithm>

#include "graph/ops/common.h"

namespace qsmcore::graph {
namespace ops {
namespace {

/// Which dims are reduced; all of them when no axes are given (unless noop_with_empty_axes).
std::vector<bool> reduced_dims(const Node& n, const Inputs& in) {
  const auto rank = static_cast<std::int64_t>(in[0].shape.size());
  const bool from_input = has_input(in, 1);
  const auto axes = from_input ? const_ints(n, in, 1, "axes") : n.attrs.get_ints("axes");
  const bool noop = n.attrs.get_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> mask(static_cast<std::size_t>(rank), axes.empty() && !noop);
  for (auto a : axes) mask[static_cast<std::size_t>(normalize_axis(n, a, rank, "axes value"))] = true;
  return mask;
}

Shape reduced_shape(const Shape& x, const std::vector<bool>& mask, bool keep) {
  Shape out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!mask[i]) out.push_back(x[i]);
    else if (keep) out.push_back(1);
  }
  return out;
}

template <bool kMean>
OpDef reduce_op(const char* name) {
  OpDef d;
  d.name = name;
  d.const_inputs = {1};
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 2);
    expect_arith(n, in[0].dtype);
    const auto mask = reduced_dims(n, in);
    return one(in[0].dtype, reduced_shape(in[0].shape, mask, n.attrs.get_int("keepdims", 1) != 0));
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    Inputs types = types_of(in);
    if (has_input(in, 1)) types[1].value = &in[1];
    const auto mask = reduced_dims(n, types);
    const Shape& x = in[0].shape();
    const auto st = strides_of(x);
    Shape kept_dims, red_dims;
    std::vector<std::int64_t> kept_st, red_st;
    for (std::size_t i = 0; i < x.size(); ++i) {
      (mask[i] ? red_dims : kept_dims).push_back(x[i]);
      (mask[i] ? red_st : kept_st).push_back(st[i]);
    }
    if (red_dims.empty()) red_dims.push_back(1), red_st.push_back(0);
    const std::int64_t inner = red_dims.back(), inner_st = red_st.back();
    const std::int64_t count = numel(red_dims), rows = count / std::max<std::int64_t>(inner, 1);
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, bool>) {
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
      const T* px = in[0].data<T>();
      T* py = out[0].data<T>();
      parallel_for(out[0].numel(), count, [&](std::int64_t o) {
        std::int64_t base = 0, rem = o;
        for (std::size_t k = kept_dims.size(); k-- > 0;) {
          base += (rem % kept_dims[k]) * kept_st[k];
          rem /= kept_dims[k];
        }
        Acc acc = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
          std::int64_t off = base, rr = r;
          for (std::size_t k = red_dims.size() - 1; k-- > 0;) {
            off += (rr % red_dims[k]) * red_st[k];
            rr /= red_dims[k];
          }
          for (std::int64_t j = 0; j < inner; ++j) acc += static_cast<Acc>(px[off + j * inner_st]);
        }
        if constexpr (kMean) acc = count > 0 ? static_cast<Acc>(acc / static_cast<Acc>(count)) : Acc(0);
        py[o] = static_cast<T>(acc);
      });
      }
    });
  };
  return d;
}

}  // namespace
}  // namespace ops

void register_reduce_ops(OpRegistry& r) {
  r.add(ops::reduce_op<false>("ReduceSum"));
  r.add(ops::reduce_op<true>("ReduceMean"));
}

}  // namespace qsmcore::graph
