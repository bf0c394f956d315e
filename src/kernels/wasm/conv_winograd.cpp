// SIMD128 Conv by Winograd's minimal filtering (Lavin & Gray, 2016), F(4×4, 3×3) on rows 16
// outputs wide or more and F(2×2, 3×3) on narrower ones: each M×M block of outputs of a depth
// plane is computed from an (M + 2)² block of inputs with 36 (M = 4) or 16 (M = 2) products per
// input channel and depth tap, instead of 9·M². SIMD128 has no FMA, so the direct kernel
// (conv.cpp) is bound by its multiplies and adds at about 45 GFLOP/s; fewer of them is the only
// way to a faster 3×3×3 conv. F(4×4) takes 2.25 products per output where F(2×2) takes 4: on
// this machine (Zen 4, Node, 2 threads) the full IR2QSM twin at 64³ went from 4.1–4.7 s to
// 2.4–3.1 s, xQSM from 2.5 to 1.7–1.9 s. At 8 wide, F(4×4)'s 2 tiles a row leave half a vector
// empty and F(2×2) takes fewer products. The depth taps are summed directly: a transform along
// depth too would pair output planes, which a conv chain computes a few at a time.
//
// Per output plane od and block of tiles (R rows of tiles, M output rows each, × W tiles along w):
//   1. input transform V = Bᵀ d B of every tile, for each valid depth tap and input channel,
//      4 tiles to a vector: V[pos][k][tile], pos = (M + 2)·i + j, k = (tap, ic); the input rows
//      are first copied split into M phases, so that 4 consecutive tiles' inputs at one column
//      offset are one vector;
//   2. per block of 4 output channels, its weights' transform U = G g Gᵀ, then per pos the
//      product M[pos] = Σ_k U[pos][k] · V[pos][k], 8 tiles at a time (simd_conv.h's 4-channel ×
//      8-lane register block);
//   3. output transform Y = Aᵀ M A, the bias, the fused post-ops, and the store.
// The weights stay packed as the direct kernel packs them (9 taps, not 16 or 36 transformed
// values): kept transformed they took 16/9 of the bytes, and IR2QSM's 40 MB of weights then
// outweighed what the conv chains save in the heap. A job transforms each channel block's
// weights once for all the tiles of its block: a few % of the products.
// Not bitwise equal to the reference: the transforms round differently from direct sums, F(4×4)
// more than F(2×2) (its points below). Against the native engine, max|Δ| is 2.7e-6 of the range
// on the full IR2QSM twin at 64³ and 2.8e-6 on xQSM (F(2×2) alone: 2.0e-6 and 1.3e-6). Results
// do not depend on the thread count or on which output planes a run asks for, so chained runs
// still equal unchained ones to the bit. Like the direct kernel's zero padding, the transforms
// mix neighbouring inputs: an infinite input gives NaN where a direct sum could give ±inf.
#include "kernels/wasm/conv_winograd.h"

#include <algorithm>

