// qsm-forward's "shim" step (physics.md §3 step 2): a 2nd-order polynomial fitted to the field
// inside the mask is removed, as a scanner's shim would.
#include <cmath>

#include "qsmcore/error.h"
#include "qsmcore/phantom.h"

namespace qsmcore {

std::vector<double> shim_basis(const Dims3& d, std::int64_t i, std::int64_t j, std::int64_t k) {
  // Scaling the centred coordinates by dims/2 keeps the normal equations well conditioned.
  const double x = (static_cast<double>(i) - d[0] / 2.0) / (d[0] / 2.0);
  const double y = (static_cast<double>(j) - d[1] / 2.0) / (d[1] / 2.0);
  const double z = (static_cast<double>(k) - d[2] / 2.0) / (d[2] / 2.0);
  return {1.0, x, y, z, x * x - y * y, x * y, 2 * z * z - x * x - y * y, y * z, x * z};
}

bool remove_shim(Volume& field, const Volume& mask) {
  if (!same_grid(field, mask)) throw Error(ErrorKind::InvalidInput, "shim: the mask is not on the field's grid");
  constexpr int n = 9, order = 2;
  std::int64_t count = 0;
  double A[n][n + 1] = {};  // normal equations, augmented with the right-hand side
  for (std::int64_t k = 0; k < field.nz(); ++k)
    for (std::int64_t j = 0; j < field.ny(); ++j)
      for (std::int64_t i = 0; i < field.nx(); ++i) {
        if (mask.at(i, j, k) == 0.0) continue;
        const auto b = shim_basis(field.dims(), i, j, k);
        const double f = field.at(i, j, k);
        for (int r = 0; r < n; ++r) {
          for (int c = 0; c < n; ++c) A[r][c] += b[r] * b[c];
          A[r][n] += b[r] * f;
        }
        ++count;
      }
  if (count <= (3 * order) * (3 * order)) return false;  // qsm-forward's condition
  // Gaussian elimination with partial pivoting on the 9×9 system.
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(A[r][c]) > std::abs(A[p][c])) p = r;
    if (std::abs(A[p][c]) < 1e-12 * static_cast<double>(count)) return false;  // degenerate mask (e.g. a slab)
    for (int t = 0; t <= n; ++t) std::swap(A[c][t], A[p][t]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = A[r][c] / A[c][c];
      for (int t = c; t <= n; ++t) A[r][t] -= f * A[c][t];
    }
  }
  double coef[n];
  for (int r = 0; r < n; ++r) coef[r] = A[r][n] / A[r][r];
  for (std::int64_t k = 0; k < field.nz(); ++k)
    for (std::int64_t j = 0; j < field.ny(); ++j)
      for (std::int64_t i = 0; i < field.nx(); ++i) {
        const auto b = shim_basis(field.dims(), i, j, k);
        double fit = 0.0;
        for (int r = 0; r < n; ++r) fit += coef[r] * b[r];
        field.at(i, j, k) -= fit;
      }
  return true;
}

}  // namespace qsmcore
