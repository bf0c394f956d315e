// SIMD128 ConvTranspose for non-overlapping windows (kernel = stride, no padding, no output
// padding, groups = 1): the U-Net upsampling, kernel 2 stride 2. Each input voxel then scatters
// into its own output block, so output row (od, oh) reads exactly one input row per input
// channel, (od / sd, oh / sh), through the weights of offset (od % sd, oh % sh): a matrix
// product per (offset, row), with no overlap to add up and no scatter.
//
// It runs on the conv core (simd_conv.h) with a 1-tap kernel over the C input rows. The core's 4
// "channels" are (output channel, x offset) pairs: 4 channels with kernel 1 along x, 2 × 2 with
// kernel 2, 1 × 4 with kernel 4 (bfrnet's octave branch); the offsets' results interleave into
// contiguous outputs. Weights are packed as [od % sd][oh % sh][block][ic][4 lanes].
// Jobs are (batch, od, channel-block group), each writing its own outputs in a fixed order.
// Operands are read through plane views (plane_kernel.h): a conv chain up-samples a few planes
// at a time into its window with the same arithmetic.
#include "graph/ops/window.h"
#include "kernels/wasm/backend.h"
#include "kernels/wasm/common.h"
#include "kernels/wasm/plane_kernel.h"
#include "kernels/wasm/simd_conv.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::wasm {
namespace {

constexpr int kSeg = 8;       // inputs per register block along x
constexpr int kNoOffset = 0;  // the one tap's offset in a row

struct DeconvShape {
  int n = 0, c = 0, m = 0;
  int in[3] = {}, k[3] = {};  // k = stride; out = in · k
  /// Output channels per register block: the core's 4 lanes also cover the k[2] x offsets.
  int per_block() const { return 4 / k[2]; }
  int blocks() const { return (m + per_block() - 1) / per_block(); }
  int in_plane() const { return in[0] * in[1] * in[2]; }
  int out_plane() const { return in_plane() * k[0] * k[1] * k[2]; }
  int in_hw() const { return in[1] * in[2]; }
  int out_hw() const { return in_hw() * k[1] * k[2]; }
};

using DeconvIo = PlaneIo;

class DeconvKernel final : public PackedKernel<PlaneKernel> {
 public:
  DeconvKernel(const DeconvShape& sh, const float* w, const float* bias, const graph::TNode& n);
  void run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) override;
  void run_planes(const PlaneView& x, const PlaneView& add, const PlaneView& y, int od0, int od1,
                  ExecContext& ctx) const override;
  std::string impl_name() const override { return "simd128:deconv"; }

 private:
  void job(const DeconvIo& io, int od, int blk0, int blk1, std::byte* scratch) const;
  void store(const DeconvIo& io, v128_t* acc, int blk, int od, std::ptrdiff_t row_at, int k0, int n) const;
  /// Jobs over `items` batch items × output planes [od0, od1), io(b) giving item b's operands.
  template <class IoOf>
  void run_jobs_over(int items, int od0, int od1, ExecContext& ctx, IoOf&& io_of) const;
  std::size_t worker_bytes() const override {
    return round64(static_cast<std::size_t>(sh_.c) * (2 * sizeof(RowRef) + segs_ * kSeg * sizeof(float)));
  }

  DeconvShape sh_;
  const float* w_ = nullptr;     // packed weights
  const float* bias_ = nullptr;  // packed bias, per block lane (zeros without one or past m)
  int segs_ = 1;                 // segments copied together
};