#include "kernels/wasm/common.h"
#include "kernels/wasm/simd_conv.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::wasm {
namespace {

constexpr int kNc = 4;                       // output channels per register block
constexpr std::size_t kVBytes = 384 * 1024;  // one worker's transformed inputs: stays in L2

/// The 1-D transforms of F(M, 3) along one axis, 4 tiles (or channels) to a vector: the weights'
/// G (3 → R values), the inputs' Bᵀ (R → R) and the outputs' Aᵀ (R → M), R = M + 2.
template <int M>
struct Transforms;

/// F(2, 3) on the points 0, ±1, ∞ (Lavin & Gray).
template <>
struct Transforms<2> {
  static constexpr int kR = 4;
  /// (g0, (g0 + g1 + g2)/2, (g0 − g1 + g2)/2, g2).
  static void weight(v128_t g0, v128_t g1, v128_t g2, v128_t* t) {
    const v128_t half = wasm_f32x4_splat(0.5f), s = wasm_f32x4_add(g0, g2);
    t[0] = g0;
    t[1] = wasm_f32x4_mul(wasm_f32x4_add(s, g1), half);
    t[2] = wasm_f32x4_mul(wasm_f32x4_sub(s, g1), half);
    t[3] = g2;
  }
  /// (d0 − d2, d1 + d2, d2 − d1, d1 − d3).
  static void input(const v128_t* d, v128_t* r) {
    r[0] = wasm_f32x4_sub(d[0], d[2]);
    r[1] = wasm_f32x4_add(d[1], d[2]);
    r[2] = wasm_f32x4_sub(d[2], d[1]);
    r[3] = wasm_f32x4_sub(d[1], d[3]);
  }
  /// (m0 + m1 + m2, m1 − m2 − m3).
  static void output(const v128_t* m, v128_t* y) {
    y[0] = wasm_f32x4_add(wasm_f32x4_add(m[0], m[1]), m[2]);
    y[1] = wasm_f32x4_sub(wasm_f32x4_sub(m[1], m[2]), m[3]);
  }
};

/// F(4, 3): 36 products per 4×4 outputs, input channel and depth tap, where F(2×2, 3×3) takes 64
/// for the same outputs. On the points 0, ±1, −1/2, 2, ∞ rather than Lavin & Gray's 0, ±1, ±2, ∞:
/// the sums of products cancel less, and on random 96-channel tiles in float32 the largest
/// error relative to the output fell from 1.6e-5 to 6.1e-6 (mean 2.8e-6 → 1.6e-6; Barabasz et
/// al., 2020, on the choice of points). F(2×2, 3×3): 2.4e-6 (3.7e-7).
template <>
struct Transforms<4> {
  static constexpr int kR = 6;
  /// (g0, −(g0 + g1 + g2)/3, (g0 − g1 + g2)/3, (−16g0 + 8g1 − 4g2)/15, (g0 + 2g1 + 4g2)/15, g2).
  static void weight(v128_t g0, v128_t g1, v128_t g2, v128_t* t) {
    const v128_t s = wasm_f32x4_add(g0, g2), third = wasm_f32x4_splat(1.0f / 3.0f);
    const v128_t fifteenth = wasm_f32x4_splat(1.0f / 15.0f);
    t[0] = g0;
    t[1] = wasm_f32x4_mul(wasm_f32x4_add(s, g1), wasm_f32x4_neg(third));
    t[2] = wasm_f32x4_mul(wasm_f32x4_sub(s, g1), third);
    t[3] = wasm_f32x4_mul(wasm_f32x4_sub(wasm_f32x4_mul(g1, wasm_f32x4_splat(8.0f)),
                                         wasm_f32x4_add(wasm_f32x4_mul(g0, wasm_f32x4_splat(16.0f)),
                                                        wasm_f32x4_mul(g2, wasm_f32x4_splat(4.0f)))),
                          fifteenth);
    t[4] = wasm_f32x4_mul(
        wasm_f32x4_add(wasm_f32x4_add(g0, wasm_f32x4_add(g1, g1)), wasm_f32x4_mul(g2, wasm_f32x4_splat(4.0f))),
        fifteenth);
    t[5] = g2;
  }
  /// (d0 − 2d2 + d4 + 1.5(d1 − d3), e ∓ f, u + 2v, u − v/2, d1 − 2d3 + d5 + 1.5(d2 − d4)), with
  /// e = d4 − d2 − 1.5d3, f = d1 + 1.5d2 − d3, u = d4 − d2, v = d1 − d3.
  static void input(const v128_t* d, v128_t* r) {
    const v128_t h = wasm_f32x4_splat(1.5f), half = wasm_f32x4_splat(0.5f);
    const v128_t u = wasm_f32x4_sub(d[4], d[2]), v = wasm_f32x4_sub(d[1], d[3]);
    const v128_t e = wasm_f32x4_sub(u, wasm_f32x4_mul(h, d[3]));
    const v128_t f = wasm_f32x4_sub(wasm_f32x4_add(d[1], wasm_f32x4_mul(h, d[2])), d[3]);
    r[0] = wasm_f32x4_add(wasm_f32x4_sub(wasm_f32x4_add(d[0], d[4]), wasm_f32x4_add(d[2], d[2])), wasm_f32x4_mul(h, v));
    r[1] = wasm_f32x4_sub(e, f);
    r[2] = wasm_f32x4_add(e, f);
    r[3] = wasm_f32x4_add(u, wasm_f32x4_add(v, v));
    r[4] = wasm_f32x4_sub(u, wasm_f32x4_mul(half, v));
    r[5] = wasm_f32x4_add(wasm_f32x4_sub(wasm_f32x4_add(d[1], d[5]), wasm_f32x4_add(d[3], d[3])),
                          wasm_f32x4_mul(h, wasm_f32x4_sub(d[2], d[4])));
  }
  /// (m0 + a + m3 + m4, b − m3/2 + 2m4, a + m3/4 + 4m4, b − m3/8 + 8m4 + m5), a, b = m1 ± m2.
  static void output(const v128_t* m, v128_t* y) {
    const v128_t a = wasm_f32x4_add(m[1], m[2]), b = wasm_f32x4_sub(m[1], m[2]);
    y[0] = wasm_f32x4_add(wasm_f32x4_add(m[0], a), wasm_f32x4_add(m[3], m[4]));
    y[1] = wasm_f32x4_add(wasm_f32x4_sub(b, wasm_f32x4_mul(m[3], wasm_f32x4_splat(0.5f))), wasm_f32x4_add(m[4], m[4]));
    y[2] = wasm_f32x4_add(wasm_f32x4_add(a, wasm_f32x4_mul(m[3], wasm_f32x4_splat(0.25f))),
                          wasm_f32x4_mul(m[4], wasm_f32x4_splat(4.0f)));
    y[3] = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_sub(b, wasm_f32x4_mul(m[3], wasm_f32x4_splat(0.125f))),
                                         wasm_f32x4_mul(m[4], wasm_f32x4_splat(8.0f))),
                          m[5]);
  }
};

