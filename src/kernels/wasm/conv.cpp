// SIMD128 Conv on plain NCDHW f32 (1-D to 3-D through the 3-D window, groups = 1): a direct,
// register-blocked convolution. Weights are packed once into blocks of nc output channels (4; 1
// or 2 when the conv has that few), [block][ic][kd][kh][kw][nc], so the weights of one tap are
// adjacent. For each output row (b, od, oh) and each segment of 32/nc outputs along x, every
// block starts from the bias, accumulates over the valid input rows (ic, kd, kh) and the x taps
// (simd_conv.h) in the reference kernel's order, applies the fused post-ops and stores. Without
// FMA on either side, the results equal the reference's to the bit.
//
// Each segment first copies the pieces of its input rows it reads into compact, zero-padded
// scratch (simd_conv.h says why), shared by all channel blocks of the segment: padding, the
// right edge and a partial last segment need nothing else, and stride 2 is split into even and
// odd elements there, so that every tap is plain loads. Rows (kd, kh) outside the volume are
// skipped, as the reference does. Segments are copied a few at a time (SegmentRun), so that each
// input cache line is used up while it is in L1.
//
// Jobs are (batch, od, channel-block group); one job writes its outputs alone, in a fixed order
// of rows and taps that does not depend on how jobs are spread over threads. Operands are read
// through plane views (plane_kernel.h), so a conv chain can compute a range of output planes
// from plane windows with the same arithmetic.
#include <cstring>

#include "graph/ops/window.h"
#include "kernels/wasm/backend.h"
#include "kernels/wasm/common.h"
#include "kernels/wasm/conv_winograd.h"
#include "kernels/wasm/plane_kernel.h"
#include "kernels/wasm/simd_conv.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::wasm {
namespace {

struct ConvShape {
  int n = 0, c = 0, m = 0;
  int in[3] = {}, out[3] = {}, k[3] = {}, s[3] = {}, d[3] = {}, p[3] = {};
  int nc = 4;                          // output channels per register block: 4, or all of m when it is 1 or 2
  int seg() const { return 32 / nc; }  // outputs per register block along x
  int blocks() const { return (m + nc - 1) / nc; }
  int taps() const { return k[0] * k[1] * k[2]; }
  int max_rows() const { return c * k[0] * k[1]; }
  /// Vectors of 4 per copied row (per parity at stride 2): the taps' reach plus a segment.
  int chunks() const { return ((k[2] - 1) * d[2] / s[2] + seg() + 3) / 4; }
  int row_floats() const { return 4 * chunks() * s[2]; }  // a copied row's stride
  /// Where tap k's inputs start in a copied row (odd offsets read the odd half at stride 2).
  int tap_offset(int kw) const {
    const int at = kw * d[2];
    return s[2] == 1 ? at : (at % 2) * 4 * chunks() + at / 2;
  }
  int in_plane() const { return in[0] * in[1] * in[2]; }
  int out_plane() const { return out[0] * out[1] * out[2]; }
  int in_hw() const { return in[1] * in[2]; }
  int out_hw() const { return out[1] * out[2]; }
};

/// A 1×1×1 stride-1 unpadded conv is a matrix product per depth plane: viewing each plane as one
/// long row keeps the segments full whatever the plane's width.
void flatten_pointwise(ConvShape& s) {
  for (int i = 0; i < 3; ++i)
    if (s.k[i] != 1 || s.s[i] != 1 || s.p[i] != 0 || s.in[i] != s.out[i]) return;
  s.in[2] = s.out[2] = s.in[1] * s.in[2];
  s.in[1] = s.out[1] = 1;
}

using ConvIo = PlaneIo;

/// A worker's scratch: the valid rows of the current output row (where they are in the input,
/// and where their copies are) and the copies.
struct RowScratch {
  RowRef* rows;
  RowRef* copied;
  float* buf;
};

class ConvKernel final : public PackedKernel<PlaneKernel> {
 public:
  ConvKernel(const ConvShape& sh, const float* w, const float* bias, const graph::TNode& n);
  void run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) override;
  void run_planes(const PlaneView& x, const PlaneView& add, const PlaneView& y, int od0, int od1,
                  ExecContext& ctx) const override;
  std::string impl_name() const override { return "simd128:conv"; }

