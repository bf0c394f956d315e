// Tiling geometry, stitching and waves (tiles.h).
#include "tiling/tiles.h"

#include <algorithm>
#include <cmath>

#include "qsmcore/error.h"

namespace qsmcore::tiling {

namespace {

std::int64_t clampi(std::int64_t v, std::int64_t lo, std::int64_t hi) {
  return std::max(lo, std::min(v, hi));
}

// Strides of a row-major tensor over the volume axes: stride[volume axis].
std::array<std::int64_t, 3> tensor_strides(const Box& box, const AxisOrder& order) {
  const Dims3 td = tensor_dims(box, order);
  std::array<std::int64_t, 3> s{};
  s[static_cast<std::size_t>(order[2])] = 1;
  s[static_cast<std::size_t>(order[1])] = td[2];
  s[static_cast<std::size_t>(order[0])] = td[1] * td[2];
  return s;
}

}  // namespace

Dims3 tensor_dims(const Box& box, const AxisOrder& order) {
  return {box.size[static_cast<std::size_t>(order[0])], box.size[static_cast<std::size_t>(order[1])],
          box.size[static_cast<std::size_t>(order[2])]};
}

void pack_box(const double* src, const Dims3& dims, const Box& box, const AxisOrder& order, Fill fill, float* dst,
              const std::function<double(double, std::int64_t)>& f) {
  const auto st = tensor_strides(box, order);
  for (std::int64_t k = 0; k < box.size[2]; ++k) {
    const std::int64_t z = box.origin[2] + k;
    const bool zin = z >= 0 && z < dims[2];
    for (std::int64_t j = 0; j < box.size[1]; ++j) {
      const std::int64_t y = box.origin[1] + j;
      const bool yin = y >= 0 && y < dims[1];
      for (std::int64_t i = 0; i < box.size[0]; ++i) {
        const std::int64_t x = box.origin[0] + i;
        const bool in = zin && yin && x >= 0 && x < dims[0];
        double v = 0.0;
        if (in || fill == Fill::Edge) {
          const std::int64_t idx =
              clampi(x, 0, dims[0] - 1) + dims[0] * (clampi(y, 0, dims[1] - 1) + dims[1] * clampi(z, 0, dims[2] - 1));
          v = f ? f(src[idx], idx) : src[idx];
        }
        dst[i * st[0] + j * st[1] + k * st[2]] = static_cast<float>(v);
      }
    }
  }
}

void unpack_box(const float* src, const Dims3& dims, const Box& box, const AxisOrder& order, const Box& write,
                const std::function<void(std::int64_t, double, std::int64_t)>& put) {
  const auto st = tensor_strides(box, order);
  std::array<std::int64_t, 3> lo{}, hi{};
  for (int a = 0; a < 3; ++a) {
    lo[a] = std::max({box.origin[a], write.origin[a], std::int64_t{0}});
    hi[a] = std::min({box.origin[a] + box.size[a], write.origin[a] + write.size[a], dims[a]});
    if (hi[a] <= lo[a]) return;
  }
  for (std::int64_t z = lo[2]; z < hi[2]; ++z)
    for (std::int64_t y = lo[1]; y < hi[1]; ++y)
      for (std::int64_t x = lo[0]; x < hi[0]; ++x) {
        const std::int64_t i = x - box.origin[0], j = y - box.origin[1], k = z - box.origin[2];
        put(x + dims[0] * (y + dims[1] * z), src[i * st[0] + j * st[1] + k * st[2]],
            i + box.size[0] * (j + box.size[1] * k));
      }
}

std::int64_t pad_before(std::int64_t total, PadRule rule) {
  switch (rule) {
    case PadRule::CentredFloor:
      return total / 2;
    case PadRule::CentredCeil:
      return (total + 1) / 2;
    case PadRule::End:
      return 0;
  }
  return 0;
}

std::int64_t round_up(std::int64_t n, std::int64_t m) {
  return m <= 1 ? n : (n + m - 1) / m * m;
}

Box pad_frame(const Dims3& dims, const Dims3& multiple, PadRule rule, const Dims3& at_least) {
  Box b;
  for (int a = 0; a < 3; ++a) {
    b.size[a] = round_up(std::max(dims[a], at_least[a]), multiple[a]);
    b.origin[a] = -pad_before(b.size[a] - dims[a], rule);
  }
  return b;
}

std::vector<CoreTile> core_tiles(const Dims3& dims, const Box& frame, const Dims3& core, std::int64_t halo,
                                 const Dims3& multiple, const std::function<bool(std::int64_t)>& keep) {
  std::array<std::vector<std::pair<std::int64_t, std::int64_t>>, 3>
      axis;  // (core start, core size), (patch start, size)
  std::array<std::vector<std::pair<std::int64_t, std::int64_t>>, 3> patch;
  for (int a = 0; a < 3; ++a) {
    const std::int64_t c = core[a] <= 0 ? dims[a] : std::min(core[a], dims[a]);
    const std::int64_t m = std::max<std::int64_t>(multiple[a], 1);
    const std::int64_t p = std::min(frame.size[a], round_up(c + 2 * std::max<std::int64_t>(halo, 0), m));
    for (std::int64_t x0 = 0; x0 < dims[a]; x0 += c) {
      const std::int64_t cx = std::min(c, dims[a] - x0);
      // Frame coordinates: core [f0, f0 + cx); the patch [s, s + p) on the multiple, centred.
      const std::int64_t f0 = x0 - frame.origin[a];
      std::int64_t s = (f0 + cx / 2 - p / 2) / m * m;
      if (f0 + cx / 2 - p / 2 < 0) s = 0;
      while (s > f0) s -= m;
      while (s + p < f0 + cx) s += m;
      s = clampi(s, 0, frame.size[a] - p);
      QSM_ASSERT(s <= f0 && s + p >= f0 + cx, "core_tiles: the patch does not contain its core");
      axis[a].push_back({x0, cx});
      patch[a].push_back({s + frame.origin[a], p});
    }
  }
  std::vector<CoreTile> out;
  for (std::size_t k = 0; k < axis[2].size(); ++k)
    for (std::size_t j = 0; j < axis[1].size(); ++j)
      for (std::size_t i = 0; i < axis[0].size(); ++i) {
        CoreTile t;
        t.core = {{axis[0][i].first, axis[1][j].first, axis[2][k].first},
                  {axis[0][i].second, axis[1][j].second, axis[2][k].second}};
        t.patch = {{patch[0][i].first, patch[1][j].first, patch[2][k].first},
                   {patch[0][i].second, patch[1][j].second, patch[2][k].second}};
        if (keep) {
          bool any = false;
          for (std::int64_t z = t.core.origin[2]; z < t.core.origin[2] + t.core.size[2] && !any; ++z)
            for (std::int64_t y = t.core.origin[1]; y < t.core.origin[1] + t.core.size[1] && !any; ++y)
              for (std::int64_t x = t.core.origin[0]; x < t.core.origin[0] + t.core.size[0] && !any; ++x)
                any = keep(x + dims[0] * (y + dims[1] * z));
          if (!any) continue;
        }
        out.push_back(t);
      }
  return out;
}

std::vector<std::int64_t> snu_starts(std::int64_t size, std::int64_t patch) {
  if (size <= patch) return {0};
  const std::int64_t s =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(0.75 * static_cast<double>(patch))));
  std::vector<std::int64_t> out;
  for (std::int64_t x = 0; x <= size - patch; x += s) out.push_back(x);
  if (out.back() != size - patch) out.push_back(size - patch);
  return out;
}