/// Zero-padded copy of row[at, at + 16·chunks) (the row holds `width` floats) split into its 4
/// phases: element 4i + p at dst[p · 4·chunks + i], so that the inputs of 4 consecutive tiles of
/// F(4, 3) at one column offset are one vector.
inline void copy_row_phases4(const float* row, int at, int chunks, int width, float* dst) {
  const int stride = 4 * chunks;
  for (int c = 0; c < chunks; ++c, at += 16) {
    v128_t v[4], o[4];
    if (at >= 0 && at + 16 <= width) {
      for (int i = 0; i < 4; ++i) v[i] = wasm_v128_load(row + at + 4 * i);
    } else {
      alignas(16) float t[16];
      for (int i = 0; i < 16; ++i) t[i] = at + i >= 0 && at + i < width ? row[at + i] : 0.0f;
      for (int i = 0; i < 4; ++i) v[i] = wasm_v128_load(t + 4 * i);
    }
    transpose4x4(v[0], v[1], v[2], v[3], o);
    for (int p = 0; p < 4; ++p) wasm_v128_store(dst + p * stride + 4 * c, o[p]);
  }
}

/// A worker's scratch: the transformed inputs, the input rows of a tile row split into their
/// phases, one channel block's transformed weights and its products.
struct Scratch {
  float* v;
  float* rows;
  float* u;
  float* m;
};

/// F(M×M, 3×3) per depth plane: M output rows and columns per tile, R = M + 2 input ones.
template <int M>
class WinogradConvKernel final : public PackedKernel<PlaneKernel> {
  using T = Transforms<M>;
  static constexpr int kR = T::kR;
  static constexpr int kPos = kR * kR;  // the transform's positions