DeconvKernel::DeconvKernel(const DeconvShape& sh, const float* w, const float* bias, const graph::TNode& n)
    : PackedKernel(n), sh_(sh) {
  segs_ = segments_per_copy(static_cast<std::int64_t>(sh_.c) * kSeg, (sh_.in[2] + kSeg - 1) / kSeg);
  const int kd = sh_.k[0], kh = sh_.k[1], kw = sh_.k[2], pb = sh_.per_block(), c = sh_.c, m = sh_.m;
  const std::size_t wfloats = static_cast<std::size_t>(kd) * kh * sh_.blocks() * c * 4;
  float* p = packed_.allocate(wfloats);  // the bias apart: PackedConstants says why
  float* b = packed_.allocate(static_cast<std::size_t>(sh_.blocks()) * 4);
  if (p == nullptr) return;
  // W is [C, M, kd, kh, kw]; lane l of block blk is output channel blk·pb + l % pb at x offset l / pb.
  for (int a = 0; a < kd * kh; ++a)
    for (int blk = 0; blk < sh_.blocks(); ++blk)
      for (int ic = 0; ic < c; ++ic)
        for (int l = 0; l < 4; ++l) {
          const int oc = blk * pb + l % pb, dx = l / pb;
          if (oc >= m) continue;
          p[((static_cast<std::size_t>(a) * sh_.blocks() + blk) * c + ic) * 4 + l] =
              w[((static_cast<std::size_t>(ic) * m + oc) * kd * kh + a) * kw + dx];
        }
  for (int blk = 0; blk < sh_.blocks() && bias != nullptr; ++blk)
    for (int l = 0; l < 4; ++l)
      if (blk * pb + l % pb < m) b[static_cast<std::size_t>(blk) * 4 + l] = bias[blk * pb + l % pb];
  w_ = p;
  bias_ = b;
  packed_.track(&w_);
  packed_.track(&bias_);
}

/// The 16 outputs of channel q of a block with kernel 2 along x: x offsets 0 (lane q) and 1
/// (lane 2 + q) interleave, out[2i] = offset 0 of input i, out[2i + 1] = offset 1.
void interleave2(const v128_t* acc, int q, v128_t* v) {
  const v128_t e0 = acc[2 * q], e1 = acc[2 * q + 1], o0 = acc[4 + 2 * q], o1 = acc[5 + 2 * q];
  v[0] = wasm_i32x4_shuffle(e0, o0, 0, 4, 1, 5), v[1] = wasm_i32x4_shuffle(e0, o0, 2, 6, 3, 7);
  v[2] = wasm_i32x4_shuffle(e1, o1, 0, 4, 1, 5), v[3] = wasm_i32x4_shuffle(e1, o1, 2, 6, 3, 7);
}

/// The 32 outputs of the block's one channel with kernel 4 along x: lane l holds offset l, so
/// each 4 inputs' 4×4 (offset, input) tile is transposed into 16 outputs.
void transpose4(const v128_t* acc, v128_t* v) {
  for (int h = 0; h < 2; ++h) transpose4x4(acc[h], acc[2 + h], acc[4 + h], acc[6 + h], v + 4 * h);
}

/// Post-ops and stores for one block's 8 inputs along x (n valid) of output row `row_at` (within
/// its plane) of plane od.
void DeconvKernel::store(const DeconvIo& io, v128_t* acc, int blk, int od, std::ptrdiff_t row_at, int k0, int n) const {
  const int pb = sh_.per_block(), kx = sh_.k[2];
  for (int q = 0; q < pb && blk * pb + q < sh_.m; ++q) {
    const int oc = blk * pb + q;
    const std::ptrdiff_t at = row_at + kx * k0;
    const float* add = io.add.base ? io.add.at(oc, od, sh_.out_hw()) + at : nullptr;
    float* y = io.y.at(oc, od, sh_.out_hw()) + at;
    v128_t v[8];
    if (kx == 1) {
      post_.finish<2>(acc + 2 * q, add, y, n);
    } else if (kx == 2) {
      interleave2(acc, q, v);
      post_.finish<4>(v, add, y, 2 * n);
    } else {
      transpose4(acc, v);
      post_.finish<8>(v, add, y, 4 * n);
    }
  }
}

