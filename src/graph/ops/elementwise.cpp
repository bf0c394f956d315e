// Unary elementwise operators: activations, math functions, Clip, Not, Identity and Cast.
// Softmax and LogSoftmax are registered from softmax.cpp (same family, own file).
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/ops/common.h"

namespace qsmcore::graph {
void register_softmax_ops(OpRegistry& r);

namespace ops {
namespace {

constexpr std::int64_t kChunk = 16384;

/// Applies f to every element of in, writing out (which may alias in), in fixed chunks.
template <class T, class U, class F>
void map_elements(const T* in, U* out, std::int64_t n, F f) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, kChunk, [&](std::int64_t c) {
    const std::int64_t end = std::min(n, (c + 1) * kChunk);
    for (std::int64_t i = c * kChunk; i < end; ++i) out[i] = static_cast<U>(f(in[i]));
  });
}

/// A same-shape unary op. `make` builds the per-element function from the node's attributes
/// (once per call, so attributes are read outside the loop); kFloatsOnly restricts it to
/// F32/F64, otherwise every numeric dtype is accepted.
template <bool kFloatsOnly, class Make>
OpDef unary(const char* name, Make make) {
  constexpr bool floats_only = kFloatsOnly;
  OpDef d;
  d.name = name;
  d.inplace_ok = true;
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 1);
    if (floats_only) expect_dtype(n, in[0].dtype, {DType::F32, DType::F64});
    else expect_arith(n, in[0].dtype);
    return one(in[0].dtype, in[0].shape);
  };
  d.ref = [make](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, bool> && (!kFloatsOnly || std::is_floating_point_v<T>)) {
        auto f = make(n, tag);
        map_elements(in[0].data<T>(), out[0].data<T>(), in[0].numel(), f);
      }
    });
  };
  return d;
}

template <class T>
constexpr bool kSigned = std::is_signed_v<T>;

void register_math(OpRegistry& r) {
  r.add(unary<false>("Relu", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return x > T(0) ? x : T(0); };
  }));
  r.add(unary<false>("Abs", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) -> T {
      if constexpr (kSigned<T>) return x < T(0) ? static_cast<T>(-x) : x;
      else return x;
    };
  }));
  r.add(unary<false>("Neg", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return static_cast<T>(-x); };
  }));
  r.add(unary<true>("LeakyRelu", [](const Node& n, auto tag) {
    using T = typename decltype(tag)::type;
    const T a = n.attrs.get_float("alpha", 0.01f);
    return [a](T x) { return x >= T(0) ? x : a * x; };
  }));
  r.add(unary<true>("Elu", [](const Node& n, auto tag) {
    using T = typename decltype(tag)::type;
    const T a = n.attrs.get_float("alpha", 1.0f);
    return [a](T x) { return x >= T(0) ? x : a * std::expm1(x); };
  }));
  r.add(unary<true>("Selu", [](const Node& n, auto tag) {
    using T = typename decltype(tag)::type;
    const T a = n.attrs.get_float("alpha", 1.67326319217681884765625f);
    const T g = n.attrs.get_float("gamma", 1.05070102214813232421875f);
    return [a, g](T x) { return x > T(0) ? g * x : g * (a * std::exp(x) - a); };
  }));
  r.add(unary<true>("Sigmoid", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    // Split by sign so that exp never overflows.
    return [](T x) {
      if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
      const T e = std::exp(x);
      return e / (T(1) + e);
    };
  }));
  r.add(unary<true>("Tanh", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return std::tanh(x); };
  }));
  r.add(unary<true>("Exp", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return std::exp(x); };
  }));
  r.add(unary<true>("Log", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return std::log(x); };
  }));
  r.add(unary<true>("Sqrt", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return std::sqrt(x); };
  }));
  // Needed by the iQSM/iQFM twins (LoT layer) and NeXtQSM's VJP graph.
  r.add(unary<true>("Sin", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return std::sin(x); };
  }));
  r.add(unary<true>("Cos", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return std::cos(x); };
  }));
  r.add(unary<true>("Reciprocal", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return T(1) / x; };
  }));
  r.add(unary<false>("Sign", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return static_cast<T>((T(0) < x) - (x < T(0))); };
  }));
  r.add(unary<true>("Erf", [](const Node&, auto tag) {
    using T = typename decltype(tag)::type;
    return [](T x) { return std::erf(x); };
  }));
}

