// Broadcasting binary and n-ary operators: arithmetic (Add, Sub, Mul, Div, Pow), variadic
// Max/Min, PRelu, comparisons (Equal, Greater, Less) and Where.
#include <algorithm>
#include <cmath>

#include "graph/ops/common.h"

namespace qsmcore::graph {
namespace ops {
namespace {

/// out[i] = f(a[..], b[..]) over the broadcast of a and b into out's shape. Specialised inner
/// loops for the contiguous and scalar-operand cases keep the common paths vectorisable.
template <class A, class B, class R, class F>
void broadcast_binary(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const Broadcast bc(out.shape(), {a.shape(), b.shape()});
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  R* po = out.data<R>();
  const std::int64_t n = bc.inner(), sa = bc.inner_stride(0), sb = bc.inner_stride(1);
  parallel_for(bc.rows(), n, [&](std::int64_t r) {
    const A* x = pa + bc.row_offset(0, r);
    const B* y = pb + bc.row_offset(1, r);
    R* o = po + r * n;
    if (sa == 1 && sb == 1) {
      for (std::int64_t j = 0; j < n; ++j) o[j] = static_cast<R>(f(x[j], y[j]));
    } else if (sa == 0 && sb == 1) {
      const A xv = x[0];
      for (std::int64_t j = 0; j < n; ++j) o[j] = static_cast<R>(f(xv, y[j]));
    } else if (sa == 1 && sb == 0) {
      const B yv = y[0];
      for (std::int64_t j = 0; j < n; ++j) o[j] = static_cast<R>(f(x[j], yv));
    } else {
      for (std::int64_t j = 0; j < n; ++j) o[j] = static_cast<R>(f(x[j * sa], y[j * sb]));
    }
  });
}

void expect_same_numeric(const Node& n, const Inputs& in) {
  for (const auto& v : in) {
    if (!v.present()) invalid(n, "an input is missing");
    expect_arith(n, v.dtype);
    if (v.dtype != in[0].dtype)
      invalid(n, std::string("inputs have different dtypes (") + dtype_name(in[0].dtype) + " and " +
                     dtype_name(v.dtype) + ")");
  }
}

std::vector<Shape> shapes_of(const Inputs& in) {
  std::vector<Shape> s;
  for (const auto& v : in) s.push_back(v.shape);
  return s;
}

/// A two-input op whose output has the inputs' dtype (or Bool for comparisons). `make` gives
/// the element function for a C++ type.
template <class Make>
OpDef binary(const char* name, bool compare, Make make) {
  OpDef d;
  d.name = name;
  d.inplace_ok = !compare;
  d.infer = [compare](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 2, 2);
    if (compare && in[0].dtype == DType::Bool && in[1].dtype == DType::Bool)
      return one(DType::Bool, broadcast_shapes(n, shapes_of(in)));
    expect_same_numeric(n, in);
    return one(compare ? DType::Bool : in[0].dtype, broadcast_shapes(n, shapes_of(in)));
  };
  d.ref = [make, compare](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (compare) broadcast_binary<T, T, bool>(in[0], in[1], out[0], make(tag));
      else if constexpr (!std::is_same_v<T, bool>) broadcast_binary<T, T, T>(in[0], in[1], out[0], make(tag));
    });
  };
  return d;
}

template <class T>
T divide(T x, T y) {
  if constexpr (std::is_integral_v<T>) return y == 0 ? T(0) : static_cast<T>(x / y);  // no trap on /0
  else return x / y;
}

/// Variadic Max/Min: folds the inputs left to right into the broadcast output.
template <bool kMax>
OpDef extremum(const char* name) {
  OpDef d;
  d.name = name;
  d.inplace_ok = true;
  d.infer = [](const Node& n, const Inputs& in) {
    if (in.empty()) invalid(n, "expects at least one input");
    if (in[0].dtype == DType::F16) {
      for (const auto& v : in)
        if (v.dtype != DType::F16) invalid(n, "inputs have different dtypes");
    } else {
      expect_same_numeric(n, in);
    }
    return one(in[0].dtype, broadcast_shapes(n, shapes_of(in)));
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    auto pick = [](auto x, auto y) {
      // NaN propagates (numpy's maximum/minimum, which the ONNX reference uses).
      if (x != x) return x;
      if (y != y) return y;
      return kMax ? (x < y ? y : x) : (y < x ? y : x);
    };
    if (in[0].dtype() == DType::F16) {
      auto pick16 = [&](std::uint16_t x, std::uint16_t y) -> std::uint16_t {
        const float a = half_to_float(x), b = half_to_float(y);
        return pick(a, b) == a || a != a ? x : y;
      };
      if (in.size() == 1) broadcast_binary<std::uint16_t, std::uint16_t, std::uint16_t>(in[0], in[0], out[0], pick16);
      for (std::size_t k = 1; k < in.size(); ++k)
        broadcast_binary<std::uint16_t, std::uint16_t, std::uint16_t>(k == 1 ? in[0] : out[0], in[k], out[0], pick16);
      return;
    }
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto f = [&](T x, T y) { return static_cast<T>(pick(x, y)); };
      if (in.size() == 1) broadcast_binary<T, T, T>(in[0], in[0], out[0], f);
      for (std::size_t k = 1; k < in.size(); ++k) broadcast_binary<T, T, T>(k == 1 ? in[0] : out[0], in[k], out[0], f);
    });
  };
  return d;
}