 private:
  using JobFn = void (ConvKernel::*)(const ConvIo&, int od, int oh0, int oh1, int blk0, int blk1, RowScratch&) const;
  template <int S, int KW, int NC>
  void job(const ConvIo& io, int od, int oh0, int oh1, int blk0, int blk1, RowScratch& rs) const;
  JobFn pick_job() const;
  int collect_rows(const PlaneView& x, int od, int oh, RowScratch& rs) const;
  /// Jobs over `items` batch items × output planes [od0, od1), io(b) giving item b's operands.
  template <class IoOf>
  void run_jobs_over(int items, int od0, int od1, ExecContext& ctx, IoOf&& io_of) const;
  std::size_t worker_bytes() const override {
    const auto rows = static_cast<std::size_t>(sh_.max_rows());
    return round64(2 * rows * sizeof(RowRef) +
                   static_cast<std::size_t>(segs_) * rows * static_cast<std::size_t>(sh_.row_floats()) * sizeof(float));
  }

  ConvShape sh_;
  const float* w_ = nullptr;     // packed weights
  const float* bias_ = nullptr;  // packed bias, per block of nc (zeros without one or past m)
  std::vector<int> toff_;        // per x tap: its offset in a copied row
  int segs_ = 1;                 // segments copied together
  JobFn job_ = nullptr;
};

ConvKernel::ConvKernel(const ConvShape& sh, const float* w, const float* bias, const graph::TNode& n)
    : PackedKernel(n), sh_(sh) {
  const int taps = sh_.taps(), blocks = sh_.blocks(), nc = sh_.nc;
  const std::size_t wfloats = static_cast<std::size_t>(blocks) * nc * sh_.c * taps;
  float* p = packed_.allocate(wfloats);  // the bias apart: PackedConstants says why
  float* b = packed_.allocate(static_cast<std::size_t>(blocks) * nc);
  if (p != nullptr) {
    for (int oc = 0; oc < sh_.m; ++oc) {
      const int blk = oc / nc, j = oc % nc;
      for (int ic = 0; ic < sh_.c; ++ic)
        for (int t = 0; t < taps; ++t)
          p[((static_cast<std::size_t>(blk) * sh_.c + ic) * taps + t) * nc + j] =
              w[(static_cast<std::size_t>(oc) * sh_.c + ic) * taps + t];
      if (bias != nullptr) b[oc] = bias[oc];
    }
    w_ = p;
    bias_ = b;
    packed_.track(&w_);
    packed_.track(&bias_);
  }
  for (int kw = 0; kw < sh_.k[2]; ++kw) toff_.push_back(sh_.tap_offset(kw));
  segs_ = segments_per_copy(sh_.max_rows() * sh_.row_floats(), (sh_.out[2] + sh_.seg() - 1) / sh_.seg());
  job_ = pick_job();
}

/// The job instantiation for this shape: stride 1 or 2, 1, 3 or any taps along x, 4, 2 or 1
/// channels per block.
ConvKernel::JobFn ConvKernel::pick_job() const {
  static constexpr JobFn kJobs[2][3][3] = {
      {{&ConvKernel::job<1, 1, 4>, &ConvKernel::job<1, 1, 2>, &ConvKernel::job<1, 1, 1>},
       {&ConvKernel::job<1, 3, 4>, &ConvKernel::job<1, 3, 2>, &ConvKernel::job<1, 3, 1>},
       {&ConvKernel::job<1, 0, 4>, &ConvKernel::job<1, 0, 2>, &ConvKernel::job<1, 0, 1>}},
      {{&ConvKernel::job<2, 1, 4>, &ConvKernel::job<2, 1, 2>, &ConvKernel::job<2, 1, 1>},
       {&ConvKernel::job<2, 3, 4>, &ConvKernel::job<2, 3, 2>, &ConvKernel::job<2, 3, 1>},
       {&ConvKernel::job<2, 0, 4>, &ConvKernel::job<2, 0, 2>, &ConvKernel::job<2, 0, 1>}}};
  const int kw = sh_.k[2] == 1 ? 0 : sh_.k[2] == 3 ? 1 : 2, nc = sh_.nc == 4 ? 0 : sh_.nc == 2 ? 1 : 2;
  return kJobs[sh_.s[2] - 1][kw][nc];
}