void DeconvKernel::job(const DeconvIo& io, int od, int blk0, int blk1, std::byte* scratch) const {
  const DeconvShape& s = sh_;
  const int oh_n = s.in[1] * s.k[1], ow_n = s.in[2] * s.k[2], iw = s.in[2];
  // The input rows of the current output row: where they are, and where their copies are.
  auto* rows = reinterpret_cast<RowRef*>(scratch);
  auto* copied = rows + s.c;
  auto* buf = reinterpret_cast<float*>(copied + s.c);
  for (int ic = 0; ic < s.c; ++ic) copied[ic] = {ic * kSeg, ic * 4};
  const float* xb = io.x.base;
  const std::ptrdiff_t wblock = static_cast<std::ptrdiff_t>(s.c) * 4;
  for (int oh = 0; oh < oh_n; ++oh) {
    const int i = od / s.k[0], j = oh / s.k[1];
    const float* w = w_ + static_cast<std::ptrdiff_t>((od % s.k[0]) * s.k[1] + oh % s.k[1]) * s.blocks() * wblock;
    for (int ic = 0; ic < s.c; ++ic)
      rows[ic] = {static_cast<std::int32_t>(io.x.at(ic, i, s.in_hw()) - xb) + j * iw, ic * 4};
    const std::ptrdiff_t row_at = static_cast<std::ptrdiff_t>(oh) * ow_n;
    const std::ptrdiff_t seg_floats = static_cast<std::ptrdiff_t>(s.c) * kSeg;
    for (int ks = 0; ks < iw; ks += segs_ * kSeg) {
      // Compact copies (simd_conv.h: in place, the channels' rows alias in L1), zero-padded
      // past the row's end for a partial last segment.
      const int nseg = std::min(segs_, (iw - ks + kSeg - 1) / kSeg);
      copy_segments<1>(xb, rows, s.c, {ks, kSeg, nseg, kSeg / 4, iw, kSeg}, buf);
      for (int blk = blk0; blk < blk1; ++blk) {
        for (int q = 0; q < nseg; ++q) {
          // Bias first, then the input channels in order, as the reference adds them (one term
          // per channel, the windows do not overlap): the sums are the reference's to the bit.
          v128_t acc[8];
          for (int l = 0; l < 4; ++l) acc[2 * l] = acc[2 * l + 1] = wasm_f32x4_splat(bias_[blk * 4 + l]);
          accumulate<1, 4>(buf + q * seg_floats, copied, s.c, w + blk * wblock, 1, &kNoOffset, acc);
          const int k0 = ks + q * kSeg;
          store(io, acc, blk, od, row_at, k0, std::min(kSeg, iw - k0));
        }
      }
    }
  }
}

template <class IoOf>
void DeconvKernel::run_jobs_over(int items, int od0, int od1, ExecContext& ctx, IoOf&& io_of) const {
  QSM_ASSERT(w_ != nullptr, "a simd128 deconv kernel from a dry plan was run");
  const int blocks = sh_.blocks(), planes = od1 - od0;
  const int per =
      blocks_per_group(blocks, static_cast<std::int64_t>(sh_.c) * 16, static_cast<std::int64_t>(items) * planes);
  const int groups = (blocks + per - 1) / per;
  const std::int64_t jobs = static_cast<std::int64_t>(items) * planes * groups;
  run_jobs(jobs, worker_bytes(), ctx, [&](std::int64_t j, std::byte* scratch) {
    const int g = static_cast<int>(j % groups), plane = static_cast<int>(j / groups);
    job(io_of(plane / planes), od0 + plane % planes, g * per, std::min(blocks, (g + 1) * per), scratch);
  });
}

void DeconvKernel::run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) {
  const int sum = post_.sum_input();
  const float* x = in[0].data<float>();
  const float* add = sum >= 0 ? in[static_cast<std::size_t>(sum)].data<float>() : nullptr;
  float* y = out[0].data<float>();
  run_jobs_over(sh_.n, 0, sh_.in[0] * sh_.k[0], ctx,
                [&](int b) { return batch_item(x, add, y, b, sh_.c, sh_.m, sh_.in_plane(), sh_.out_plane()); });
}