// Clip: bounds are attributes up to opset 10 and optional (scalar) inputs from opset 11. The
// inputs need not be constants: they are read when the node runs.
void register_clip(OpRegistry& r) {
  OpDef d;
  d.name = "Clip";
  d.inplace_ok = true;
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 3);
    expect_arith(n, in[0].dtype);
    for (std::size_t i = 1; i < in.size(); ++i) {
      if (!in[i].present()) continue;
      if (in[i].dtype != in[0].dtype)
        invalid(n, std::string(i == 1 ? "min" : "max") + " has dtype " + dtype_name(in[i].dtype) + ", expected " +
                       dtype_name(in[0].dtype));
      if (numel(in[i].shape) != 1) invalid(n, std::string(i == 1 ? "min" : "max") + " must be a scalar");
    }
    return one(in[0].dtype, in[0].shape);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
      if constexpr (std::is_floating_point_v<T>) {
        lo = -std::numeric_limits<T>::infinity();
        hi = std::numeric_limits<T>::infinity();
        lo = static_cast<T>(n.attrs.get_float("min", static_cast<float>(lo)));
        hi = static_cast<T>(n.attrs.get_float("max", static_cast<float>(hi)));
      }
      if (has_input(in, 1)) lo = in[1].data<T>()[0];
      if (has_input(in, 2)) hi = in[2].data<T>()[0];
      map_elements(in[0].data<T>(), out[0].data<T>(), in[0].numel(), [lo, hi](T x) {
        // min(max(x, lo), hi), as the spec and its reference implementation order them.
        return x < lo ? lo : (x > hi ? hi : x);
      });
    });
  };
  r.add(std::move(d));
}

void register_logic_identity(OpRegistry& r) {
  OpDef d;
  d.name = "Not";
  d.inplace_ok = true;
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 1);
    expect_dtype(n, in[0].dtype, {DType::Bool});
    return one(DType::Bool, in[0].shape);
  };
  d.ref = [](const Node&, std::span<const Tensor> in, std::span<Tensor> out) {
    map_elements(in[0].data<std::uint8_t>(), out[0].data<std::uint8_t>(), in[0].numel(),
                 [](std::uint8_t x) { return x ? 0 : 1; });
  };
  r.add(std::move(d));

  OpDef id;
  id.name = "Identity";
  id.inplace_ok = true;
  id.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 1);
    expect_fixed_size(n, in[0].dtype);
    return one(in[0].dtype, in[0].shape);
  };
  id.ref = [](const Node&, std::span<const Tensor> in, std::span<Tensor> out) {
    if (in[0].raw() != out[0].raw() && in[0].nbytes()) std::memcpy(out[0].raw(), in[0].raw(), in[0].nbytes());
  };
  r.add(std::move(id));
}

// ---- Cast ---------------------------------------------------------------------------------
bool castable(DType t) { return t == DType::F16 || t == DType::BF16 || (t != DType::String && dtype_size(t) > 0); }

template <class U>
void cast_to(const Node& n, const Tensor& in, U* out) {
  const std::int64_t count = in.numel();
  auto convert = [&](auto src) { map_elements(src, out, count, [](auto x) { return static_cast<U>(x); }); };
  if (in.dtype() == DType::F16 || in.dtype() == DType::BF16) {
    const bool half = in.dtype() == DType::F16;
    map_elements(in.data<std::uint16_t>(), out, count,
                 [half](std::uint16_t b) { return static_cast<U>(half ? half_to_float(b) : bf16_to_float(b)); });
    return;
  }
  dispatch_numeric(n, in.dtype(), [&](auto tag) { convert(in.data<typename decltype(tag)::type>()); });
}

void register_cast(OpRegistry& r) {
  OpDef d;
  d.name = "Cast";
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 1);
    const auto* to = n.attrs.find("to");
    if (to == nullptr) invalid(n, "missing required attribute 'to'");
    const std::int64_t code = n.attrs.get_int("to", 0);
    if (!dtype_known(static_cast<std::int32_t>(code)) || code == 0)
      unsupported(n, "unsupported target type code " + std::to_string(code));
    const auto t = static_cast<DType>(code);
    if (!castable(t) || !castable(in[0].dtype))
      unsupported(n, std::string("cast from ") + dtype_name(in[0].dtype) + " to " + dtype_name(t) + " is not supported");
    return one(t, in[0].shape);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const DType to = out[0].dtype();
    if (to == in[0].dtype()) {
      if (in[0].nbytes()) std::memcpy(out[0].raw(), in[0].raw(), in[0].nbytes());
      return;
    }
    if (to == DType::F16 || to == DType::BF16) {
      // Through float: exact for every source but F64, where double rounding is within a half ulp.
      Tensor tmp = Tensor::empty(DType::F32, in[0].shape(), MemCategory::Scratch);
      cast_to(n, in[0], tmp.data<float>());
      const bool half = to == DType::F16;
      map_elements(tmp.data<float>(), out[0].data<std::uint16_t>(), tmp.numel(),
                   [half](float x) { return half ? float_to_half(x) : float_to_bf16(x); });
      return;
    }
    dispatch_numeric(n, to, [&](auto tag) { cast_to(n, in[0], out[0].data<typename decltype(tag)::type>()); });
  };
  r.add(std::move(d));
}

}  // namespace
}  // namespace ops

void register_elementwise_ops(OpRegistry& r) {
  ops::register_math(r);
  ops::register_clip(r);
  ops::register_logic_identity(r);
  ops::register_cast(r);
  register_softmax_ops(r);
}

}  // namespace qsmcore::graph
