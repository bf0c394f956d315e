// MaxPool (with optional Indices), AveragePool, GlobalAveragePool and GlobalMaxPool, 1-D to 3-D.
// Every (batch, channel) plane is computed by one thread.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/ops/window.h"

namespace qsmcore::graph {
namespace ops {
namespace {

Window pool_window(const Node& n, const Shape& x) {
  if (!n.attrs.has("kernel_shape")) invalid(n, "missing required attribute 'kernel_shape'");
  return window_3d(n, pool_geometry(n, x), x);
}

Shape with_spatial(const Shape& x, const Window& w) {
  Shape s{x[0], x[1]};
  s.insert(s.end(), w.out + (5 - x.size()), w.out + 3);
  return s;
}

template <class T, class F>
void for_each_plane(const Tensor& x, const Window& w3, F f) {
  const std::int64_t planes = x.dim(0) * x.dim(1);
  const std::int64_t in_plane = w3.in[0] * w3.in[1] * w3.in[2];
  const std::int64_t out_plane = w3.out[0] * w3.out[1] * w3.out[2];
  const std::int64_t k = w3.kernel[0] * w3.kernel[1] * w3.kernel[2];
  parallel_for(planes, out_plane * k, [&](std::int64_t p) { f(p, x.data<T>() + p * in_plane, p * out_plane); });
}

/// Calls visit(index_in_plane, d, h, w) for every window tap of output (od, oh, ow) that lies
/// inside the input; returns how many taps lie inside [-pad_begin, in + pad_end) (the padded
/// extent, for count_include_pad).
template <class V>
std::int64_t window_taps(const Window& w, std::int64_t od, std::int64_t oh, std::int64_t ow, V visit) {
  std::int64_t padded = 0;
  const std::int64_t o[3] = {od, oh, ow};
  std::int64_t start[3];
  for (int i = 0; i < 3; ++i) start[i] = o[i] * w.stride[i] - w.pad_begin[i];
  for (std::int64_t kd = 0; kd < w.kernel[0]; ++kd) {
    const std::int64_t d = start[0] + kd * w.dil[0];
    const bool din = d >= 0 && d < w.in[0], dpad = d >= -w.pad_begin[0] && d < w.in[0] + w.pad_end[0];
    for (std::int64_t kh = 0; kh < w.kernel[1]; ++kh) {
      const std::int64_t h = start[1] + kh * w.dil[1];
      const bool hin = h >= 0 && h < w.in[1], hpad = h >= -w.pad_begin[1] && h < w.in[1] + w.pad_end[1];
      for (std::int64_t kw = 0; kw < w.kernel[2]; ++kw) {
        const std::int64_t x = start[2] + kw * w.dil[2];
        const bool xin = x >= 0 && x < w.in[2], xpad = x >= -w.pad_begin[2] && x < w.in[2] + w.pad_end[2];
        if (dpad && hpad && xpad) ++padded;
        if (din && hin && xin) visit((d * w.in[1] + h) * w.in[2] + x, d, h, x);
      }
    }
  }
  return padded;
}

void check_x(const Node& n, const Inputs& in, bool floats_only) {
  expect_inputs(n, in, 1, 1);
  if (floats_only) expect_dtype(n, in[0].dtype, {DType::F32, DType::F64}, "X");
  else expect_dtype(n, in[0].dtype, {DType::F32, DType::F64, DType::U8, DType::I8}, "X");
}

OpDef max_pool() {
  OpDef d;
  d.name = "MaxPool";
  d.infer = [](const Node& n, const Inputs& in) {
    check_x(n, in, false);
    const Window w = pool_window(n, in[0].shape);
    const std::int64_t order = n.attrs.get_int("storage_order", 0);
    if (order != 0 && order != 1) invalid(n, "storage_order must be 0 or 1, got " + std::to_string(order));
    const Shape out = with_spatial(in[0].shape, w);
    std::vector<ValueType> res{{in[0].dtype, out, nullptr}};
    if (n.outputs.size() > 1) res.push_back({DType::I64, out, nullptr});
    return res;
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const Window w = pool_window(n, in[0].shape());
    const bool col_major = n.attrs.get_int("storage_order", 0) == 1;
    std::int64_t* idx = out.size() > 1 && out[1].defined() ? out[1].data<std::int64_t>() : nullptr;
    const std::int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* y = out[0].data<T>();
      for_each_plane<T>(in[0], w, [&](std::int64_t p, const T* x, std::int64_t obase) {
        std::int64_t o = obase;
        for (std::int64_t od = 0; od < w.out[0]; ++od)
          for (std::int64_t oh = 0; oh < w.out[1]; ++oh)
            for (std::int64_t ow = 0; ow < w.out[2]; ++ow, ++o) {
              T best = std::numeric_limits<T>::lowest();
              if constexpr (std::is_floating_point_v<T>) best = -std::numeric_limits<T>::infinity();
              std::int64_t at = -1, bd = 0, bh = 0, bw = 0;
              window_taps(w, od, oh, ow, [&](std::int64_t i, std::int64_t dd, std::int64_t hh, std::int64_t ww) {
                if (at < 0 || x[i] > best) best = x[i], at = i, bd = dd, bh = hh, bw = ww;
              });
              y[o] = best;
              if (idx) {
                // Indices are flat over the whole input, row- or column-major within a plane.
                const std::int64_t in_p = col_major ? (bw * w.in[1] + bh) * w.in[0] + bd : at;
                idx[o] = p * in_plane + in_p;
              }
            }
      });
    });
  };
  return d;
}

OpDef average_pool() {
  OpDef d;
  d.name = "AveragePool";
  d.infer = [](const Node& n, const Inputs& in) {
    check_x(n, in, true);
    return one(in[0].dtype, with_spatial(in[0].shape, pool_window(n, in[0].shape)));
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const Window w = pool_window(n, in[0].shape());
    const bool include_pad = n.attrs.get_int("count_include_pad", 0) != 0;
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T>) {
        T* y = out[0].data<T>();
        for_each_plane<T>(in[0], w, [&](std::int64_t, const T* x, std::int64_t obase) {
          std::int64_t o = obase;
          for (std::int64_t od = 0; od < w.out[0]; ++od)
            for (std::int64_t oh = 0; oh < w.out[1]; ++oh)
              for (std::int64_t ow = 0; ow < w.out[2]; ++ow, ++o) {
                T sum = 0;
                std::int64_t inside = 0;
                const std::int64_t padded = window_taps(w, od, oh, ow, [&](std::int64_t i, auto, auto, auto) {
                  sum += x[i];
                  ++inside;
                });
                const std::int64_t count = include_pad ? padded : inside;
                y[o] = count > 0 ? sum / static_cast<T>(count) : T(0);
              }
        });
      }
    });
  };
  return d;
}

