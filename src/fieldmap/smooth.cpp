// Separable Gaussian smoothing of a complex field held as two f32 arrays (MCPC-3D-S's offset is
// smoothed as e^{iφ₀}, weighted, so that wraps do not smear: Eckstein et al. 2018,
// doi:10.1002/mrm.26963). Zero beyond the volume: the field is zero outside the mask already, so
// the mask edge is only seen through the weights, and the angle of the result ignores their sum.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "fieldmap/fieldmap_internal.h"

namespace qsmcore::fieldmap {
namespace {

// Columns processed together along the smoothed axis: the inner loop runs over contiguous
// memory, and a block's buffer (len × 64 × 2 floats) stays small.
constexpr std::int64_t kBlock = 64;

std::vector<float> gaussian_taps(double sigma) {
  const auto radius = static_cast<std::int64_t>(std::ceil(3.0 * sigma));
  std::vector<float> g(static_cast<std::size_t>(2 * radius + 1));
  double sum = 0.0;
  for (std::int64_t t = -radius; t <= radius; ++t) sum += std::exp(-0.5 * t * t / (sigma * sigma));
  for (std::int64_t t = -radius; t <= radius; ++t)
    g[static_cast<std::size_t>(t + radius)] = static_cast<float>(std::exp(-0.5 * t * t / (sigma * sigma)) / sum);
  return g;
}

struct AxisLayout {
  std::int64_t inner, len, outer;  // the volume as [outer][len][inner]
};

AxisLayout layout(const Dims3& d, int axis) {
  if (axis == 0) return {1, d[0], d[1] * d[2]};
  if (axis == 1) return {d[0], d[1], d[2]};
  return {d[0] * d[1], d[2], 1};
}

// One block: columns [c0, c0 + w) of slab o, both channels, convolved along `len`.
void smooth_block(float* re, float* im, const AxisLayout& a, std::int64_t o, std::int64_t c0, std::int64_t w,
                  const std::vector<float>& g) {
  const auto radius = static_cast<std::int64_t>(g.size() / 2);
  std::vector<float> buf(static_cast<std::size_t>(2 * a.len * w));
  float* br = buf.data();
  float* bi = buf.data() + a.len * w;
  const std::int64_t base = o * a.len * a.inner + c0;
  for (std::int64_t l = 0; l < a.len; ++l)
    for (std::int64_t c = 0; c < w; ++c) {
      br[l * w + c] = re[base + l * a.inner + c];
      bi[l * w + c] = im[base + l * a.inner + c];
    }
  for (std::int64_t l = 0; l < a.len; ++l) {
    float* outr = re + base + l * a.inner;
    float* outi = im + base + l * a.inner;
    for (std::int64_t c = 0; c < w; ++c) outr[c] = outi[c] = 0.0f;
    const std::int64_t t0 = std::max(-radius, -l), t1 = std::min(radius, a.len - 1 - l);
    for (std::int64_t t = t0; t <= t1; ++t) {
      const float gt = g[static_cast<std::size_t>(t + radius)];
      const float* sr = br + (l + t) * w;
      const float* si = bi + (l + t) * w;
      for (std::int64_t c = 0; c < w; ++c) {
        outr[c] += gt * sr[c];
        outi[c] += gt * si[c];
      }
    }
  }
}

void smooth_axis(float* re, float* im, const Dims3& d, int axis, double sigma) {
  if (!(sigma > 0.0) || d[axis] < 2) return;
  const std::vector<float> g = gaussian_taps(sigma);
  const AxisLayout a = layout(d, axis);
  const std::int64_t chunks = (a.inner + kBlock - 1) / kBlock;
  // Every block writes its own columns: the result does not depend on the thread count.
  parallel_for(a.outer * chunks, true, [&](std::int64_t b) {
    const std::int64_t o = b / chunks, c0 = (b % chunks) * kBlock;
    smooth_block(re, im, a, o, c0, std::min(kBlock, a.inner - c0), g);
  });
}

}  // namespace

void smooth_complex(AccountedArray<float>& re, AccountedArray<float>& im, const Dims3& dims, const Vec3& sigma_vox) {
  for (int axis = 0; axis < 3; ++axis) smooth_axis(re.data(), im.data(), dims, axis, sigma_vox[axis]);
}

}  // namespace qsmcore::fieldmap