/// The valid input rows (ic, kd, kh) of output row (od, oh), in accumulation order, as offsets
/// from x.base.
int ConvKernel::collect_rows(const PlaneView& x, int od, int oh, RowScratch& rs) const {
  const ConvShape& s = sh_;
  const int stride = s.row_floats();
  int n = 0;
  for (int ic = 0; ic < s.c; ++ic) {
    for (int kd = 0; kd < s.k[0]; ++kd) {
      const int id = od * s.s[0] - s.p[0] + kd * s.d[0];
      if (id < 0 || id >= s.in[0]) continue;
      for (int kh = 0; kh < s.k[1]; ++kh) {
        const int ih = oh * s.s[1] - s.p[1] + kh * s.d[1];
        if (ih < 0 || ih >= s.in[1]) continue;
        const int w = ((ic * s.k[0] + kd) * s.k[1] + kh) * s.k[2] * s.nc;
        rs.rows[n] = {static_cast<std::int32_t>(x.at(ic, id, s.in_hw()) - x.base) + ih * s.in[2], w};
        rs.copied[n] = {n * stride, w};
        ++n;
      }
    }
  }
  return n;
}

template <int S, int KW, int NC>
void ConvKernel::job(const ConvIo& io, int od, int oh0, int oh1, int blk0, int blk1, RowScratch& rs) const {
  constexpr int kSeg = 32 / NC, kNv = 8 / NC;
  const ConvShape& s = sh_;
  const int ow_n = s.out[2];
  const std::ptrdiff_t wstride = static_cast<std::ptrdiff_t>(s.c) * s.taps() * NC;
  const float* xb = io.x.base;
  for (int oh = oh0; oh < oh1; ++oh) {
    const int nrows = collect_rows(io.x, od, oh, rs);
    const std::ptrdiff_t row_at = static_cast<std::ptrdiff_t>(oh) * ow_n;
    const std::ptrdiff_t seg_floats = static_cast<std::ptrdiff_t>(nrows) * s.row_floats();
    for (int xs = 0; xs < ow_n; xs += segs_ * kSeg) {
      const int nseg = std::min(segs_, (ow_n - xs + kSeg - 1) / kSeg);
      copy_segments<S>(xb, rs.rows, nrows, {xs * S - s.p[2], kSeg * S, nseg, s.chunks(), s.in[2], s.row_floats()},
                       rs.buf);
      for (int blk = blk0; blk < blk1; ++blk) {
        for (int q = 0; q < nseg; ++q) {
          // Bias first, then rows and taps in the reference's order (ic, kd, kh, kw).
          v128_t acc[8];
          for (int j = 0; j < NC; ++j)
            for (int v = 0; v < kNv; ++v) acc[j * kNv + v] = wasm_f32x4_splat(bias_[blk * NC + j]);
          accumulate<KW, NC>(rs.buf + q * seg_floats, rs.copied, nrows, w_ + blk * wstride, s.k[2], toff_.data(), acc);
          const int x0 = xs + q * kSeg, n = std::min(kSeg, ow_n - x0);
          for (int j = 0; j < NC && blk * NC + j < s.m; ++j) {
            const int oc = blk * NC + j;
            const std::ptrdiff_t at = row_at + x0;
            post_.finish<kNv>(acc + j * kNv, io.add.base ? io.add.at(oc, od, s.out_hw()) + at : nullptr,
                              io.y.at(oc, od, s.out_hw()) + at, n);
          }
        }
      }
    }
  }
}