// Pow allows a different exponent dtype (opset 12+); the result has the base's dtype and
// integer bases are computed in double, then converted, as the reference does.
OpDef pow_def() {
  OpDef d;
  d.name = "Pow";
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 2, 2);
    for (const auto& v : in) expect_arith(n, v.dtype);
    return one(in[0].dtype, broadcast_shapes(n, shapes_of(in)));
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    dispatch_numeric(n, in[0].dtype(), [&](auto tb) {
      using T = typename decltype(tb)::type;
      dispatch_numeric(n, in[1].dtype(), [&](auto te) {
        using E = typename decltype(te)::type;
        if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<E, bool>) {
          broadcast_binary<T, E, T>(in[0], in[1], out[0], [](T x, E y) {
            if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) return std::pow(x, y);
            else return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
          });
        }
      });
    });
  };
  return d;
}

/// Where on elements of U's size, copied as raw bits (any dtype of that size): the row loops
/// with contiguous or single-value operands vectorise (NeXtQSM's masked gradients, Where(mask,
/// g, 0) on full-resolution tensors, took 5 s a VJP element by element).
template <class U>
void where_rows(const Broadcast& bc, std::span<const Tensor> in, const Tensor& out) {
  const auto* c = in[0].data<std::uint8_t>();
  const auto* x = static_cast<const U*>(in[1].raw());
  const auto* y = static_cast<const U*>(in[2].raw());
  auto* o = static_cast<U*>(out.raw());
  const std::int64_t n = bc.inner(), sc = bc.inner_stride(0), sx = bc.inner_stride(1), sy = bc.inner_stride(2);
  parallel_for(bc.rows(), n, [&](std::int64_t r) {
    const std::uint8_t* cr = c + bc.row_offset(0, r);
    const U* xr = x + bc.row_offset(1, r);
    const U* yr = y + bc.row_offset(2, r);
    U* orow = o + r * n;
    if (sc == 1 && sx == 1 && sy == 0) {
      const U yv = yr[0];
      for (std::int64_t j = 0; j < n; ++j) orow[j] = cr[j] != 0 ? xr[j] : yv;
    } else if (sc == 1 && sx == 0 && sy == 1) {
      const U xv = xr[0];
      for (std::int64_t j = 0; j < n; ++j) orow[j] = cr[j] != 0 ? xv : yr[j];
    } else if (sc == 1 && sx == 1 && sy == 1) {
      for (std::int64_t j = 0; j < n; ++j) orow[j] = cr[j] != 0 ? xr[j] : yr[j];
    } else {
      for (std::int64_t j = 0; j < n; ++j) orow[j] = cr[j * sc] != 0 ? xr[j * sx] : yr[j * sy];
    }
  });
}

OpDef where_def() {
  OpDef d;
  d.name = "Where";
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 3, 3);
    expect_dtype(n, in[0].dtype, {DType::Bool}, "condition");
    if (in[1].dtype != in[2].dtype)
      invalid(n, std::string("X and Y have different dtypes (") + dtype_name(in[1].dtype) + " and " +
                     dtype_name(in[2].dtype) + ")");
    expect_fixed_size(n, in[1].dtype, "X");
    return one(in[1].dtype, broadcast_shapes(n, shapes_of(in)));
  };
  d.ref = [](const Node&, std::span<const Tensor> in, std::span<Tensor> out) {
    const Broadcast bc(out[0].shape(), {in[0].shape(), in[1].shape(), in[2].shape()});
    const std::size_t es = dtype_size(out[0].dtype());
    switch (es) {
      case 1:
        return where_rows<std::uint8_t>(bc, in, out[0]);
      case 2:
        return where_rows<std::uint16_t>(bc, in, out[0]);
      case 4:
        return where_rows<std::uint32_t>(bc, in, out[0]);
      case 8:
        return where_rows<std::uint64_t>(bc, in, out[0]);
      default:
        break;
    }
    const auto* c = in[0].data<std::uint8_t>();
    const auto* x = static_cast<const std::byte*>(in[1].raw());
    const auto* y = static_cast<const std::byte*>(in[2].raw());
    auto* o = static_cast<std::byte*>(out[0].raw());
    const std::int64_t n = bc.inner();
    parallel_for(bc.rows(), n, [&](std::int64_t r) {
      const std::int64_t oc = bc.row_offset(0, r), ox = bc.row_offset(1, r), oy = bc.row_offset(2, r);
      for (std::int64_t j = 0; j < n; ++j) {
        const bool take_x = c[oc + j * bc.inner_stride(0)] != 0;
        const std::int64_t src = take_x ? ox + j * bc.inner_stride(1) : oy + j * bc.inner_stride(2);
        std::memcpy(o + static_cast<std::size_t>(r * n + j) * es, (take_x ? x : y) + static_cast<std::size_t>(src) * es, es);
      }
    });
  };
  return d;
}

}  // namespace
}  // namespace ops

void register_binary_ops(OpRegistry& r) {
  using ops::binary;
#define QSM_BINARY(NAME, CMP, EXPR)                          \
  r.add(binary(NAME, CMP, [](auto tag) {                     \
    using T = typename decltype(tag)::type;                  \
    return [](T x, T y) { return EXPR; };                    \
  }))
  QSM_BINARY("Add", false, static_cast<T>(x + y));
  QSM_BINARY("Sub", false, static_cast<T>(x - y));
  QSM_BINARY("Mul", false, static_cast<T>(x * y));
  QSM_BINARY("Div", false, ops::divide(x, y));
  QSM_BINARY("PRelu", false, static_cast<T>(x > T(0) || x == T(0) ? x : x * y));
  QSM_BINARY("Equal", true, x == y);
  QSM_BINARY("Greater", true, x > y);
  QSM_BINARY("Less", true, x < y);
#undef QSM_BINARY
  r.add(ops::extremum<true>("Max"));
  r.add(ops::extremum<false>("Min"));
  r.add(ops::pow_def());
  r.add(ops::where_def());
}

}  // namespace qsmcore::graph
