// SIMD128 ConvTranspose with overlapping windows and stride 2 along x (the adjoints of strided
// convolutions, e.g. kernel 3 stride 2 in NeXtQSM's VJP network; groups = 1), by polyphase
// decomposition into gathers. Output (od, oh, ox) receives input (id, ih, ix) through tap
// (kd, kh, kw) when od = id·sd − pd + kd·dd (and alike for h, x). So an output row reads the
// input rows whose (kd, kh) divide out exactly, and along x the outputs of parity a (ox = 2j + a)
// form a stride-1 conv over the input: tap kw with (a + pw − kw·dw) even reads ix = j + (a + pw −
// kw·dw) / 2. Both parities of 8 j are computed on the conv core (simd_conv.h) from one
// zero-padded copy of the rows' pieces, and interleave into 16 outputs.
//
// Rows run over (ic, id ascending, ih ascending) and taps over kw ascending: the reference's
// gather order, so that the sums (bias first) match it to the bit. Weights are packed per
// parity, [parity][block][ic][kd][kh][the parity's taps][4 channels]. Jobs are (batch, od,
// channel-block group), each writing its own outputs in a fixed order.
#include <algorithm>

#include "graph/ops/window.h"
#include "kernels/wasm/backend.h"
#include "kernels/wasm/common.h"
#include "kernels/wasm/simd_conv.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::wasm {
namespace {

constexpr int kStridedSeg = 8;  // j (input x) per register block: 16 outputs

struct StridedShape {
  int n = 0, c = 0, m = 0;
  int in[3] = {}, out[3] = {}, k[3] = {}, s[3] = {}, d[3] = {}, p[3] = {};
  std::vector<int> taps[2];  // per output x parity: its kw, ascending
  std::vector<int> off[2];   // per parity and tap: (a + p − kw·d) / 2, ix relative to j
  int lo = 0, hi = 0;        // the least and the greatest offset
  int blocks() const { return (m + 3) / 4; }
  int max_rows() const { return c * k[0] * k[1]; }
  int chunks() const { return (hi - lo + kStridedSeg + 3) / 4; }
  int in_plane() const { return in[0] * in[1] * in[2]; }
  int out_plane() const { return out[0] * out[1] * out[2]; }
};

struct StridedIo {
  const float* x;
  const float* add;  // Sum addend, or null
  float* y;
};

/// A worker's scratch: the output row's input rows, where their copies are for each parity's
/// weights, and the copies.
struct StridedScratch {
  RowRef* rows;
  RowRef* copied[2];
  float* buf;
};

class StridedDeconvKernel final : public PackedKernel<Kernel> {
 public:
  StridedDeconvKernel(const StridedShape& sh, const float* w, const float* bias, const graph::TNode& n);
  void run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) override;
  std::string impl_name() const override { return "simd128:deconv-strided"; }

 private:
  void pack(const float* w, float* p) const;
  int collect_rows(int od, int oh, StridedScratch& rs) const;
  void job(const StridedIo& io, int b, int od, int blk0, int blk1, StridedScratch& rs) const;
  void segment(const StridedIo& io, int nrows, int blk, std::ptrdiff_t row_at, int j0, StridedScratch& rs) const;
  std::size_t worker_bytes() const override {
    const auto rows = static_cast<std::size_t>(sh_.max_rows());
    return round64(rows * (3 * sizeof(RowRef) + 4 * static_cast<std::size_t>(sh_.chunks()) * sizeof(float)));
  }

  StridedShape sh_;
  const float* w_[2] = {};       // packed weights per parity
  const float* bias_ = nullptr;  // packed bias per block of 4 (zeros without one or past m)
  std::vector<int> toff_[2];     // per parity and tap: its offset in a copied row
};

StridedDeconvKernel::StridedDeconvKernel(const StridedShape& sh, const float* w, const float* bias,
                                         const graph::TNode& n)
    : PackedKernel(n), sh_(sh) {
  for (int a = 0; a < 2; ++a)
    for (int o : sh_.off[a]) toff_[a].push_back(o - sh_.lo);
  const std::size_t per_tap = static_cast<std::size_t>(sh_.blocks()) * 4 * sh_.c * sh_.k[0] * sh_.k[1];
  const std::size_t wfloats = per_tap * (sh_.taps[0].size() + sh_.taps[1].size());
  float* p = packed_.allocate(wfloats);  // the bias apart: PackedConstants says why
  float* b = packed_.allocate(static_cast<std::size_t>(sh_.blocks()) * 4);
  if (p == nullptr) return;
  pack(w, p);
  for (int oc = 0; bias != nullptr && oc < sh_.m; ++oc) b[oc] = bias[oc];
  w_[0] = p, w_[1] = p + per_tap * sh_.taps[0].size();
  bias_ = b;
  for (const float** slot : {&w_[0], &w_[1], &bias_}) packed_.track(slot);
}

