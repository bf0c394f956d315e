// Binary morphology on masks (methods.md §2): 6-connected erosion and dilation (QSM.rs's
// structuring element, voxels beyond the border outside, so erosion also peels the border), hole
// filling and the largest connected component. The flood fills are breadth-first over an
// accounted int32 queue rather than recursive, so a brain-sized region cannot overflow the stack.
// (mask_bytes.h says why this is in core.)
#include "core/mask_bytes.h"

#include <limits>
#include <string>

#include "core/parallel.h"
#include "qsmcore/error.h"

namespace qsmcore {
namespace masking {
namespace {

using Queue = AccountedArray<std::int32_t>;

// One step of erosion (kErode) or dilation with the 6-neighbourhood, in → out. Each plane is
// written by one thread, so the result does not depend on the thread count.
template <bool kErode>
void morph_once(const std::uint8_t* in, std::uint8_t* out, const Dims3& d) {
  const std::int64_t nx = d[0], ny = d[1], nz = d[2], sy = nx, sz = nx * ny;
  parallel_for(nz, true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < ny; ++j)
      for (std::int64_t i = 0; i < nx; ++i) {
        const std::int64_t p = i + sy * j + sz * k;
        // Beyond the border counts as outside: 0 for erosion's "all inside", nothing for dilation.
        const bool nb[6] = {i > 0 && in[p - 1] != 0,       i + 1 < nx && in[p + 1] != 0, j > 0 && in[p - sy] != 0,
                            j + 1 < ny && in[p + sy] != 0, k > 0 && in[p - sz] != 0,     k + 1 < nz && in[p + sz] != 0};
        bool v = in[p] != 0;
        for (const bool b : nb) v = kErode ? (v && b) : (v || b);
        out[p] = v ? 1 : 0;
      }
  });
}

template <bool kErode>
void morph(MaskBytes& m, const Dims3& d, int iterations) {
  if (iterations < 0) throw Error(ErrorKind::InvalidInput, "morphology: the iteration count must not be negative");
  if (iterations == 0) return;
  MaskBytes other(m.size());
  for (int it = 0; it < iterations; ++it) {
    morph_once<kErode>(m.data(), other.data(), d);
    std::swap(m, other);
  }
}

Queue make_queue(std::int64_t voxels) {
  if (voxels > std::numeric_limits<std::int32_t>::max())
    throw Error(ErrorKind::InvalidInput,
                "masking: volumes above 2^31 voxels are not supported (" + std::to_string(voxels) + " voxels)");
  return Queue(static_cast<std::size_t>(voxels));
}

// Breadth-first growth from queue[head, tail) (already set to `to`) over 6-neighbours equal to
// `from`, each set to `to` and appended. Returns the new tail: queue[0, tail) holds the region.
std::int64_t flood(std::uint8_t* m, const Dims3& d, Queue& queue, std::int64_t head, std::int64_t tail,
                   std::uint8_t from, std::uint8_t to) {
  const std::int64_t nx = d[0], ny = d[1], nz = d[2], sz = nx * ny;
  while (head < tail) {
    const std::int64_t p = queue[static_cast<std::size_t>(head++)];
    const std::int64_t k = p / sz, j = (p - k * sz) / nx, i = p - k * sz - j * nx;
    const auto visit = [&](bool in_bounds, std::int64_t q) {
      if (in_bounds && m[q] == from) {
        m[q] = to;
        queue[static_cast<std::size_t>(tail++)] = static_cast<std::int32_t>(q);
      }
    };
    visit(i > 0, p - 1);
    visit(i + 1 < nx, p + 1);
    visit(j > 0, p - nx);
    visit(j + 1 < ny, p + nx);
    visit(k > 0, p - sz);
    visit(k + 1 < nz, p + sz);
  }
  return tail;
}

// The region 6-connected to voxel p whose value is `from`, relabelled `to`; returns its size
// (queue[0, size) holds its voxels).
std::int64_t grow_region(std::uint8_t* m, const Dims3& d, Queue& queue, std::int64_t p, std::uint8_t from,
                         std::uint8_t to) {
  m[p] = to;
  queue[0] = static_cast<std::int32_t>(p);
  return flood(m, d, queue, 0, 1, from, to);
}

bool on_border(std::int64_t p, const Dims3& d) {
  const std::int64_t sz = d[0] * d[1];
  const std::int64_t k = p / sz, j = (p - k * sz) / d[0], i = p - k * sz - j * d[0];
  return i == 0 || j == 0 || k == 0 || i == d[0] - 1 || j == d[1] - 1 || k == d[2] - 1;
}

}  // namespace