template <bool kMax>
OpDef global_pool(const char* name) {
  OpDef d;
  d.name = name;
  d.infer = [](const Node& n, const Inputs& in) {
    check_x(n, in, true);
    if (in[0].shape.size() < 3) invalid(n, "X must have rank >= 3, got " + shape_to_string(in[0].shape));
    Shape out = in[0].shape;
    std::fill(out.begin() + 2, out.end(), 1);
    return one(in[0].dtype, out);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const std::int64_t planes = in[0].dim(0) * in[0].dim(1), size = in[0].numel() / std::max<std::int64_t>(planes, 1);
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T>) {
        const T* x = in[0].data<T>();
        T* y = out[0].data<T>();
        parallel_for(planes, size, [&](std::int64_t p) {
          const T* xp = x + p * size;
          if constexpr (kMax) {
            T m = -std::numeric_limits<T>::infinity();
            for (std::int64_t i = 0; i < size; ++i) m = std::max(m, xp[i]);
            y[p] = m;
          } else {
            double s = 0;  // double: planes of 64^3 elements would lose digits in float
            for (std::int64_t i = 0; i < size; ++i) s += xp[i];
            y[p] = static_cast<T>(s / static_cast<double>(size));
          }
        });
      }
    });
  };
  return d;
}

}  // namespace
}  // namespace ops

void register_pool_ops(OpRegistry& r) {
  r.add(ops::max_pool());
  r.add(ops::average_pool());
  r.add(ops::global_pool<false>("GlobalAveragePool"));
  r.add(ops::global_pool<true>("GlobalMaxPool"));
}

}  // namespace qsmcore::graph
