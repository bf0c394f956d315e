// SIMD128 Conv by Winograd's minimal filtering F(2×2, 3×3) (Lavin & Gray, 2016): each 2×2 block
// of outputs of a depth plane is computed from a 4×4 block of inputs with 16 products per input
// channel and depth tap instead of 36. SIMD128 has no FMA, so the direct kernel (conv.cpp) is
// bound by its multiplies and adds at about 45 GFLOP/s; 2.25× fewer of them is the only way
// left to a faster 3×3×3 conv. The depth taps are summed directly: a transform along depth too
// would pair output planes, which a conv chain computes a few at a time.
//
// Per output plane od and block of tiles (R rows of tiles, 2 output rows each, × W tiles along w):
//   1. input transform V = Bᵀ d B of every tile, for each valid depth tap and input channel,
//      4 tiles to a vector: V[pos][k][tile], pos = 4·i + j of the 4×4 transform, k = (tap, ic);
//   2. per block of 4 output channels, its weights' transform U = G g Gᵀ, then per pos the
//      product M[pos] = Σ_k U[pos][k] · V[pos][k], 8 tiles at a time (simd_conv.h's 4-channel ×
//      8-lane register block);
//   3. output transform Y = Aᵀ M A, the bias, the fused post-ops, and the store.
// The weights stay packed as the direct kernel packs them (9 taps, not 16 transformed values):
// kept transformed they took 16/9 of the bytes, and IR2QSM's 40 MB of weights then outweighed
// what the conv chains save in the heap. A job transforms each channel block's weights once for
// all the tiles of its block: 3 % of the products at 32 tiles, about 12 % at 8.
// Not bitwise equal to the reference: the transforms round differently from direct sums. Against
// onnxruntime-web, max|Δ| is 2.4e-7 of the range on a 32→32 conv and 1.1–1.3e-6 on the xQSM and
// IR2QSM twins, less than with the direct kernel (6.4e-7, 1.7–2.1e-6). Results do not depend
// on the thread count or on which output planes a run asks for, so chained runs still equal
// unchained ones to the bit. Like the direct kernel's zero padding, the transforms mix
// neighbouring inputs: an infinite input gives NaN where a direct sum could give ±inf.
#include "kernels/wasm/conv_winograd.h"

#include <algorithm>

#include "kernels/wasm/common.h"
#include "kernels/wasm/simd_conv.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::wasm {
namespace {

constexpr int kPos = 16;                     // the 4×4 transform's positions
constexpr int kNc = 4;                       // output channels per register block
constexpr std::size_t kVBytes = 384 * 1024;  // one worker's transformed inputs: stays in L2

/// G along one axis of 3 values: (g0, (g0 + g1 + g2)/2, (g0 − g1 + g2)/2, g2).
inline void weight_1d(v128_t g0, v128_t g1, v128_t g2, v128_t* t) {
  const v128_t half = wasm_f32x4_splat(0.5f), s = wasm_f32x4_add(g0, g2);
  t[0] = g0;
  t[1] = wasm_f32x4_mul(wasm_f32x4_add(s, g1), half);
  t[2] = wasm_f32x4_mul(wasm_f32x4_sub(s, g1), half);
  t[3] = g2;
}

/// Bᵀ along one axis of 4 values: (d0 − d2, d1 + d2, d2 − d1, d1 − d3).
inline void input_1d(const v128_t* d, v128_t* r) {
  r[0] = wasm_f32x4_sub(d[0], d[2]);
  r[1] = wasm_f32x4_add(d[1], d[2]);
  r[2] = wasm_f32x4_sub(d[2], d[1]);
  r[3] = wasm_f32x4_sub(d[1], d[3]);
}

/// Aᵀ along one axis of 4 values: (m0 + m1 + m2, m1 − m2 − m3).
inline void output_1d(v128_t m0, v128_t m1, v128_t m2, v128_t m3, v128_t& y0, v128_t& y1) {
  y0 = wasm_f32x4_add(wasm_f32x4_add(m0, m1), m2);
  y1 = wasm_f32x4_sub(wasm_f32x4_sub(m1, m2), m3);
}

/// A worker's scratch: the transformed inputs, the 4 input rows of a tile row split into even
/// and odd elements, one channel block's transformed weights and its products.
struct Scratch {
  float* v;
  float* rows;
  float* u;
  float* m;
};

class WinogradConvKernel final : public PackedKernel<PlaneKernel> {
 public:
  WinogradConvKernel(const WinogradShape& s, const float* w, const float* bias, const graph::TNode& n);
  void run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) override;
  void run_planes(const PlaneView& x, const PlaneView& add, const PlaneView& y, int od0, int od1,
                  ExecContext& ctx) const override;
  std::string impl_name() const override { return "simd128:conv_winograd"; }