template <class IoOf>
void ConvKernel::run_jobs_over(int items, int od0, int od1, ExecContext& ctx, IoOf&& io_of) const {
  QSM_ASSERT(w_ != nullptr, "a simd128 conv kernel from a dry plan was run");
  const int blocks = sh_.blocks(), planes = od1 - od0, oh_n = sh_.out[1];
  // A few planes (a conv chain's slab) are split along h too before they are split into
  // channel groups: every group copies the input rows again.
  const int threads = max_threads();
  const int splits =
      threads > 1 ? std::clamp((4 * threads + items * planes - 1) / std::max(1, items * planes), 1, oh_n) : 1;
  const int per = blocks_per_group(blocks, static_cast<std::int64_t>(sh_.c) * sh_.taps() * sh_.nc * 4,
                                   static_cast<std::int64_t>(items) * planes * splits);
  const int groups = (blocks + per - 1) / per;
  const std::int64_t jobs = static_cast<std::int64_t>(items) * planes * splits * groups;
  const auto rows = static_cast<std::size_t>(sh_.max_rows());
  run_jobs(jobs, worker_bytes(), ctx, [&](std::int64_t j, std::byte* scratch) {
    RowScratch rs{reinterpret_cast<RowRef*>(scratch), reinterpret_cast<RowRef*>(scratch) + rows,
                  reinterpret_cast<float*>(scratch + 2 * rows * sizeof(RowRef))};
    const int g = static_cast<int>(j % groups), part = static_cast<int>(j / groups % splits);
    const int plane = static_cast<int>(j / groups / splits);
    (this->*job_)(io_of(plane / planes), od0 + plane % planes, oh_n * part / splits, oh_n * (part + 1) / splits,
                  g * per, std::min(blocks, (g + 1) * per), rs);
  });
}

void ConvKernel::run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) {
  const int sum = post_.sum_input();
  const float* x = in[0].data<float>();
  const float* add = sum >= 0 ? in[static_cast<std::size_t>(sum)].data<float>() : nullptr;
  float* y = out[0].data<float>();
  run_jobs_over(sh_.n, 0, sh_.out[0], ctx,
                [&](int b) { return batch_item(x, add, y, b, sh_.c, sh_.m, sh_.in_plane(), sh_.out_plane()); });
}

void ConvKernel::run_planes(const PlaneView& x, const PlaneView& add, const PlaneView& y, int od0, int od1,
                            ExecContext& ctx) const {
  run_jobs_over(1, od0, od1, ctx, [&](int) { return ConvIo{x, add, y}; });
}

/// Completes a shape; false where this kernel declines it.
bool finish_shape(ConvShape& s) {
  flatten_pointwise(s);
  s.nc = s.m < 3 ? s.m : 4;
  // Stride 1 or 2 along x (the copies); a tap reach that keeps the copies small.
  return (s.s[2] == 1 || s.s[2] == 2) && s.row_floats() <= 256 && s.c > 0 && s.m > 0;
}

/// The node's shape in 3-D, or false where this kernel declines it.
bool conv_shape(const graph::TypedGraph& g, const graph::TNode& n, ConvShape& s) {
  const Shape& x = value_of(g, n.in[0]).shape;
  const Shape& w = value_of(g, n.in[1]).shape;
  if (x.size() < 3 || x.size() > 5) return false;
  const graph::ConvGeometry geo = graph::conv_geometry(n.node, x, w);
  if (geo.group != 1) return false;
  const graph::ops::Window win = graph::ops::window_3d(n.node, geo, x);
  s.n = static_cast<int>(x[0]), s.c = static_cast<int>(x[1]), s.m = static_cast<int>(w[0]);
  for (int i = 0; i < 3; ++i) {
    s.in[i] = static_cast<int>(win.in[i]), s.out[i] = static_cast<int>(win.out[i]);
    s.k[i] = static_cast<int>(win.kernel[i]), s.s[i] = static_cast<int>(win.stride[i]);
    s.d[i] = static_cast<int>(win.dil[i]), s.p[i] = static_cast<int>(win.pad_begin[i]);
  }
  return finish_shape(s);
}

