// Krylov least-squares solvers on f32 vectors with f64 scalars, for operators given as fused
// products so that no vector beyond the solvers' own is allocated: LSMR (Fong & Saunders 2011,
// doi:10.1137/10079687X; RTS's first step, iLSQR's third) and LSQR (Paige & Saunders 1982,
// doi:10.1145/355984.355989; iLSQR's first step).
#pragma once
#include <cstdint>
#include <functional>

#include "core/accounted_array.h"

namespace qsmcore::inversion {

struct LinearOperator {
  std::int64_t m = 0;  // floats in a data-space vector (u)
  std::int64_t n = 0;  // floats in a solution-space vector (v, x)
  /// u ← A·v − alpha·u
  std::function<void(const float* v, double alpha, float* u)> a_step;
  /// v ← Aᵀ·u − beta·v
  std::function<void(const float* u, double beta, float* v)> at_step;
  /// The norms of each space (the caller's inner product: a half spectrum weights its twins).
  std::function<double(const float* u)> norm_u;
  std::function<double(const float* v)> norm_v;
};

struct KrylovOptions {
  int max_iterations = 4;
  /// Stopping tolerances as MATLAB's lsqr/lsmr (0 = off): stop when ‖r‖ ≤ rtol·‖b‖, or when
  /// ‖Aᵀr‖ ≤ artol·‖A‖·‖r‖ (the least-squares residual no longer falls), ‖A‖ as estimated.
  double rtol = 0.0, artol = 0.0;
  std::function<void(int iteration)> on_iteration;  // may be empty
};

struct KrylovResult {
  AccountedArray<float> x;
  int iterations = 0;
  double residual = 0.0;  // the solver's estimate of ‖b − Ax‖/‖b‖
};

/// min ‖Ax − b‖ from x = 0. `b` (m floats) is the solver's u vector: it is overwritten, and
/// freed on return.
KrylovResult lsmr(const LinearOperator& A, AccountedArray<float> b, const KrylovOptions& o);
KrylovResult lsqr(const LinearOperator& A, AccountedArray<float> b, const KrylovOptions& o);

}  // namespace qsmcore::inversion
