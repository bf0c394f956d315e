// MatMul (numpy semantics: 1-D promotion, broadcast batch dims) and Gemm (transA/transB,
// alpha, beta, C broadcast to [M, N]). Rows of the output are distributed over threads; each
// row is accumulated over k in order, with the innermost loop over contiguous output columns.
#include <algorithm>

#include "graph/ops/common.h"

namespace qsmcore::graph {
namespace ops {
namespace {

void expect_matmul_dtype(const Node& n, const Inputs& in) {
  for (const auto& v : in) {
    if (!v.present()) continue;
    expect_arith(n, v.dtype);
    if (v.dtype != in[0].dtype) invalid(n, "inputs have different dtypes");
  }
}

struct MatMulShape {
  Shape batch;                 // broadcast batch dims
  Shape a_batch, b_batch;      // each operand's own batch dims
  std::int64_t m = 1, k = 1, n = 1;
  Shape out;
};

MatMulShape matmul_shape(const Node& node, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) invalid(node, "inputs must have rank >= 1");
  MatMulShape s;
  const Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;
  const Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  s.m = a2[a2.size() - 2];
  s.k = a2.back();
  s.n = b2.back();
  if (b2[b2.size() - 2] != s.k)
    invalid(node, "cannot multiply " + shape_to_string(a) + " by " + shape_to_string(b) + ": inner dims differ");
  s.a_batch.assign(a2.begin(), a2.end() - 2);
  s.b_batch.assign(b2.begin(), b2.end() - 2);
  s.batch = broadcast_shapes(node, {s.a_batch, s.b_batch});
  s.out = s.batch;
  if (a.size() > 1) s.out.push_back(s.m);
  if (b.size() > 1) s.out.push_back(s.n);
  return s;
}

template <class T>
void matmul_kernel(const MatMulShape& s, const T* a, const T* b, T* y) {
  const Broadcast bc(s.batch, {s.a_batch, s.b_batch});
  const std::int64_t batches = numel(s.batch), mk = s.m * s.k, kn = s.k * s.n;
  parallel_for(batches * s.m, s.k * s.n, [&](std::int64_t job) {
    const std::int64_t bi = job / s.m, i = job % s.m;
    // Batch index -> operand offsets (through the broadcast plan's rows and inner columns).
    const std::int64_t row = bc.inner() ? bi / bc.inner() : 0, col = bc.inner() ? bi % bc.inner() : 0;
    const T* ap = a + (bc.row_offset(0, row) + col * bc.inner_stride(0)) * mk + i * s.k;
    const T* bp = b + (bc.row_offset(1, row) + col * bc.inner_stride(1)) * kn;
    T* yr = y + job * s.n;
    std::fill(yr, yr + s.n, T(0));
    for (std::int64_t k = 0; k < s.k; ++k) {
      const T av = ap[k];
      const T* br = bp + k * s.n;
      for (std::int64_t j = 0; j < s.n; ++j) yr[j] += av * br[j];
    }
  });
}

OpDef matmul_op() {
  OpDef d;
  d.name = "MatMul";
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 2, 2);
    expect_matmul_dtype(n, in);
    return one(in[0].dtype, matmul_shape(n, in[0].shape, in[1].shape).out);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const MatMulShape s = matmul_shape(n, in[0].shape(), in[1].shape());
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, bool>) matmul_kernel<T>(s, in[0].data<T>(), in[1].data<T>(), out[0].data<T>());
    });
  };
  return d;
}

struct GemmShape {
  std::int64_t m = 0, k = 0, n = 0;
  bool ta = false, tb = false;
};

GemmShape gemm_shape(const Node& n, const Inputs& in) {
  expect_inputs(n, in, 2, 3);
  expect_matmul_dtype(n, in);
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (a.size() != 2 || b.size() != 2) invalid(n, "A and B must be 2-D, got " + shape_to_string(a) + " and " + shape_to_string(b));
  GemmShape g;
  g.ta = n.attrs.get_int("transA", 0) != 0;
  g.tb = n.attrs.get_int("transB", 0) != 0;
  g.m = g.ta ? a[1] : a[0];
  g.k = g.ta ? a[0] : a[1];
  g.n = g.tb ? b[0] : b[1];
  if ((g.tb ? b[1] : b[0]) != g.k) invalid(n, "cannot multiply " + shape_to_string(a) + " by " + shape_to_string(b) + " with the given transA/transB");
  if (has_input(in, 2) && broadcast_shapes(n, {{g.m, g.n}, in[2].shape}) != Shape{g.m, g.n})
    invalid(n, "C " + shape_to_string(in[2].shape) + " does not broadcast to [" + std::to_string(g.m) + "," + std::to_string(g.n) + "]");
  return g;
}

template <class T>
void gemm_kernel(const Node& n, const GemmShape& g, std::span<const Tensor> in, T* y) {
  const T alpha = static_cast<T>(n.attrs.get_float("alpha", 1.0f)), beta = static_cast<T>(n.attrs.get_float("beta", 1.0f));
  const T* a = in[0].data<T>();
  const T* b = in[1].data<T>();
  const bool has_c = has_input(in, 2);
  const Broadcast bc(Shape{g.m, g.n}, {has_c ? in[2].shape() : Shape{}});
  parallel_for(g.m, g.k * g.n, [&](std::int64_t i) {
    T* yr = y + i * g.n;
    std::fill(yr, yr + g.n, T(0));
    for (std::int64_t k = 0; k < g.k; ++k) {
      const T av = g.ta ? a[k * g.m + i] : a[i * g.k + k];
      if (g.tb) {
        for (std::int64_t j = 0; j < g.n; ++j) yr[j] += av * b[j * g.k + k];
      } else {
        const T* br = b + k * g.n;
        for (std::int64_t j = 0; j < g.n; ++j) yr[j] += av * br[j];
      }
    }
    for (std::int64_t j = 0; j < g.n; ++j) yr[j] = static_cast<T>(alpha * yr[j]);
    if (has_c) {
      const T* c = in[2].data<T>();
      // The Broadcast plan walks [M, N] as rows x inner; element (i, j) is flat i*N + j.
      for (std::int64_t j = 0; j < g.n; ++j) {
        const std::int64_t flat = i * g.n + j, r = flat / bc.inner(), col = flat % bc.inner();
        yr[j] = static_cast<T>(yr[j] + beta * c[bc.row_offset(0, r) + col * bc.inner_stride(0)]);
      }
    }
  });
}

OpDef gemm_op() {
  OpDef d;
  d.name = "Gemm";
  d.infer = [](const Node& n, const Inputs& in) {
    const GemmShape g = gemm_shape(n, in);
    return one(in[0].dtype, {g.m, g.n});
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    const GemmShape g = gemm_shape(n, types_of(in));
    dispatch_numeric(n, in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, bool>) gemm_kernel<T>(n, g, in, out[0].data<T>());
    });
  };
  return d;
}

}  // namespace
}  // namespace ops

void register_matmul_ops(OpRegistry& r) {
  r.add(ops::matmul_op());
  r.add(ops::gemm_op());
}

}  // namespace qsmcore::graph
