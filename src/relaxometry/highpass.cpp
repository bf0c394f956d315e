// The SWI phase's high-pass (CLEAR-SWI, Eckstein et al. 2021, doi:10.1016/j.neuroimage.2021.118175;
// its default σ = [4, 4, 0] voxels): the field less its Gaussian smoothing normalised inside the
// mask, Σ g·f·m / Σ g·m (normalised convolution), so that the mask's edge and the volume's border
// (zero beyond) do not pull the smoothed field towards 0. Both sums are one separable Gaussian
// applied to two f32 arrays (a smooth field and a 0/1 mask need no more precision); the
// numerator's array then holds the result, and the denominator's is freed.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "relaxometry/relaxometry_internal.h"

namespace qsmcore::relaxometry {
namespace {

// Columns processed together along y or z: the inner loop runs over contiguous memory, and a
// block's buffer (len × 64 × 2 floats) stays small.
constexpr std::int64_t kBlock = 64;

std::vector<float> gaussian_taps(double sigma) {
  const auto radius = static_cast<std::int64_t>(std::ceil(3.0 * sigma));
  std::vector<double> g(static_cast<std::size_t>(2 * radius + 1));
  double sum = 0.0;
  for (std::int64_t t = -radius; t <= radius; ++t)
    sum += g[static_cast<std::size_t>(t + radius)] = std::exp(-0.5 * static_cast<double>(t * t) / (sigma * sigma));
  std::vector<float> out(g.size());
  for (std::size_t t = 0; t < g.size(); ++t) out[t] = static_cast<float>(g[t] / sum);
  return out;
}

// The volume as [outer][len][inner] for the smoothed axis.
struct AxisLayout {
  std::int64_t inner, len, outer;
};

AxisLayout layout(const Dims3& d, int axis) {
  if (axis == 0) return {1, d[0], d[1] * d[2]};
  if (axis == 1) return {d[0], d[1], d[2]};
  return {d[0] * d[1], d[2], 1};
}

// out[p] = Σ_t g[t]·in[p + t − r] over one contiguous line of x, zero beyond its ends.
void smooth_line(float* line, std::int64_t len, const std::vector<float>& g, std::vector<float>& pad) {
  const auto r = static_cast<std::int64_t>(g.size() / 2);
  pad.assign(static_cast<std::size_t>(len + 2 * r), 0.0f);
  std::copy(line, line + len, pad.begin() + r);
  std::fill(line, line + len, 0.0f);
  for (std::size_t t = 0; t < g.size(); ++t) {
    const float gt = g[t];
    const float* src = pad.data() + t;
    for (std::int64_t p = 0; p < len; ++p) line[p] += gt * src[p];
  }
}

// Columns [c0, c0 + w) of slab o of one array, smoothed along `len` (zero beyond its ends).
void smooth_block(float* a, const AxisLayout& l, std::int64_t o, std::int64_t c0, std::int64_t w,
                  const std::vector<float>& g, std::vector<float>& buf) {
  const auto r = static_cast<std::int64_t>(g.size() / 2);
  buf.resize(static_cast<std::size_t>(l.len * w));
  const std::int64_t base = o * l.len * l.inner + c0;
  for (std::int64_t p = 0; p < l.len; ++p) std::copy_n(a + base + p * l.inner, w, buf.data() + p * w);
  for (std::int64_t p = 0; p < l.len; ++p) {
    float* out = a + base + p * l.inner;
    std::fill(out, out + w, 0.0f);
    const std::int64_t t0 = std::max(-r, -p), t1 = std::min(r, l.len - 1 - p);
    for (std::int64_t t = t0; t <= t1; ++t) {
      const float gt = g[static_cast<std::size_t>(t + r)];
      const float* src = buf.data() + (p + t) * w;
      for (std::int64_t c = 0; c < w; ++c) out[c] += gt * src[c];
    }
  }
}

// Both arrays along one axis; every task writes its own lines or columns only.
void smooth_axis(float* num, float* den, const Dims3& d, int axis, double sigma) {
  if (!(sigma > 0.0) || d[static_cast<std::size_t>(axis)] < 2) return;
  const std::vector<float> g = gaussian_taps(sigma);
  const AxisLayout l = layout(d, axis);
  if (l.inner == 1) {
    parallel_for(l.outer, true, [&](std::int64_t o) {
      std::vector<float> pad;
      smooth_line(num + o * l.len, l.len, g, pad);
      smooth_line(den + o * l.len, l.len, g, pad);
    });
    return;
  }
  const std::int64_t chunks = (l.inner + kBlock - 1) / kBlock;
  parallel_for(l.outer * chunks, true, [&](std::int64_t b) {
    const std::int64_t o = b / chunks, c0 = (b % chunks) * kBlock, w = std::min(kBlock, l.inner - c0);
    std::vector<float> buf;
    smooth_block(num, l, o, c0, w, g, buf);
    smooth_block(den, l, o, c0, w, g, buf);
  });
}

}  // namespace

AccountedArray<float> highpass_in_mask(const Volume& field_hz, const Volume& mask, const Vec3& sigma_vox,
                                       const std::function<void(double)>& progress) {
  const auto n = static_cast<std::size_t>(field_hz.voxels());
  const double* f = field_hz.data();
  const double* m = mask.data();
  AccountedArray<float> num(n);
  parallel_for(field_hz.voxels(), true, [&](std::int64_t i) {
    if (mask_inside(m[i])) num[static_cast<std::size_t>(i)] = static_cast<float>(f[i]);
  });
  if (!(sigma_vox[0] > 0.0 || sigma_vox[1] > 0.0 || sigma_vox[2] > 0.0)) return num;
  AccountedArray<float> den(n);
  parallel_for(field_hz.voxels(), true,
               [&](std::int64_t i) { den[static_cast<std::size_t>(i)] = mask_inside(m[i]) ? 1.0f : 0.0f; });
  for (int axis = 0; axis < 3; ++axis) {
    smooth_axis(num.data(), den.data(), field_hz.dims(), axis, sigma_vox[static_cast<std::size_t>(axis)]);
    if (progress) progress((axis + 1) / 3.0);
  }
  // Inside the mask Σ g·m ≥ g(0)³ > 0: the voxel's own tap.
  parallel_for(field_hz.voxels(), true, [&](std::int64_t i) {
    const auto k = static_cast<std::size_t>(i);
    num[k] = mask_inside(m[i]) ? static_cast<float>(f[i] - static_cast<double>(num[k]) / den[k]) : 0.0f;
  });
  return num;
}

double median_positive(const AccountedArray<float>& hp, const Volume& mask) {
  // Gathered per z-plane into its own range (counts first, then offsets in plane order): the
  // same values in the same order for any thread count.
  const std::int64_t plane = mask.nx() * mask.ny(), nz = mask.nz();
  std::vector<std::int64_t> start(static_cast<std::size_t>(nz + 1), 0);
  const auto positive = [&](std::int64_t i) {
    return mask_inside(mask.data()[i]) && hp[static_cast<std::size_t>(i)] > 0.0f;
  };
  parallel_for(nz, true, [&](std::int64_t k) {
    std::int64_t c = 0;
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i) c += positive(i) ? 1 : 0;
    start[static_cast<std::size_t>(k + 1)] = c;
  });
  for (std::int64_t k = 0; k < nz; ++k) start[static_cast<std::size_t>(k + 1)] += start[static_cast<std::size_t>(k)];
  const std::int64_t count = start.back();
  if (count == 0) return 0.0;
  AccountedArray<float> v(static_cast<std::size_t>(count));
  parallel_for(nz, true, [&](std::int64_t k) {
    std::int64_t o = start[static_cast<std::size_t>(k)];
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i)
      if (positive(i)) v[static_cast<std::size_t>(o++)] = hp[static_cast<std::size_t>(i)];
  });
  const auto mid = static_cast<std::size_t>(count / 2);
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  const double upper = v[mid];
  if (count % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + mid);
  return 0.5 * (lower + upper);
}

}  // namespace qsmcore::relaxometry