 public:
  WinogradConvKernel(const WinogradShape& s, const float* w, const float* bias, const graph::TNode& n);
  void run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) override;
  void run_planes(const PlaneView& x, const PlaneView& add, const PlaneView& y, int od0, int od1,
                  ExecContext& ctx) const override;
  std::string impl_name() const override { return M == 2 ? "simd128:conv_winograd" : "simd128:conv_winograd4"; }

 private:
  int tiles() const { return (sh_.out[2] + M - 1) / M; }
  int tile_rows() const { return (sh_.out[1] + M - 1) / M; }
  int blocks() const { return (sh_.m + kNc - 1) / kNc; }
  // Vectors per phase of a copied row: F(2, 3) copies 8 inputs per vector pair (even, odd),
  // F(4, 3) 16 per vector quadruple; a block of W tiles reads 2W + 2 or 4W + 2 of them.
  int chunks() const { return M == 2 ? (2 * w_tiles_ + 2 + 7) / 8 : w_tiles_ / 4 + 1; }
  int row_groups() const { return (tile_rows() + r_rows_ - 1) / r_rows_; }
  std::size_t v_floats() const { return static_cast<std::size_t>(kPos) * sh_.kd * sh_.c * tb_; }
  std::size_t row_floats() const { return static_cast<std::size_t>(kR) * 4 * M * chunks(); }
  std::size_t u_floats() const { return static_cast<std::size_t>(kPos) * sh_.kd * sh_.c * kNc; }
  std::size_t worker_bytes() const override {
    return round64((v_floats() + row_floats() + u_floats() + kPos * kNc * tb_) * sizeof(float));
  }
  void job(const PlaneIo& io, int od, int th0, Scratch& s) const;
  void transform_inputs(const PlaneView& x, int kd0, int kd1, int od, int th0, int t0, Scratch& s) const;
  void copy_rows(const float* plane, int th, int t0, float* rows) const;
  void transform_channel(const float* plane, int th, int t0, float* rows, float* v, std::size_t kstride) const;
  void transform_weights(int blk, int kd0, int kd1, const Scratch& s) const;
  void multiply(int k_n, const Scratch& s) const;
  void transform_outputs(const PlaneIo& io, int blk, int od, int th0, int t0, const Scratch& s) const;
  template <class IoOf>
  void run_jobs_over(int items, int od0, int od1, ExecContext& ctx, IoOf&& io_of) const;

  WinogradShape sh_;
  const float* w_ = nullptr;     // [block][kd][ic][kh·3 + kw][kNc]
  const float* bias_ = nullptr;  // [block · kNc], zeros past m
  int w_tiles_ = 8;              // W: tiles per block along w, a multiple of 4
  int r_rows_ = 1;               // R: rows of tiles per block
  int tb_ = 8;                   // R · W, a multiple of 8 (the product's register block)
};

template <int M>
WinogradConvKernel<M>::WinogradConvKernel(const WinogradShape& s, const float* w, const float* bias,
                                          const graph::TNode& n)
    : PackedKernel(n), sh_(s) {
  // Tiles per block: as many as keep the transformed inputs within kVBytes. Along w, vectors of
  // 4 spread evenly over the blocks a row needs (48 tiles as 2 × 24, not 32 + 16 computed as
  // 64); short rows take several rows of tiles per block, so that the weights transformed for a
  // block serve more tiles and an 8-wide output (4 tiles) does not fill 8 lanes with nothing.
  const std::size_t per_tile = static_cast<std::size_t>(kPos) * sh_.kd * sh_.c * sizeof(float);
  const int fit = std::max(8, static_cast<int>(kVBytes / per_tile) / 4 * 4);
  const int row_blocks = (tiles() + fit - 1) / fit;
  w_tiles_ = ((tiles() + row_blocks - 1) / row_blocks + 3) / 4 * 4;
  r_rows_ = std::clamp(fit / w_tiles_, 1, tile_rows());
  if (w_tiles_ % 8 != 0 && r_rows_ % 2 != 0)
    ++r_rows_;  // whole register blocks: a row past the end is computed, not stored
  tb_ = r_rows_ * w_tiles_;
  const std::size_t wfloats = static_cast<std::size_t>(blocks()) * sh_.kd * sh_.c * 9 * kNc;
  float* p = packed_.allocate(wfloats);  // the bias apart: PackedConstants says why
  float* b = packed_.allocate(static_cast<std::size_t>(blocks()) * kNc);
  if (p == nullptr) return;  // a dry plan: counted, never run
  for (int oc = 0; oc < sh_.m; ++oc) {
    const int blk = oc / kNc, j = oc % kNc;
    for (int ic = 0; ic < sh_.c; ++ic)
      for (int kd = 0; kd < sh_.kd; ++kd)
        for (int t = 0; t < 9; ++t)
          p[(((static_cast<std::size_t>(blk) * sh_.kd + kd) * sh_.c + ic) * 9 + t) * kNc + j] =
              w[((static_cast<std::size_t>(oc) * sh_.c + ic) * sh_.kd + kd) * 9 + t];
    if (bias != nullptr) b[oc] = bias[oc];
  }
  w_ = p;
  bias_ = b;
  packed_.track(&w_);
  packed_.track(&bias_);
}