MaskBytes to_bytes(const Volume& mask, const char* what) {
  if (mask.empty()) throw Error(ErrorKind::InvalidInput, std::string(what) + ": the mask is empty");
  MaskBytes m(static_cast<std::size_t>(mask.voxels()));
  const double* v = mask.data();
  parallel_for(mask.voxels(), true,
               [&](std::int64_t i) { m[static_cast<std::size_t>(i)] = mask_inside(v[i]) ? 1 : 0; });
  return m;
}

MaskBytes eroded_bytes(const Volume& mask, int iterations, const char* what) {
  if (iterations <= 0) return {};
  MaskBytes m = to_bytes(mask, what);
  erode(m, mask.dims(), iterations);
  return m;
}

Volume to_volume(const MaskBytes& m, const Volume& like) {
  Volume out = Volume::zeros_like(like, 1);
  double* o = out.data();
  parallel_for(out.voxels(), true, [&](std::int64_t i) { o[i] = m[static_cast<std::size_t>(i)] != 0 ? 1.0 : 0.0; });
  return out;
}

std::int64_t count(const MaskBytes& m) {
  std::int64_t n = 0;
  for (const std::uint8_t v : m) n += v != 0 ? 1 : 0;
  return n;
}

void erode(MaskBytes& m, const Dims3& d, int iterations) {
  morph<true>(m, d, iterations);
}
void dilate(MaskBytes& m, const Dims3& d, int iterations) {
  morph<false>(m, d, iterations);
}

// States: 0 background not yet reached, 1 inside, 2 background reached from the border or a
// hole left open (too large), 3 the hole being measured.
void fill_holes(MaskBytes& m, const Dims3& d, std::int64_t max_voxels) {
  const auto n = static_cast<std::int64_t>(m.size());
  Queue queue = make_queue(n);
  std::int64_t tail = 0;
  for (std::int64_t p = 0; p < n; ++p)
    if (m[p] == 0 && on_border(p, d)) {
      m[p] = 2;
      queue[static_cast<std::size_t>(tail++)] = static_cast<std::int32_t>(p);
    }
  flood(m.data(), d, queue, 0, tail, 0, 2);
  for (std::int64_t p = 0; p < n; ++p) {
    if (m[p] != 0) continue;
    const std::int64_t size = grow_region(m.data(), d, queue, p, 0, 3);
    const std::uint8_t fill = (max_voxels <= 0 || size <= max_voxels) ? 1 : 2;
    for (std::int64_t q = 0; q < size; ++q) m[static_cast<std::size_t>(queue[q])] = fill;
  }
  for (auto& v : m) v = v == 1 ? 1 : 0;
}

// States: 1 inside not yet visited, 2 visited, 3 the kept component.
void keep_largest(MaskBytes& m, const Dims3& d) {
  const auto n = static_cast<std::int64_t>(m.size());
  Queue queue = make_queue(n);
  std::int64_t best = 0, seed = -1;
  for (std::int64_t p = 0; p < n; ++p) {
    if (m[p] != 1) continue;
    const std::int64_t size = grow_region(m.data(), d, queue, p, 1, 2);
    if (size > best) {
      best = size;
      seed = p;
    }
  }
  if (seed >= 0) grow_region(m.data(), d, queue, seed, 2, 3);
  for (auto& v : m) v = v == 3 ? 1 : 0;
}

}  // namespace masking

}  // namespace qsmcore