void DeconvKernel::run_planes(const PlaneView& x, const PlaneView& add, const PlaneView& y, int od0, int od1,
                              ExecContext& ctx) const {
  run_jobs_over(1, od0, od1, ctx, [&](int) { return DeconvIo{x, add, y}; });
}

/// The node's shape, or false where this kernel declines it (overlapping or padded windows).
bool deconv_shape(const graph::TypedGraph& g, const graph::TNode& n, DeconvShape& s) {
  const Shape& x = value_of(g, n.in[0]).shape;
  const Shape& w = value_of(g, n.in[1]).shape;
  if (x.size() < 3 || x.size() > 5) return false;
  const graph::ConvGeometry geo = graph::conv_transpose_geometry(n.node, x, w);
  if (geo.group != 1) return false;
  const graph::ops::Window win = graph::ops::window_3d(n.node, geo, x);
  s.n = static_cast<int>(x[0]), s.c = static_cast<int>(x[1]), s.m = static_cast<int>(w[1]);
  for (int i = 0; i < 3; ++i) {
    s.in[i] = static_cast<int>(win.in[i]), s.k[i] = static_cast<int>(win.kernel[i]);
    if (win.stride[i] != win.kernel[i] || win.pad_begin[i] != 0 || win.out[i] != win.in[i] * win.stride[i])
      return false;
    if (win.kernel[i] > 1 && win.dil[i] != 1) return false;
  }
  return (s.k[2] == 1 || s.k[2] == 2 || s.k[2] == 4) && s.c > 0 && s.m > 0;
}

/// Constant weights (and bias) on f32: what both factories need first. With `in_memory` false
/// a constant may still be a recipe (folded BatchNorm), as when a graph pass asks.
bool deconv_operands(const graph::TypedGraph& g, const graph::TNode& n, bool in_memory = true) {
  if (!all_f32(g, n) || n.in.size() < 2 || n.in[0] < 0 || n.in[1] < 0) return false;
  auto ok = [&](int v) { return in_memory ? value_of(g, v).constant != nullptr : value_of(g, v).is_const(); };
  return ok(n.in[1]) && !(n.in.size() > 2 && n.in[2] >= 0 && !ok(n.in[2]));
}

std::unique_ptr<DeconvKernel> make_deconv_kernel(const graph::TypedGraph& g, const graph::TNode& n,
                                                 const DeconvShape& s) {
  const bool has_bias = n.in.size() > 2 && n.in[2] >= 0;
  const float* bp = has_bias ? value_of(g, n.in[2]).constant->data<float>() : nullptr;
  // No zero-padded reads meet the weights except in the last partial segment, whose extra
  // outputs are dropped: non-finite weights are as safe as in the reference.
  return std::make_unique<DeconvKernel>(s, value_of(g, n.in[1]).constant->data<float>(), bp, n);
}

std::unique_ptr<Kernel> make_deconv(const graph::TypedGraph& g, const graph::TNode& n) {
  if (!deconv_operands(g, n)) return nullptr;
  DeconvShape s;
  if (!deconv_shape(g, n, s)) return make_strided_deconv(g, n);
  return make_deconv_kernel(g, n, s);
}

}  // namespace

std::unique_ptr<PlaneKernel> make_deconv_planes(const graph::TypedGraph& g, const graph::TNode& n) {
  DeconvShape s;
  if (!deconv_operands(g, n) || !deconv_shape(g, n, s)) return nullptr;
  return make_deconv_kernel(g, n, s);
}

bool deconv_planes_supported(const graph::TypedGraph& g, const graph::TNode& n) {
  DeconvShape s;
  return deconv_operands(g, n, false) && deconv_shape(g, n, s);
}

void register_deconv_kernels(KernelTable& table) {
  table["ConvTranspose"] = &make_deconv;
}

}  // namespace qsmcore::kernels::wasm