/// W is [C, M, kd, kh, kw]; parity a's block is [block][ic][kd][kh][its taps][4].
void StridedDeconvKernel::pack(const float* w, float* p) const {
  const StridedShape& s = sh_;
  for (int a = 0; a < 2; ++a) {
    const int nt = static_cast<int>(s.taps[a].size());
    for (int oc = 0; oc < s.m; ++oc)
      for (int ic = 0; ic < s.c; ++ic)
        for (int r = 0; r < s.k[0] * s.k[1]; ++r)
          for (int t = 0; t < nt; ++t)
            p[(((static_cast<std::size_t>(oc / 4) * s.c + ic) * s.k[0] * s.k[1] + r) * nt + t) * 4 + oc % 4] =
                w[((static_cast<std::size_t>(ic) * s.m + oc) * s.k[0] * s.k[1] + r) * s.k[2] + s.taps[a][t]];
    p += static_cast<std::size_t>(s.blocks()) * 4 * s.c * s.k[0] * s.k[1] * nt;
  }
}

/// The input rows (ic, id, ih) output row (od, oh) gathers from, ids and ihs ascending.
int StridedDeconvKernel::collect_rows(int od, int oh, StridedScratch& rs) const {
  const StridedShape& s = sh_;
  const int stride = 4 * s.chunks(), nt0 = static_cast<int>(s.taps[0].size());
  const int nt1 = static_cast<int>(s.taps[1].size());
  int n = 0;
  for (int ic = 0; ic < s.c; ++ic)
    for (int kd = s.k[0] - 1; kd >= 0; --kd) {
      const int td = od + s.p[0] - kd * s.d[0], id = td / s.s[0];
      if (td < 0 || td % s.s[0] != 0 || id >= s.in[0]) continue;
      for (int kh = s.k[1] - 1; kh >= 0; --kh) {
        const int th = oh + s.p[1] - kh * s.d[1], ih = th / s.s[1];
        if (th < 0 || th % s.s[1] != 0 || ih >= s.in[1]) continue;
        const int r = (ic * s.k[0] + kd) * s.k[1] + kh;
        rs.rows[n] = {ic * s.in_plane() + (id * s.in[1] + ih) * s.in[2], 0};
        rs.copied[0][n] = {n * stride, r * nt0 * 4};
        rs.copied[1][n] = {n * stride, r * nt1 * 4};
        ++n;
      }
    }
  return n;
}

/// One block's 16 outputs from j0 on: both parities, interleaved, post-ops, stored.
void StridedDeconvKernel::segment(const StridedIo& io, int nrows, int blk, std::ptrdiff_t row_at, int j0,
                                  StridedScratch& rs) const {
  v128_t acc[2][8];
  for (int a = 0; a < 2; ++a) {
    for (int l = 0; l < 4; ++l) acc[a][2 * l] = acc[a][2 * l + 1] = wasm_f32x4_splat(bias_[blk * 4 + l]);
    const std::ptrdiff_t wblock =
        static_cast<std::ptrdiff_t>(sh_.c) * sh_.k[0] * sh_.k[1] * 4 * static_cast<std::ptrdiff_t>(sh_.taps[a].size());
    accumulate<0, 4>(rs.buf, rs.copied[a], nrows, w_[a] + blk * wblock, static_cast<int>(toff_[a].size()),
                     toff_[a].data(), acc[a]);
  }
  const int n = std::min(2 * kStridedSeg, sh_.out[2] - 2 * j0);
  for (int q = 0; q < 4 && blk * 4 + q < sh_.m; ++q) {
    const v128_t e0 = acc[0][2 * q], e1 = acc[0][2 * q + 1], o0 = acc[1][2 * q], o1 = acc[1][2 * q + 1];
    v128_t v[4] = {wasm_i32x4_shuffle(e0, o0, 0, 4, 1, 5), wasm_i32x4_shuffle(e0, o0, 2, 6, 3, 7),
                   wasm_i32x4_shuffle(e1, o1, 0, 4, 1, 5), wasm_i32x4_shuffle(e1, o1, 2, 6, 3, 7)};
    const std::ptrdiff_t at = row_at + static_cast<std::ptrdiff_t>(blk * 4 + q) * sh_.out_plane() + 2 * j0;
    post_.finish<4>(v, io.add ? io.add + at : nullptr, io.y + at, n);
  }
}

void StridedDeconvKernel::job(const StridedIo& io, int b, int od, int blk0, int blk1, StridedScratch& rs) const {
  const StridedShape& s = sh_;
  const float* xb = io.x + static_cast<std::ptrdiff_t>(b) * s.c * s.in_plane();
  const std::ptrdiff_t yb = static_cast<std::ptrdiff_t>(b) * s.m * s.out_plane();
  const int jn = (s.out[2] + 1) / 2;  // j of the outputs, both parities
  for (int oh = 0; oh < s.out[1]; ++oh) {
    const int nrows = collect_rows(od, oh, rs);
    const std::ptrdiff_t row_at = yb + static_cast<std::ptrdiff_t>(od * s.out[1] + oh) * s.out[2];
    for (int j0 = 0; j0 < jn; j0 += kStridedSeg) {
      copy_segments<1>(xb, rs.rows, nrows, {j0 + s.lo, kStridedSeg, 1, s.chunks(), s.in[2], 4 * s.chunks()}, rs.buf);
      for (int blk = blk0; blk < blk1; ++blk) segment(io, nrows, blk, row_at, j0, rs);
    }
  }
}

