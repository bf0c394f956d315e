// The least-squares line behind NetworkMemory's fixed + per-voxel terms, and the envelope that
// turns it into a prediction that never under-states a measured point (memory.md M2: an
// under-prediction is a failure, not a tolerance miss).
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "qsmcore/error.h"
#include "qsmcore/measure.h"

namespace qsmcore {

LinearFit fit_fixed_plus_per_voxel(const std::vector<std::uint64_t>& voxels, const std::vector<std::int64_t>& bytes) {
  if (voxels.size() != bytes.size())
    throw Error(ErrorKind::InvalidInput, "fit: " + std::to_string(voxels.size()) + " voxel counts but " +
                                             std::to_string(bytes.size()) + " byte counts");
  if (std::set<std::uint64_t>(voxels.begin(), voxels.end()).size() < 2)
    throw Error(ErrorKind::InvalidInput, "fit: needs at least two different voxel counts, got " +
                                             std::to_string(voxels.size()) + " point(s)");
  const double n = static_cast<double>(voxels.size());
  double sx = 0, sy = 0;
  for (std::size_t i = 0; i < voxels.size(); ++i) {
    sx += static_cast<double>(voxels[i]);
    sy += static_cast<double>(bytes[i]);
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < voxels.size(); ++i) {
    const double dx = static_cast<double>(voxels[i]) - mx;
    sxx += dx * dx;
    sxy += dx * (static_cast<double>(bytes[i]) - my);
  }
  LinearFit f;
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  for (std::size_t i = 0; i < voxels.size(); ++i) {
    const double r = static_cast<double>(bytes[i]) - (f.intercept + f.slope * static_cast<double>(voxels[i]));
    f.max_abs_residual = std::max(f.max_abs_residual, std::fabs(r));
  }
  // Envelope: whole bytes per voxel rounded up, then the smallest fixed part that puts every
  // point at or below the line. Integer arithmetic, so the bound is exact at the points.
  f.bytes_per_voxel = f.slope > 0 ? static_cast<std::uint64_t>(std::ceil(f.slope)) : 0;
  std::int64_t fixed = 0;
  for (std::size_t i = 0; i < voxels.size(); ++i) {
    const std::int64_t above = bytes[i] - static_cast<std::int64_t>(f.bytes_per_voxel * voxels[i]);
    fixed = std::max(fixed, above);
  }
  f.fixed_bytes = static_cast<std::uint64_t>(fixed);
  return f;
}

LinearFit fit_wasm_heap_growth(const std::vector<std::uint64_t>& voxels, const std::vector<std::int64_t>& bytes) {
  LinearFit f = fit_fixed_plus_per_voxel(voxels, bytes);
  constexpr std::uint64_t kPage = 65536;
  // Where dlmalloc puts a run's blocks still moves the heap's top by a few hundred KB between
  // shapes of one network (bfrnet, session 21: 0.3 % of its growth, on both sides of its line), so
  // the allowance is the line's largest residual, and at least 0.5 % of the largest growth fitted.
  // Not capped: since the sweeps start 64 planes deep (and the parse no longer leaves a hole the
  // size of the file), a large residual is placement too (QSMnet's 9.7 MB, 1.8 % of its growth).
  constexpr double kLeastShare = 0.005;
  const double largest = static_cast<double>(*std::max_element(bytes.begin(), bytes.end()));
  const double allowance = std::max(f.max_abs_residual, kLeastShare * largest);
  const auto scatter =
      static_cast<std::uint64_t>(std::ceil(allowance / static_cast<double>(kPage)) * static_cast<double>(kPage));
  f.fixed_bytes += scatter + kPage;
  return f;
}

}  // namespace qsmcore