/// The node's shape where this kernel takes it, weights not looked at: they may still be a
/// recipe (folded BatchNorm) when a graph pass asks.
bool conv_form(const graph::TypedGraph& g, const graph::TNode& n, ConvShape& s) {
  if (!all_f32(g, n) || n.in.size() < 2 || n.in[0] < 0 || n.in[1] < 0 || !value_of(g, n.in[1]).is_const()) return false;
  if (n.in.size() > 2 && n.in[2] >= 0 && !value_of(g, n.in[2]).is_const()) return false;
  return conv_shape(g, n, s);
}

/// The node's shape where this kernel takes it, with its weights in memory and finite.
bool conv_node(const graph::TypedGraph& g, const graph::TNode& n, ConvShape& s) {
  if (!conv_form(g, n, s)) return false;
  const graph::TValue& w = value_of(g, n.in[1]);
  if (w.constant == nullptr || !all_finite(w.constant->data<float>(), w.constant->numel())) return false;
  return !(n.in.size() > 2 && n.in[2] >= 0 && value_of(g, n.in[2]).constant == nullptr);
}

/// 3×3 in (h, w) at stride 1: conv_winograd.cpp's, where it pays.
bool winograd_form(const ConvShape& s) {
  return s.k[1] == 3 && s.k[2] == 3 && s.s[1] == 1 && s.s[2] == 1 && s.d[1] == 1 && s.d[2] == 1 &&
         winograd_pays(s.c, s.m, s.out[2]);
}

WinogradShape winograd_shape(const ConvShape& s) {
  WinogradShape w;
  w.n = s.n, w.c = s.c, w.m = s.m;
  for (int i = 0; i < 3; ++i) w.in[i] = s.in[i], w.out[i] = s.out[i];
  w.kd = s.k[0], w.sd = s.s[0], w.dd = s.d[0], w.pd = s.p[0];
  w.ph = s.p[1], w.pw = s.p[2];
  return w;
}

std::unique_ptr<PlaneKernel> make_conv_kernel(const graph::TypedGraph& g, const graph::TNode& n) {
  ConvShape s;
  if (!conv_node(g, n, s)) return nullptr;
  const bool has_bias = n.in.size() > 2 && n.in[2] >= 0;
  const float* bp = has_bias ? value_of(g, n.in[2]).constant->data<float>() : nullptr;
  const float* w = value_of(g, n.in[1]).constant->data<float>();
  if (winograd_form(s)) return make_winograd_conv(winograd_shape(s), w, bp, n);
  return std::make_unique<ConvKernel>(s, w, bp, n);
}

std::unique_ptr<Kernel> make_conv(const graph::TypedGraph& g, const graph::TNode& n) {
  return make_conv_kernel(g, n);
}

}  // namespace

std::unique_ptr<PlaneKernel> make_conv_planes(const graph::TypedGraph& g, const graph::TNode& n) {
  return make_conv_kernel(g, n);
}

bool conv_planes_supported(const graph::TypedGraph& g, const graph::TNode& n) {
  ConvShape s;
  if (!conv_form(g, n, s)) return false;
  // Weights already in memory are checked now; a recipe's (folded BatchNorm) only when built.
  const graph::TValue& w = value_of(g, n.in[1]);
  return w.constant == nullptr || all_finite(w.constant->data<float>(), w.constant->numel());
}

void register_conv_kernels(KernelTable& table) {
  table["Conv"] = &make_conv;
}

}  // namespace qsmcore::kernels::wasm
