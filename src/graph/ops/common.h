// Helpers shared by the operator families: error reporting with the node's label, attribute and
// constant-input reading, axis normalisation, dtype dispatch, multidirectional broadcasting and
// float16/bfloat16 conversion (half.h).
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "graph/op_registry.h"
#include "graph/ops/half.h"
#include "qsmcore/error.h"

namespace qsmcore::graph::ops {

using Inputs = std::vector<ValueType>;

/// Throws Error(kind, "node 'x' (Op): what").
[[noreturn]] void fail(const Node& n, ErrorKind kind, const std::string& what);
[[noreturn]] inline void invalid(const Node& n, const std::string& what) { fail(n, ErrorKind::InvalidModel, what); }
[[noreturn]] inline void unsupported(const Node& n, const std::string& what) { fail(n, ErrorKind::Unsupported, what); }

std::string ints_to_string(const std::vector<std::int64_t>& v);

/// The default-domain opset the node was written against (0 = unknown: treated as latest).
/// Only a few ops (Softmax, LogSoftmax) change meaning between versions invisibly.
inline std::int64_t node_opset(const Node& n) { return n.opset; }

/// Maps axis in [-rank, rank-1] to [0, rank-1]; throws InvalidModel otherwise.
std::int64_t normalize_axis(const Node& n, std::int64_t axis, std::int64_t rank, const char* what = "axis");

// ---- inputs -------------------------------------------------------------------------------
inline bool has_input(const Inputs& in, std::size_t i) { return i < in.size() && in[i].present(); }
inline bool has_input(std::span<const Tensor> in, std::size_t i) { return i < in.size() && in[i].defined(); }
/// Checks the input count is within [lo, hi].
void expect_inputs(const Node& n, const Inputs& in, std::size_t lo, std::size_t hi);
/// Values of a constant integer input (e.g. Reshape's shape); throws Unsupported when the
/// input is not a plan-time constant, naming `what`.
std::vector<std::int64_t> const_ints(const Node& n, const Inputs& in, std::size_t i, const char* what);
/// Values of a constant float input.
std::vector<float> const_floats(const Node& n, const Inputs& in, std::size_t i, const char* what);

/// Types of run-time tensors, for ref functions that re-derive shapes with infer helpers.
Inputs types_of(std::span<const Tensor> in);
/// Single-output result.
inline std::vector<ValueType> one(DType t, Shape s) { return {ValueType{t, std::move(s), nullptr}}; }

// ---- dtypes -------------------------------------------------------------------------------
bool is_float(DType t);    // F32 / F64 / F16 / BF16
bool is_integer(DType t);  // signed or unsigned, not bool
void expect_dtype(const Node& n, DType got, std::initializer_list<DType> allowed, const char* what = "input");
void expect_float(const Node& n, DType got, const char* what = "input");  // F32 only (compute ops)
/// F32, F64 or an integer type: what arithmetic kernels are instantiated for.
bool is_arith(DType t);
void expect_arith(const Node& n, DType got, const char* what = "input");
/// Any dtype with a fixed element size (not String): what data-movement ops copy.
void expect_fixed_size(const Node& n, DType got, const char* what = "input");

template <class T>
struct Tag {
  using type = T;
};

/// Calls f(Tag<T>{}) for the C++ type of a numeric dtype (F32, F64, all integers, Bool).
/// F16/BF16/String are not numeric here: callers convert or refuse them.
template <class F>
decltype(auto) dispatch_numeric(const Node& n, DType t, F&& f) {
  switch (t) {
    case DType::F32: return f(Tag<float>{});
    case DType::F64: return f(Tag<double>{});
    case DType::I8: return f(Tag<std::int8_t>{});
    case DType::I16: return f(Tag<std::int16_t>{});
    case DType::I32: return f(Tag<std::int32_t>{});
    case DType::I64: return f(Tag<std::int64_t>{});
    case DType::U8: return f(Tag<std::uint8_t>{});
    case DType::U16: return f(Tag<std::uint16_t>{});
    case DType::U32: return f(Tag<std::uint32_t>{});
    case DType::U64: return f(Tag<std::uint64_t>{});
    case DType::Bool: return f(Tag<bool>{});
    default: unsupported(n, std::string("dtype ") + dtype_name(t) + " is not supported");
  }
}

// ---- shapes and strides -------------------------------------------------------------------
/// Row-major element strides.
std::vector<std::int64_t> strides_of(const Shape& s);
/// Multidirectional (numpy) broadcast of several shapes; throws InvalidModel when incompatible.
Shape broadcast_shapes(const Node& n, const std::vector<Shape>& shapes);

/// Iteration plan for an n-ary broadcast: the output is walked as rows of `inner` elements;
/// input k's element for output row r, column j is at row_offset(k, r) + j * inner_stride[k].
/// Adjacent dims that broadcast alike are merged so that the inner loop is as long as possible.
class Broadcast {
 public:
  Broadcast(const Shape& out, const std::vector<Shape>& ins);
  std::int64_t rows() const { return rows_; }
  std::int64_t inner() const { return inner_; }
  std::int64_t inner_stride(std::size_t k) const { return inner_stride_[k]; }
  std::int64_t row_offset(std::size_t k, std::int64_t row) const;

 private:
  Shape outer_dims_;                                // merged dims except the last
  std::vector<std::vector<std::int64_t>> strides_;  // per input, per outer dim
  std::vector<std::int64_t> inner_stride_;
  std::int64_t rows_ = 1, inner_ = 1;
};

/// Copies a row-major tensor's elements permuted: out[dims permuted by perm] (Transpose).
void transpose_bytes(const void* src, void* dst, const Shape& in_shape, const std::vector<std::int64_t>& perm,
                     std::size_t elem);

/// Parallel-for over [0, n) when the work is large enough to be worth threads.
/// Each index runs on exactly one thread, so results do not depend on the thread count.
template <class F>
void parallel_for(std::int64_t n, std::int64_t work_per_item, F&& f) {
  qsmcore::parallel_for(n, n > 1 && n * work_per_item > 32768, std::forward<F>(f));
}

}  // namespace qsmcore::graph::ops