void StridedDeconvKernel::run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) {
  QSM_ASSERT(bias_ != nullptr, "a simd128 deconv kernel from a dry plan was run");
  const int sum = post_.sum_input();
  const StridedIo io{in[0].data<float>(), sum >= 0 ? in[static_cast<std::size_t>(sum)].data<float>() : nullptr,
                     out[0].data<float>()};
  const int blocks = sh_.blocks();
  const std::int64_t block_bytes = static_cast<std::int64_t>(sh_.c) * sh_.k[0] * sh_.k[1] * sh_.k[2] * 16;
  const int per = blocks_per_group(blocks, block_bytes, static_cast<std::int64_t>(sh_.n) * sh_.out[0]);
  const int groups = (blocks + per - 1) / per;
  const std::int64_t jobs = static_cast<std::int64_t>(sh_.n) * sh_.out[0] * groups;
  const auto rows = static_cast<std::size_t>(sh_.max_rows());
  run_jobs(jobs, worker_bytes(), ctx, [&](std::int64_t j, std::byte* scratch) {
    auto* refs = reinterpret_cast<RowRef*>(scratch);
    StridedScratch rs{refs, {refs + rows, refs + 2 * rows}, reinterpret_cast<float*>(refs + 3 * rows)};
    const int g = static_cast<int>(j % groups), plane = static_cast<int>(j / groups);
    job(io, plane / sh_.out[0], plane % sh_.out[0], g * per, std::min(blocks, (g + 1) * per), rs);
  });
}

/// The parities' taps and offsets along x (stride 2).
void x_phases(StridedShape& s) {
  s.lo = 1 << 30, s.hi = -(1 << 30);
  for (int a = 0; a < 2; ++a)
    for (int kw = 0; kw < s.k[2]; ++kw) {
      const int t = a + s.p[2] - kw * s.d[2];
      if (((t % 2) + 2) % 2 != 0) continue;
      s.taps[a].push_back(kw);
      s.off[a].push_back(t / 2);  // t is even: exact either side of 0
      s.lo = std::min(s.lo, s.off[a].back()), s.hi = std::max(s.hi, s.off[a].back());
    }
  if (s.lo > s.hi) s.lo = s.hi = 0;
}

/// The node's shape, or false where this kernel declines it.
bool strided_shape(const graph::TypedGraph& g, const graph::TNode& n, StridedShape& s) {
  const Shape& x = value_of(g, n.in[0]).shape;
  const Shape& w = value_of(g, n.in[1]).shape;
  if (x.size() < 3 || x.size() > 5) return false;
  const graph::ConvGeometry geo = graph::conv_transpose_geometry(n.node, x, w);
  if (geo.group != 1) return false;
  const graph::ops::Window win = graph::ops::window_3d(n.node, geo, x);
  s.n = static_cast<int>(x[0]), s.c = static_cast<int>(x[1]), s.m = static_cast<int>(w[1]);
  for (int i = 0; i < 3; ++i) {
    s.in[i] = static_cast<int>(win.in[i]), s.out[i] = static_cast<int>(win.out[i]);
    s.k[i] = static_cast<int>(win.kernel[i]), s.s[i] = static_cast<int>(win.stride[i]);
    s.d[i] = static_cast<int>(win.dil[i]), s.p[i] = static_cast<int>(win.pad_begin[i]);
  }
  if (s.s[2] != 2 || s.c <= 0 || s.m <= 0) return false;
  x_phases(s);
  return s.hi - s.lo <= 64;
}

}  // namespace

std::unique_ptr<Kernel> make_strided_deconv(const graph::TypedGraph& g, const graph::TNode& n) {
  if (!all_f32(g, n) || n.in.size() < 2 || n.in[0] < 0 || n.in[1] < 0) return nullptr;
  const graph::TValue& w = value_of(g, n.in[1]);
  if (w.constant == nullptr) return nullptr;
  const bool has_bias = n.in.size() > 2 && n.in[2] >= 0;
  if (has_bias && value_of(g, n.in[2]).constant == nullptr) return nullptr;
  StridedShape s;
  if (!strided_shape(g, n, s)) return nullptr;
  const float* wp = w.constant->data<float>();
  if (!all_finite(wp, w.constant->numel())) return nullptr;  // pad zeros meet the weights
  const float* bp = has_bias ? value_of(g, n.in[2]).constant->data<float>() : nullptr;
  return std::make_unique<StridedDeconvKernel>(s, wp, bp, n);
}

}  // namespace qsmcore::kernels::wasm