 private:
  int tiles() const { return (sh_.out[2] + 1) / 2; }
  int tile_rows() const { return (sh_.out[1] + 1) / 2; }
  int blocks() const { return (sh_.m + kNc - 1) / kNc; }
  int chunks() const { return (2 * w_tiles_ + 2 + 7) / 8; }  // vectors per parity of a copied row
  int row_groups() const { return (tile_rows() + r_rows_ - 1) / r_rows_; }
  std::size_t v_floats() const { return static_cast<std::size_t>(kPos) * sh_.kd * sh_.c * tb_; }
  std::size_t row_floats() const { return 4 * 8 * static_cast<std::size_t>(chunks()); }
  std::size_t u_floats() const { return static_cast<std::size_t>(kPos) * sh_.kd * sh_.c * kNc; }
  std::size_t worker_bytes() const override {
    return round64((v_floats() + row_floats() + u_floats() + kPos * kNc * tb_) * sizeof(float));
  }
  void job(const PlaneIo& io, int od, int th0, Scratch& s) const;
  void transform_inputs(const PlaneView& x, int kd0, int kd1, int od, int th0, int t0, Scratch& s) const;
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

WinogradConvKernel::WinogradConvKernel(const WinogradShape& s, const float* w, const float* bias, const graph::TNode& n)
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
  float* p = packed_.allocate(wfloats + static_cast<std::size_t>(blocks()) * kNc);
  if (p == nullptr) return;  // a dry plan: counted, never run
  for (int oc = 0; oc < sh_.m; ++oc) {
    const int blk = oc / kNc, j = oc % kNc;
    for (int ic = 0; ic < sh_.c; ++ic)
      for (int kd = 0; kd < sh_.kd; ++kd)
        for (int t = 0; t < 9; ++t)
          p[(((static_cast<std::size_t>(blk) * sh_.kd + kd) * sh_.c + ic) * 9 + t) * kNc + j] =
              w[((static_cast<std::size_t>(oc) * sh_.c + ic) * sh_.kd + kd) * 9 + t];
    if (bias != nullptr) p[wfloats + static_cast<std::size_t>(oc)] = bias[oc];
  }
  w_ = p;
  bias_ = p + wfloats;
}

/// The 4 input rows of tile row th (zeros outside the plane), columns [2·t0 − pw, +8·chunks),
/// split into even and odd elements; then V for tiles [t0, t0 + W) of this channel and tap:
/// V[pos] at v + pos · kstride.
void WinogradConvKernel::transform_channel(const float* plane, int th, int t0, float* rows, float* v,
                                           std::size_t kstride) const {
  const int nch = chunks(), w = sh_.in[2];
  for (int r = 0; r < 4; ++r) {
    float* dst = rows + r * 8 * nch;
    const int ih = 2 * th - sh_.ph + r;
    if (ih < 0 || ih >= sh_.in[1])
      std::fill(dst, dst + 8 * nch, 0.0f);
    else
      copy_row<2>(plane + static_cast<std::ptrdiff_t>(ih) * w, 2 * t0 - sh_.pw, nch, w, dst);
  }
  for (int q = 0; q < w_tiles_; q += 4) {
    // Tiles q..q+3 read columns 2t + (0, 1, 2, 3): evens from q, odds from q, evens and odds from q + 1.
    v128_t h[4][4];
    for (int r = 0; r < 4; ++r) {
      const float* ev = rows + r * 8 * nch + q;
      const float* od = ev + 4 * nch;
      const v128_t d[4] = {wasm_v128_load(ev), wasm_v128_load(od), wasm_v128_load(ev + 1), wasm_v128_load(od + 1)};
      input_1d(d, h[r]);
    }
    for (int j = 0; j < 4; ++j) {
      const v128_t col[4] = {h[0][j], h[1][j], h[2][j], h[3][j]};
      v128_t t[4];
      input_1d(col, t);
      for (int i = 0; i < 4; ++i) wasm_v128_store(v + (4 * i + j) * kstride + q, t[i]);
    }
  }
}

