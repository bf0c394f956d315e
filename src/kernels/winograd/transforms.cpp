// The F(2×2×2, 3×3×3) transforms on channels-last blocks of tiles. In one dimension (Lavin &
// Gray, 2016, on the points 0, ±1, ∞), d (4 inputs) → Bᵀd = (d0 − d2, d1 + d2, d2 − d1, d1 − d3)
// and m (4 products) → Aᵀm = (m0 + m1 + m2, m1 − m2 − m3); in three they nest along x, y and z
// (Jia et al., PPoPP'18, N-dimensional Winograd), 64 points per tile. Each works on kChunk
// channels at once, so every line of the nested transform is a few vector adds.
//
// The bodies are written once (always inlined) and built three times: with AVX-512, with
// AVX2 + FMA and for the baseline, dispatched by __builtin_cpu_supports. The library is built
// for the baseline ISA (users' and CI's machines differ), so only these attributed builds use
// the wider vectors. They are adds only: the same operations in the same order in every build, so
// the results do not depend on which one runs.
#include "kernels/winograd/transforms.h"

#include <algorithm>
#include <cstring>

#include "kernels/kernel.h"

namespace qsmcore::kernels::winograd {
namespace {

// kChunk channels as one GCC/clang vector: one zmm in the AVX-512 build, two ymm in the AVX2
// one, four xmm in the baseline; only ever passed by pointer (its ABI differs between them).
typedef float Vec __attribute__((vector_size(kChunk * sizeof(float))));

#define QSM_WG_INLINE inline __attribute__((always_inline))

QSM_WG_INLINE void load(Vec* v, const float* p) {
  std::memcpy(v, p, sizeof(Vec));
}
QSM_WG_INLINE void store(float* p, const Vec* v) {
  std::memcpy(p, v, sizeof(Vec));
}

/// Bᵀ on 4 vectors, in place.
QSM_WG_INLINE void bt(Vec& a, Vec& b, Vec& c, Vec& d) {
  const Vec d0 = a, d1 = b, d2 = c, d3 = d;
  a = d0 - d2;
  b = d1 + d2;
  c = d2 - d1;
  d = d1 - d3;
}

/// Aᵀ on 4 vectors → 2.
QSM_WG_INLINE void at(const Vec& m0, const Vec& m1, const Vec& m2, const Vec& m3, Vec& y0, Vec& y1) {
  y0 = m0 + m1 + m2;
  y1 = m1 - m2 - m3;
}

/// Tile t's coordinates in tiles (z, y, x).
QSM_WG_INLINE void tile_at(const TileGrid& g, std::int64_t t, int& tz, int& ty, int& tx) {
  tx = static_cast<int>(t % g.tw);
  ty = static_cast<int>(t / g.tw % g.th);
  tz = static_cast<int>(t / (static_cast<std::int64_t>(g.tw) * g.th));
}

/// The 64 inputs of tile t at src[p] (null outside the volume), p = (z·4 + y)·4 + x.
QSM_WG_INLINE void tile_inputs(const TileGrid& g, const float* x, std::int64_t t, const float** src) {
  int tz, ty, tx;
  tile_at(g, t, tz, ty, tx);
  for (int p = 0; p < kPoints; ++p) {
    const int iz = 2 * tz - g.pz + p / 16, iy = 2 * ty - 1 + p / 4 % 4, ix = 2 * tx - 1 + p % 4;
    const bool in = iz >= 0 && iz < g.di && iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
    src[p] = in ? x + ((static_cast<std::int64_t>(iz) * g.h + iy) * g.w + ix) * g.c : nullptr;
  }
}

/// Channels [c0, c0 + cn) of one input voxel (zeros past cn, or everywhere for null). Full:
/// cn = kChunk, a separate build, else the compiler merges the whole-vector copies with the
/// partial ones into variable-length copies (4× slower transforms).
template <bool Full>
QSM_WG_INLINE void load_input(Vec& d, const float* src, int c0, int cn) {
  if (src == nullptr) {
    d = Vec{};
  } else if (Full) {
    load(&d, src + c0);
  } else {
    alignas(64) float t[kChunk] = {};
    for (int l = 0; l < cn; ++l) t[l] = src[c0 + l];
    load(&d, t);
  }
}

/// Bᵀ d B of channels [c0, c0 + kChunk) of one tile into V's rows (cn of them stored). Along x
/// and y a z-slice of 16 vectors at a time, in registers where the ISA has enough (AVX-512: 32);
/// then along z, straight into V: one pass through memory instead of three.
template <bool Full>
QSM_WG_INLINE void input_chunk(const float* const* src, int c0, int cn, float* v, std::size_t point) {
  alignas(64) Vec d[kPoints];
  for (int z = 0; z < 4; ++z) {
    Vec s[16];
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) load_input<Full>(s[q], src[z * 16 + q], c0, cn);
#pragma GCC unroll 4
    for (int y = 0; y < 4; ++y) bt(s[4 * y], s[4 * y + 1], s[4 * y + 2], s[4 * y + 3]);  // along x
#pragma GCC unroll 4
    for (int x = 0; x < 4; ++x) bt(s[x], s[4 + x], s[8 + x], s[12 + x]);  // along y
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) d[z * 16 + q] = s[q];
  }
  const std::size_t bytes = static_cast<std::size_t>(cn) * sizeof(float);
#pragma GCC unroll 4
  for (int q = 0; q < 16; ++q) {
    Vec e[4] = {d[q], d[16 + q], d[32 + q], d[48 + q]};
    bt(e[0], e[1], e[2], e[3]);  // along z
    for (int k = 0; k < 4; ++k) {
      if (Full)
        store(v + (16 * k + q) * point, &e[k]);
      else
        std::memcpy(v + (16 * k + q) * point, &e[k], bytes);
    }
  }
}