/// The R input rows of tile row th (zeros outside the plane), columns [M·t0 − pw, …), split into
/// their M phases: phase p of row r at rows + (r · M + p) · 4·chunks.
template <int M>
void WinogradConvKernel<M>::copy_rows(const float* plane, int th, int t0, float* rows) const {
  const int nch = chunks(), w = sh_.in[2];
  const int row_floats = 4 * M * nch;
  for (int r = 0; r < kR; ++r) {
    float* dst = rows + r * row_floats;
    const int ih = M * th - sh_.ph + r;
    if (ih < 0 || ih >= sh_.in[1])
      std::fill(dst, dst + row_floats, 0.0f);
    else if constexpr (M == 2)
      copy_row<2>(plane + static_cast<std::ptrdiff_t>(ih) * w, 2 * t0 - sh_.pw, nch, w, dst);
    else
      copy_row_phases4(plane + static_cast<std::ptrdiff_t>(ih) * w, M * t0 - sh_.pw, nch, w, dst);
  }
}

/// V for tiles [t0, t0 + W) of this channel and tap, from its copied rows: V[pos] at
/// v + pos · kstride, 4 tiles to a vector.
template <int M>
void WinogradConvKernel<M>::transform_channel(const float* plane, int th, int t0, float* rows, float* v,
                                              std::size_t kstride) const {
  copy_rows(plane, th, t0, rows);
  const int phase = 4 * chunks(), row_floats = M * phase;
  for (int q = 0; q < w_tiles_; q += 4) {
    // Tiles q..q+3 read columns M·t + i, i < R: phase i % M, from tile q + i / M on.
    v128_t h[kR][kR];
    for (int r = 0; r < kR; ++r) {
      v128_t d[kR];
      for (int i = 0; i < kR; ++i) d[i] = wasm_v128_load(rows + r * row_floats + (i % M) * phase + q + i / M);
      T::input(d, h[r]);
    }
    for (int j = 0; j < kR; ++j) {
      v128_t col[kR], t[kR];
      for (int r = 0; r < kR; ++r) col[r] = h[r][j];
      T::input(col, t);
      for (int i = 0; i < kR; ++i) wasm_v128_store(v + (kR * i + j) * kstride + q, t[i]);
    }
  }
}

/// V for every valid depth tap [kd0, kd1) and input channel, k = (kd − kd0) · c + ic, of the
/// block's tiles: row th0 + r, column t0 + t at tile index r · W + t.
template <int M>
void WinogradConvKernel<M>::transform_inputs(const PlaneView& x, int kd0, int kd1, int od, int th0, int t0,
                                             Scratch& s) const {
  const int k_n = (kd1 - kd0) * sh_.c;
  const std::int64_t plane = static_cast<std::int64_t>(sh_.in[1]) * sh_.in[2];
  const std::size_t kstride = static_cast<std::size_t>(k_n) * tb_;
  for (int kd = kd0; kd < kd1; ++kd) {
    const int id = od * sh_.sd - sh_.pd + kd * sh_.dd;
    for (int ic = 0; ic < sh_.c; ++ic) {
      const int k = (kd - kd0) * sh_.c + ic;
      float* v = s.v + static_cast<std::size_t>(k) * tb_;
      for (int r = 0; r < r_rows_; ++r)
        transform_channel(x.at(ic, id, plane), th0 + r, t0, s.rows, v + r * w_tiles_, kstride);
    }
  }
}