/// V for every valid depth tap [kd0, kd1) and input channel, k = (kd − kd0) · c + ic, of the
/// block's tiles: row th0 + r, column t0 + t at tile index r · W + t.
void WinogradConvKernel::transform_inputs(const PlaneView& x, int kd0, int kd1, int od, int th0, int t0,
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
void WinogradConvKernel::transform_weights(int blk, int kd0, int kd1, const Scratch& s) const {
  const int k_n = (kd1 - kd0) * sh_.c;
  const float* g = w_ + (static_cast<std::size_t>(blk) * sh_.kd + kd0) * sh_.c * 9 * kNc;
  for (int k = 0; k < k_n; ++k, g += 9 * kNc) {
    v128_t t[3][4];  // G g: per column b of g, its 4 transformed rows
    for (int b = 0; b < 3; ++b)
      weight_1d(wasm_v128_load(g + b * kNc), wasm_v128_load(g + (3 + b) * kNc), wasm_v128_load(g + (6 + b) * kNc),
                t[b]);
    for (int i = 0; i < 4; ++i) {
      v128_t u[4];
      weight_1d(t[0][i], t[1][i], t[2][i], u);
      for (int j = 0; j < 4; ++j) wasm_v128_store(s.u + ((4 * i + j) * static_cast<std::size_t>(k_n) + k) * kNc, u[j]);
    }
  }
}

/// M[pos] of the block whose U is in s.u, for the tb tiles: Σ over the k_n (tap, channel) pairs,
/// in order.
void WinogradConvKernel::multiply(int k_n, const Scratch& s) const {
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

/// Y = Aᵀ M A + bias for channel block blk, post-ops, stored to output rows 2th and 2th + 1 of
/// each row of tiles th of the block.
void WinogradConvKernel::transform_outputs(const PlaneIo& io, int blk, int od, int th0, int t0,
                                           const Scratch& s) const {
  const int ow = sh_.out[2];
  const std::int64_t plane = static_cast<std::int64_t>(sh_.out[1]) * ow;
  for (int j = 0; j < kNc && blk * kNc + j < sh_.m; ++j) {
    const int oc = blk * kNc + j;
    const v128_t b = wasm_f32x4_splat(bias_[oc]);
    for (int t = 0; t < tb_; t += 4) {
      const int th = th0 + t / w_tiles_, x0 = 2 * (t0 + t % w_tiles_);
      if (th >= tile_rows() || x0 >= ow) continue;
      v128_t m[kPos];
      for (int pos = 0; pos < kPos; ++pos) m[pos] = wasm_v128_load(s.m + (pos * kNc + j) * tb_ + t);
      v128_t r[2][4];  // Aᵀ M: rows 0 and 1, per column j
      for (int c = 0; c < 4; ++c) output_1d(m[c], m[4 + c], m[8 + c], m[12 + c], r[0][c], r[1][c]);
      const int n = std::min(8, ow - x0);
      for (int i = 0; i < 2 && 2 * th + i < sh_.out[1]; ++i) {
        v128_t y0, y1;
        output_1d(r[i][0], r[i][1], r[i][2], r[i][3], y0, y1);
        y0 = wasm_f32x4_add(y0, b), y1 = wasm_f32x4_add(y1, b);
        // Tile outputs (y0, y1) interleaved into 8 consecutive columns.
        v128_t o[2] = {wasm_i32x4_shuffle(y0, y1, 0, 4, 1, 5), wasm_i32x4_shuffle(y0, y1, 2, 6, 3, 7)};
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(2 * th + i) * ow + x0;
        post_.finish<2>(o, io.add.base ? io.add.at(oc, od, plane) + at : nullptr, io.y.at(oc, od, plane) + at, n);
      }
    }
  }
}

/// Output rows [2·th0, 2·(th0 + R)) of plane od, every channel.
void WinogradConvKernel::job(const PlaneIo& io, int od, int th0, Scratch& s) const {
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

template <class IoOf>
void WinogradConvKernel::run_jobs_over(int items, int od0, int od1, ExecContext& ctx, IoOf&& io_of) const {
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

void WinogradConvKernel::run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) {
  const int sum = post_.sum_input();
  const float* x = in[0].data<float>();
  const float* add = sum >= 0 ? in[static_cast<std::size_t>(sum)].data<float>() : nullptr;
  float* y = out[0].data<float>();
  const std::int64_t in_plane = static_cast<std::int64_t>(sh_.in[0]) * sh_.in[1] * sh_.in[2];
  const std::int64_t out_plane = static_cast<std::int64_t>(sh_.out[0]) * sh_.out[1] * sh_.out[2];
  run_jobs_over(sh_.n, 0, sh_.out[0], ctx,
                [&](int b) { return batch_item(x, add, y, b, sh_.c, sh_.m, in_plane, out_plane); });
}

void WinogradConvKernel::run_planes(const PlaneView& x, const PlaneView& add, const PlaneView& y, int od0, int od1,
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
  return std::make_unique<WinogradConvKernel>(s, w, bias, n);
}

}  // namespace qsmcore::kernels::wasm