std::vector<std::int64_t> nnunet_starts(std::int64_t size, std::int64_t patch, double step) {
  if (size <= patch) return {0};
  const double span = static_cast<double>(size - patch);
  const auto n = static_cast<std::int64_t>(std::ceil(span / (static_cast<double>(patch) * step))) + 1;
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < n; ++i)
    out.push_back(
        static_cast<std::int64_t>(std::nearbyint(static_cast<double>(i) * span / static_cast<double>(n - 1))));
  return out;
}

std::vector<Box> windows(const Box& frame, const Dims3& patch,
                         const std::function<std::vector<std::int64_t>(std::int64_t, std::int64_t)>& starts) {
  std::array<std::vector<std::int64_t>, 3> s;
  for (int a = 0; a < 3; ++a) s[a] = starts(frame.size[a], std::min(patch[a], frame.size[a]));
  std::vector<Box> out;
  for (auto z : s[2])
    for (auto y : s[1])
      for (auto x : s[0])
        out.push_back({{frame.origin[0] + x, frame.origin[1] + y, frame.origin[2] + z},
                       {std::min(patch[0], frame.size[0]), std::min(patch[1], frame.size[1]),
                        std::min(patch[2], frame.size[2])}});
  return out;
}

std::vector<double> gaussian_weights(const Dims3& patch) {
  std::array<std::vector<double>, 3> g;
  for (int a = 0; a < 3; ++a) {
    const double t = static_cast<double>(patch[a]);
    const double sigma = t / 8.0, c = static_cast<double>(patch[a] / 2);
    for (std::int64_t i = 0; i < patch[a]; ++i) {
      const double d = static_cast<double>(i) - c;
      g[a].push_back(std::exp(-d * d / (2.0 * sigma * sigma)));
    }
  }
  std::vector<double> w(static_cast<std::size_t>(patch[0] * patch[1] * patch[2]));
  double peak = 0.0;
  std::size_t n = 0;
  for (std::int64_t k = 0; k < patch[2]; ++k)
    for (std::int64_t j = 0; j < patch[1]; ++j)
      for (std::int64_t i = 0; i < patch[0]; ++i) {
        w[n] = g[0][i] * g[1][j] * g[2][k];
        peak = std::max(peak, w[n++]);
      }
  double min_nz = 0.0;
  for (double& v : w) {
    v = v / peak * 10.0;
    if (v > 0 && (min_nz == 0.0 || v < min_nz)) min_nz = v;
  }
  for (double& v : w)
    if (v == 0.0) v = min_nz;
  return w;
}

Blender::Blender(const Dims3& dims, std::int64_t channels)
    : voxels_(dims[0] * dims[1] * dims[2]),
      sum_(Volume::zeros(dims, Geometry{}, channels)),
      weight_(Volume::zeros(dims, Geometry{})) {}

void Blender::finish(std::int64_t c, double* out) const {
  const double* s = sum_.data() + c * voxels_;
  const double* w = weight_.data();
  for (std::int64_t i = 0; i < voxels_; ++i) out[i] = w[i] > 0.0 ? s[i] / w[i] : 0.0;
}

}  // namespace qsmcore::tiling