/// U = G g Gᵀ of channel block blk's weights for depth taps [kd0, kd1), 4 channels to a vector:
/// U[pos][k] at s.u + (pos · k_n + k) · kNc, k = (kd − kd0) · c + ic.
template <int M>
void WinogradConvKernel<M>::transform_weights(int blk, int kd0, int kd1, const Scratch& s) const {
  const int k_n = (kd1 - kd0) * sh_.c;
  const float* g = w_ + (static_cast<std::size_t>(blk) * sh_.kd + kd0) * sh_.c * 9 * kNc;
  for (int k = 0; k < k_n; ++k, g += 9 * kNc) {
    v128_t t[3][kR];  // G g: per column b of g, its R transformed rows
    for (int b = 0; b < 3; ++b)
      T::weight(wasm_v128_load(g + b * kNc), wasm_v128_load(g + (3 + b) * kNc), wasm_v128_load(g + (6 + b) * kNc),
                t[b]);
    for (int i = 0; i < kR; ++i) {
      v128_t u[kR];
      T::weight(t[0][i], t[1][i], t[2][i], u);
      for (int j = 0; j < kR; ++j)
        wasm_v128_store(s.u + ((kR * i + j) * static_cast<std::size_t>(k_n) + k) * kNc, u[j]);
    }
  }
}

/// M[pos] of the block whose U is in s.u, for the tb tiles: Σ over the k_n (tap, channel) pairs,
/// in order.
template <int M>
void WinogradConvKernel<M>::multiply(int k_n, const Scratch& s) const {
  for (int pos = 0; pos < kPos; ++pos) {
    const float* u = s.u + static_cast<std::size_t>(pos) * k_n * kNc;
    const float* vp = s.v + static_cast<std::size_t>(pos) * k_n * tb_;
    float* m = s.m + pos * kNc * tb_;
    for (int t = 0; t < tb_; t += 8) {
      v128_t a[8];
      for (auto& x : a) x = wasm_f32x4_splat(0.0f);
      const float* vk = vp + t;
#pragma clang loop unroll(disable)
      for (int k = 0; k < k_n; ++k, vk += tb_) tap<kNc>(vk, u + k * kNc, a);
      for (int j = 0; j < kNc; ++j) {
        wasm_v128_store(m + j * tb_ + t, a[2 * j]);
        wasm_v128_store(m + j * tb_ + t + 4, a[2 * j + 1]);
      }
    }
  }
}

/// Y = Aᵀ M A + bias for channel block blk, post-ops, stored to output rows M·th … M·th + M − 1
/// of each row of tiles th of the block.
template <int M>
void WinogradConvKernel<M>::transform_outputs(const PlaneIo& io, int blk, int od, int th0, int t0,
                                              const Scratch& s) const {
  const int ow = sh_.out[2];
  const std::int64_t plane = static_cast<std::int64_t>(sh_.out[1]) * ow;
  for (int j = 0; j < kNc && blk * kNc + j < sh_.m; ++j) {
    const int oc = blk * kNc + j;
    const v128_t b = wasm_f32x4_splat(bias_[oc]);
    for (int t = 0; t < tb_; t += 4) {
      const int th = th0 + t / w_tiles_, x0 = M * (t0 + t % w_tiles_);
      if (th >= tile_rows() || x0 >= ow) continue;
      v128_t r[M][kR];  // Aᵀ M: its M rows, per column c
      for (int c = 0; c < kR; ++c) {
        v128_t col[kR], y[M];
        for (int i = 0; i < kR; ++i) col[i] = wasm_v128_load(s.m + ((kR * i + c) * kNc + j) * tb_ + t);
        T::output(col, y);
        for (int i = 0; i < M; ++i) r[i][c] = y[i];
      }
      const int n = std::min(4 * M, ow - x0);
      for (int i = 0; i < M && M * th + i < sh_.out[1]; ++i) {
        v128_t y[M], o[M];
        T::output(r[i], y);
        for (auto& v : y) v = wasm_f32x4_add(v, b);
        // y[c] holds column c of the 4 tiles: tile-major, they are 4·M consecutive outputs.
        if constexpr (M == 2) {
          o[0] = wasm_i32x4_shuffle(y[0], y[1], 0, 4, 1, 5);
          o[1] = wasm_i32x4_shuffle(y[0], y[1], 2, 6, 3, 7);
        } else {
          transpose4x4(y[0], y[1], y[2], y[3], o);
        }
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(M * th + i) * ow + x0;
        post_.finish<M>(o, io.add.base ? io.add.at(oc, od, plane) + at : nullptr, io.y.at(oc, od, plane) + at, n);
      }
    }
  }
}

