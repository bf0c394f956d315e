// Softmax and LogSoftmax. Up to opset 12 the input is coerced to 2-D at `axis` (default 1) and
// normalised over everything from `axis` on; from opset 13 only the single `axis` (default -1)
// is normalised. Both reduce to "outer x len x inner" views of the input.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/ops/common.h"

namespace qsmcore::graph {
namespace ops {
namespace {

struct SoftmaxView {
  std::int64_t outer = 1, len = 1, inner = 1;
};

SoftmaxView softmax_view(const Node& n, const Shape& s) {
  const auto rank = static_cast<std::int64_t>(s.size());
  const std::int64_t opset = node_opset(n);
  const bool legacy = opset > 0 && opset < 13;
  const std::int64_t axis = normalize_axis(n, n.attrs.get_int("axis", legacy ? 1 : -1), rank);
  SoftmaxView v;
  for (std::int64_t i = 0; i < rank; ++i) {
    const std::int64_t d = s[static_cast<std::size_t>(i)];
    if (i < axis) v.outer *= d;
    else if (i == axis || legacy) v.len *= d;
    else v.inner *= d;
  }
  return v;
}

template <bool kLog>
OpDef softmax_def(const char* name) {
  OpDef d;
  d.name = name;
  d.inplace_ok = true;
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 1);
    expect_dtype(n, in[0].dtype, {DType::F32, DType::F64});
    softmax_view(n, in[0].shape);  // validates the axis
    return one(in[0].dtype, in[0].shape);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const SoftmaxView v = softmax_view(n, in[0].shape());
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T>) {
        const T* x = in[0].data<T>();
        T* y = out[0].data<T>();
        // One (outer, inner) line per iteration; max-subtraction keeps exp in range.
        parallel_for(v.outer * v.inner, v.len * 4, [&](std::int64_t line) {
          const std::int64_t o = line / v.inner, i = line % v.inner;
          const T* xl = x + o * v.len * v.inner + i;
          T* yl = y + o * v.len * v.inner + i;
          T mx = -std::numeric_limits<T>::infinity();
          for (std::int64_t k = 0; k < v.len; ++k) mx = std::max(mx, xl[k * v.inner]);
          T sum = 0;
          for (std::int64_t k = 0; k < v.len; ++k) sum += std::exp(xl[k * v.inner] - mx);
          if constexpr (kLog) {
            const T lse = std::log(sum);
            for (std::int64_t k = 0; k < v.len; ++k) yl[k * v.inner] = xl[k * v.inner] - mx - lse;
          } else {
            const T inv = T(1) / sum;
            for (std::int64_t k = 0; k < v.len; ++k) yl[k * v.inner] = std::exp(xl[k * v.inner] - mx) * inv;
          }
        });
      }
    });
  };
  return d;
}

}  // namespace
}  // namespace ops

void register_softmax_ops(OpRegistry& r) {
  r.add(ops::softmax_def<false>("Softmax"));
  r.add(ops::softmax_def<true>("LogSoftmax"));
}

}  // namespace qsmcore::graph
