// The exact Euclidean distance transform (distance_transform.h), after Felzenszwalb &
// Huttenlocher 2012 (doi:10.4086/toc.2012.v008a019): the squared distance is separable, so one
// 1-D transform per axis (x, then y, then z) of the previous pass's result gives it exactly.
#include "physics/distance_transform.h"

#include <limits>
#include <vector>

#include "core/parallel.h"
#include "qsmcore/error.h"

namespace qsmcore::physics {
namespace {

// The 1-D transform of one line: d[p] = min_q ((p − q)·s)² + f[q], by the lower envelope of the
// parabolas rooted at the finite samples (v: their indices, z: the envelope's breakpoints).
// Samples at kNoFeature are no parabola; a line without any stays kNoFeature.
void transform_line(const double* f, double* d, std::int64_t n, double s, std::vector<std::int64_t>& v,
                    std::vector<double>& z) {
  std::int64_t k = -1;
  for (std::int64_t q = 0; q < n; ++q) {
    if (f[q] >= kNoFeature) continue;
    const double xq = static_cast<double>(q) * s, hq = f[q] + xq * xq;
    while (true) {
      if (k < 0) {
        v[0] = q;
        z[0] = -std::numeric_limits<double>::infinity();
        k = 0;
        break;
      }
      const double xv = static_cast<double>(v[k]) * s;
      const double cross = (hq - (f[v[k]] + xv * xv)) / (2.0 * (xq - xv));
      if (cross <= z[k]) {
        --k;
        continue;
      }
      v[++k] = q;
      z[k] = cross;
      break;
    }
  }
  if (k < 0) {
    for (std::int64_t p = 0; p < n; ++p) d[p] = kNoFeature;
    return;
  }
  std::int64_t j = 0;
  for (std::int64_t p = 0; p < n; ++p) {
    const double xp = static_cast<double>(p) * s;
    while (j < k && z[j + 1] < xp) ++j;
    const double dx = xp - static_cast<double>(v[j]) * s;
    d[p] = dx * dx + f[v[j]];
  }
}

// One pass along `axis`: every line of the volume through the 1-D transform, in place. Lines
// are independent, so each runs on one thread (per plane of the two other axes' outer one).
void pass(float* a, const Dims3& dims, int axis, double spacing) {
  const std::int64_t n = dims[axis];
  const std::int64_t stride = axis == 0 ? 1 : axis == 1 ? dims[0] : dims[0] * dims[1];
  // The lines: their start indices are (i, j, k) with the axis coordinate 0; enumerate by the
  // outer of the two other axes (parallel) and the inner one.
  const int inner = axis == 0 ? 1 : 0, outer = axis == 2 ? 1 : 2;
  const std::int64_t inner_stride = inner == 0 ? 1 : dims[0];
  const std::int64_t outer_stride = outer == 1 ? dims[0] : dims[0] * dims[1];
  parallel_for(dims[outer], true, [&](std::int64_t o) {
    std::vector<double> f(static_cast<std::size_t>(n)), d(static_cast<std::size_t>(n)),
        z(static_cast<std::size_t>(n) + 1);
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < dims[inner]; ++i) {
      float* line = a + o * outer_stride + i * inner_stride;
      for (std::int64_t p = 0; p < n; ++p) f[static_cast<std::size_t>(p)] = line[p * stride];
      transform_line(f.data(), d.data(), n, spacing, v, z);
      for (std::int64_t p = 0; p < n; ++p) {
        const double x = d[static_cast<std::size_t>(p)];
        line[p * stride] = x >= kNoFeature ? kNoFeature : static_cast<float>(x);
      }
    }
  });
}

}  // namespace

AccountedArray<float> squared_distance(const AccountedArray<std::uint8_t>& feature, const Dims3& dims,
                                       const Vec3& spacing_mm) {
  const std::int64_t voxels = dims[0] * dims[1] * dims[2];
  if (static_cast<std::int64_t>(feature.size()) != voxels)
    throw Error(ErrorKind::InvalidInput, "distance transform: the feature map does not match the grid");
  for (double s : spacing_mm)
    if (!(s > 0.0)) throw Error(ErrorKind::InvalidInput, "distance transform: voxel sizes must be positive");
  AccountedArray<float> a(static_cast<std::size_t>(voxels));
  parallel_for(voxels, true, [&](std::int64_t i) {
    a[static_cast<std::size_t>(i)] = feature[static_cast<std::size_t>(i)] != 0 ? 0.0f : kNoFeature;
  });
  for (int axis = 0; axis < 3; ++axis) pass(a.data(), dims, axis, spacing_mm[axis]);
  return a;
}

}  // namespace qsmcore::physics