QSM_WG_INLINE void input_body(const BlockArgs& b, const float* x, float* v) {
  const TileGrid& g = *b.g;
  const std::size_t row = static_cast<std::size_t>(b.vrow > 0 ? b.vrow : g.c), point = row * b.tb;
  const float* src[kPoints];
  for (int i = 0; i < b.count; ++i) {
    tile_inputs(g, x, b.t0 + i, src);
    int c0 = 0;
    for (; c0 + kChunk <= g.c; c0 += kChunk) input_chunk<true>(src, c0, kChunk, v + i * row + c0, point);
    if (c0 < g.c) input_chunk<false>(src, c0, g.c - c0, v + i * row + c0, point);
  }
  for (int p = 0; p < kPoints; ++p)  // this input's columns of a last, partial block: zeros, never stored
    for (int i = b.count; i < b.tb; ++i) std::memset(v + p * point + i * row, 0, g.c * sizeof(float));
}

/// The 8 outputs of a tile, r[(z·2 + y)·2 + x], from its 64 products m[p]: along x and y a
/// z-slice at a time in registers, then along z.
QSM_WG_INLINE void output_tile(const Vec* m, Vec* r) {
  alignas(64) Vec b[16];  // (z, y', x') at z·4 + y'·2 + x'
  for (int z = 0; z < 4; ++z) {
    Vec t[8];  // (y, x') at y·2 + x'
#pragma GCC unroll 4
    for (int y = 0; y < 4; ++y) {
      const Vec* s = m + z * 16 + 4 * y;
      at(s[0], s[1], s[2], s[3], t[2 * y], t[2 * y + 1]);  // along x
    }
#pragma GCC unroll 2
    for (int x = 0; x < 2; ++x) at(t[x], t[2 + x], t[4 + x], t[6 + x], b[z * 4 + x], b[z * 4 + 2 + x]);  // along y
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) at(b[k], b[4 + k], b[8 + k], b[12 + k], r[k], r[4 + k]);  // along z
}