/// Output rows [M·th0, M·(th0 + R)) of plane od, every channel.
template <int M>
void WinogradConvKernel<M>::job(const PlaneIo& io, int od, int th0, Scratch& s) const {
  int kd0 = sh_.kd, kd1 = 0;
  for (int kd = 0; kd < sh_.kd; ++kd) {
    const int id = od * sh_.sd - sh_.pd + kd * sh_.dd;
    if (id >= 0 && id < sh_.in[0]) kd0 = std::min(kd0, kd), kd1 = kd + 1;
  }
  for (int t0 = 0; t0 < tiles(); t0 += w_tiles_) {
    if (kd1 > kd0) transform_inputs(io.x, kd0, kd1, od, th0, t0, s);
    for (int blk = 0; blk < blocks(); ++blk) {
      if (kd1 > kd0) {
        transform_weights(blk, kd0, kd1, s);
        multiply((kd1 - kd0) * sh_.c, s);
      } else {
        std::fill(s.m, s.m + kPos * kNc * tb_, 0.0f);  // no tap in the volume: the bias alone
      }
      transform_outputs(io, blk, od, th0, t0, s);
    }
  }
}

template <int M>
template <class IoOf>
void WinogradConvKernel<M>::run_jobs_over(int items, int od0, int od1, ExecContext& ctx, IoOf&& io_of) const {
  QSM_ASSERT(w_ != nullptr, "a simd128 Winograd conv kernel from a dry plan was run");
  const int planes = od1 - od0, rows = row_groups();
  const std::int64_t jobs = static_cast<std::int64_t>(items) * planes * rows;
  const std::size_t vf = v_floats(), rf = row_floats(), uf = u_floats();
  run_jobs(jobs, worker_bytes(), ctx, [&](std::int64_t j, std::byte* scratch) {
    float* base = reinterpret_cast<float*>(scratch);
    Scratch s{base, base + vf, base + vf + rf, base + vf + rf + uf};
    const int plane = static_cast<int>(j / rows);
    job(io_of(plane / planes), od0 + plane % planes, static_cast<int>(j % rows) * r_rows_, s);
  });
}

template <int M>
void WinogradConvKernel<M>::run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) {
  const int sum = post_.sum_input();
  const float* x = in[0].data<float>();
  const float* add = sum >= 0 ? in[static_cast<std::size_t>(sum)].data<float>() : nullptr;
  float* y = out[0].data<float>();
  const std::int64_t in_plane = static_cast<std::int64_t>(sh_.in[0]) * sh_.in[1] * sh_.in[2];
  const std::int64_t out_plane = static_cast<std::int64_t>(sh_.out[0]) * sh_.out[1] * sh_.out[2];
  run_jobs_over(sh_.n, 0, sh_.out[0], ctx,
                [&](int b) { return batch_item(x, add, y, b, sh_.c, sh_.m, in_plane, out_plane); });
}

template <int M>
void WinogradConvKernel<M>::run_planes(const PlaneView& x, const PlaneView& add, const PlaneView& y, int od0, int od1,
                                       ExecContext& ctx) const {
  run_jobs_over(1, od0, od1, ctx, [&](int) { return PlaneIo{x, add, y}; });
}

}  // namespace

bool winograd_pays(int c, int m, int out_w) {
  // Few channels: the transforms outweigh the products saved. Narrow rows: tiles of 8 go half empty.
  return c >= 4 && m >= 4 && out_w >= 8;
}

std::unique_ptr<PlaneKernel> make_winograd_conv(const WinogradShape& s, const float* w, const float* bias,
                                                const graph::TNode& n) {
  // F(4×4, 3×3) where a row holds whole 4-wide tiles enough: at 8 wide its 2 tiles a row leave
  // half a vector empty and F(2×2, 3×3) takes fewer products per output.
  if (s.out[2] >= 16) return std::make_unique<WinogradConvKernel<4>>(s, w, bias, n);
  return std::make_unique<WinogradConvKernel<2>>(s, w, bias, n);
}

}  // namespace qsmcore::kernels::wasm