/// bias, then the post-ops in order, on kChunk channels of one output voxel; cn of them stored
/// (Full: cn = kChunk, built apart as load_input is).
template <bool Full>
QSM_WG_INLINE void finish(const Vec* in, const float* bias, const OutputArgs& o, std::int64_t at, int cn) {
  alignas(64) Vec r, bv;
  load(&bv, bias);
  r = *in + bv;
  for (const auto& p : o.post) {
    const Vec zero = {};
    switch (p.kind) {
      case graph::PostOp::Kind::Relu:
        r = r > zero ? r : zero;
        break;
      case graph::PostOp::Kind::LeakyRelu:
        r = r >= zero ? r : r * p.alpha;
        break;
      case graph::PostOp::Kind::Sum:
        if (Full) {
          Vec a;
          load(&a, o.add + at);
          r += a;
        } else {
          for (int l = 0; l < cn; ++l) r[l] += o.add[at + l];
        }
        break;
      default:
        for (int l = 0; l < cn; ++l) r[l] = apply_activation(p, r[l]);
    }
  }
  if (Full)
    store(o.y + at, &r);
  else
    std::memcpy(o.y + at, &r, static_cast<std::size_t>(cn) * sizeof(float));
}

/// Output channels [c0, c0 + cn) of tile (tz, ty, tx), from its products at src + p · point.
template <bool Full>
QSM_WG_INLINE void output_chunk(const TileGrid& g, const float* src, std::size_t point, int tz, int ty, int tx, int c0,
                                int cn, const OutputArgs& o) {
  alignas(64) Vec m[kPoints], r[8];
  for (int p = 0; p < kPoints; ++p) {
    if (Full) {
      load(&m[p], src + p * point);
    } else {
      alignas(64) float t[kChunk] = {};
      std::memcpy(t, src + p * point, static_cast<std::size_t>(cn) * sizeof(float));
      load(&m[p], t);
    }
  }
  output_tile(m, r);
  for (int k = 0; k < 8; ++k) {
    const int oz = 2 * tz + k / 4, oy = 2 * ty + k / 2 % 2, ox = 2 * tx + k % 2;
    if (oz >= g.d || oy >= g.h || ox >= g.w) continue;  // odd sizes: the last tile's overhang
    const std::int64_t at = ((static_cast<std::int64_t>(oz) * g.h + oy) * g.w + ox) * g.m + c0;
    finish<Full>(&r[k], o.bias + c0, o, at, cn);
  }
}

QSM_WG_INLINE void output_body(const BlockArgs& b, const float* mres, const OutputArgs& o) {
  const TileGrid& g = *b.g;
  const std::size_t row = static_cast<std::size_t>(g.m), point = row * b.tb;
  for (int i = 0; i < b.count; ++i) {
    int tz, ty, tx;
    tile_at(g, b.t0 + i, tz, ty, tx);
    const float* src = mres + i * row;
    int c0 = 0;
    for (; c0 + kChunk <= g.m; c0 += kChunk) output_chunk<true>(g, src + c0, point, tz, ty, tx, c0, kChunk, o);
    if (c0 < g.m) output_chunk<false>(g, src + c0, point, tz, ty, tx, c0, g.m - c0, o);
  }
}

void input_baseline(const BlockArgs& b, const float* x, float* v) {
  input_body(b, x, v);
}
void output_baseline(const BlockArgs& b, const float* mres, const OutputArgs& o) {
  output_body(b, mres, o);
}

#if defined(__x86_64__) || defined(__i386__)
#define QSM_WG_AVX2 __attribute__((target("avx2,fma")))
#define QSM_WG_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
QSM_WG_AVX2 void input_avx2(const BlockArgs& b, const float* x, float* v) {
  input_body(b, x, v);
}
QSM_WG_AVX2 void output_avx2(const BlockArgs& b, const float* mres, const OutputArgs& o) {
  output_body(b, mres, o);
}
QSM_WG_AVX512 void input_avx512(const BlockArgs& b, const float* x, float* v) {
  input_body(b, x, v);
}
QSM_WG_AVX512 void output_avx512(const BlockArgs& b, const float* mres, const OutputArgs& o) {
  output_body(b, mres, o);
}
#endif

}  // namespace

TransformFns transforms_for_cpu(bool avx512) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (avx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return {&input_avx512, &output_avx512, "avx512"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {&input_avx2, &output_avx2, "avx2"};
#endif
  (void)avx512;
  return {&input_baseline, &output_baseline, "baseline"};
}

}  // namespace qsmcore::kernels::winograd
