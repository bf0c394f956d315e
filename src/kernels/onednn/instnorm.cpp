// InstanceNormalization: oneDNN 2.6 has no primitive for it, so this is our own kernel. It
// reads plain NC... tensors and, to keep a conv -> IN -> conv chain blocked, oneDNN's
// channel-blocked layouts (nC[d][h]w8c / 16c) directly: there the lanes of a block are
// channels, so one vector carries 8 or 16 independent statistics. Mean and variance are
// two-pass and accumulated in double like the reference (planes of 64^3 voxels).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

constexpr int kLanes = 8;

/// acc[j] += sum over g of f(x[g*L + j]); the fixed L-wide inner loop vectorises.
template <int L = kLanes, class F>
void lane_sums(const float* x, std::int64_t groups, double* acc, F f) {
  for (std::int64_t g = 0; g < groups; ++g)
    for (int j = 0; j < L; ++j) acc[j] += f(x[g * L + j], j);
}

class InstanceNormKernel final : public Kernel {
 public:
  /// blk: 0 for plain, -1 for channels-last, else the channel block (8 or 16) of the layout.
  InstanceNormKernel(const Shape& x, int blk, float eps) : blk_(blk), eps_(eps) {
    n_ = x[0];
    c_ = x[1];
    spatial_ = numel(x) / (n_ * c_);
  }
  int inplace_input() const override { return 0; }
  std::string impl_name() const override { return blk_ > 0 ? "qsm:instnorm:blocked" + std::to_string(blk_) : blk_ < 0 ? "qsm:instnorm:nxc" : "qsm:instnorm:plain";
  }

  void run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext&) override {
    const float* x = in[0].data<float>();
    const float* scale = in[1].data<float>();
    const float* bias = in[2].data<float>();
    float* y = out[0].data<float>();
    if (blk_ < 0) run_channels_last(x, scale, bias, y);
    else if (blk_ == 16) run_blocked<16>(x, scale, bias, y);
    else if (blk_ == 8) run_blocked<8>(x, scale, bias, y);
    else run_plain(x, scale, bias, y);
  }

 private:
  void run_plain(const float* x, const float* scale, const float* bias, float* y) const {
    const std::int64_t planes = n_ * c_, s = spatial_, groups = s / kLanes, tail = groups * kLanes;
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t p = 0; p < planes; ++p) {
      const float* xp = x + p * s;
      float* yp = y + p * s;
      double acc[kLanes] = {};
      lane_sums(xp, groups, acc, [](float v, int) { return static_cast<double>(v); });
      double sum = 0;
      for (double a : acc) sum += a;
      for (std::int64_t i = tail; i < s; ++i) sum += xp[i];
      const double mean = sum / static_cast<double>(s);
      double q[kLanes] = {};
      lane_sums(xp, groups, q, [mean](float v, int) { const double d = v - mean; return d * d; });
      double var = 0;
      for (double a : q) var += a;
      for (std::int64_t i = tail; i < s; ++i) var += (xp[i] - mean) * (xp[i] - mean);
      var /= static_cast<double>(s);
      const std::int64_t ch = p % c_;
      const float a = static_cast<float>(scale[ch] / std::sqrt(var + eps_));
      const float b = static_cast<float>(bias[ch] - mean * a);
      for (std::int64_t i = 0; i < s; ++i) yp[i] = xp[i] * a + b;
    }
  }

  /// Blocked nC..Lc: unit (n, block) is S positions of L lanes; lanes past C are padding.
  template <int L>
  void run_blocked(const float* x, const float* scale, const float* bias, float* y) const {
    const std::int64_t cb = (c_ + L - 1) / L, s = spatial_;
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t u = 0; u < n_ * cb; ++u) {
      const std::int64_t c0 = (u % cb) * L;
      channels<L>(x + u * s * L, y + u * s * L, L, L, c0, scale, bias, true);
    }
  }

  /// Channels-last (n, spatial, C): unit (n, 16-channel group) reads rows C floats apart.
  void run_channels_last(const float* x, const float* scale, const float* bias, float* y) const {
    constexpr int L = 16;
    const std::int64_t groups = (c_ + L - 1) / L, s = spatial_;
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t u = 0; u < n_ * groups; ++u) {
      const std::int64_t bn = u / groups, c0 = (u % groups) * L;
      const std::int64_t off = bn * s * c_ + c0;
      channels<L>(x + off, y + off, c_, static_cast<int>(std::min<std::int64_t>(L, c_ - c0)), c0, scale, bias, false);
    }
  }

  /// Normalises `lanes` (<= L) channels starting at c0 whose values sit at xp[i * step + j].
  /// zero_pad: write zeros to lanes lanes..c_ (a blocked layout's padding, which may hold
  /// anything, even NaN) instead of leaving them.
  template <int L>
  void channels(const float* xp, float* yp, std::int64_t step, int lanes, std::int64_t c0, const float* scale,
                const float* bias, bool zero_pad) const {
    const std::int64_t s = spatial_;
    const int real = static_cast<int>(std::min<std::int64_t>(lanes, c_ - c0));
    double mean[L] = {}, var[L] = {};
    for (std::int64_t i = 0; i < s; ++i)
      for (int j = 0; j < lanes; ++j) mean[j] += xp[i * step + j];
    for (int j = 0; j < L; ++j) mean[j] /= static_cast<double>(s);
    for (std::int64_t i = 0; i < s; ++i)
      for (int j = 0; j < lanes; ++j) {
        const double d = xp[i * step + j] - mean[j];
        var[j] += d * d;
      }
    float a[L] = {}, b[L] = {};
    for (int j = 0; j < real; ++j) {
      a[j] = static_cast<float>(scale[c0 + j] / std::sqrt(var[j] / static_cast<double>(s) + eps_));
      b[j] = static_cast<float>(bias[c0 + j] - mean[j] * a[j]);
    }
    if (real == lanes) {
      for (std::int64_t i = 0; i < s; ++i)
        for (int j = 0; j < lanes; ++j) yp[i * step + j] = xp[i * step + j] * a[j] + b[j];
    } else {
      for (std::int64_t i = 0; i < s; ++i)
        for (int j = 0; j < lanes; ++j)
          if (j < real) yp[i * step + j] = xp[i * step + j] * a[j] + b[j];
          else if (zero_pad) yp[i * step + j] = 0.0f;
    }
  }

  int blk_;
  float eps_;
  std::int64_t n_ = 0, c_ = 0, spatial_ = 0;
};

/// What convs write: the channel block (8 or 16) of oneDNN's nC..8c / nC..16c blocking, -1
/// for channels-last (brgconv's choice on AVX-512), 0 for anything else.
int channel_block(const Layout& l, const Shape& s) {
  if (l.plain()) return 0;
  using tag = memory::format_tag;
  const memory::desc md = desc_of(l, s);
  const tag t8 = s.size() == 3 ? tag::aBc8b : s.size() == 4 ? tag::aBcd8b : tag::aBcde8b;
  const tag t16 = s.size() == 3 ? tag::aBc16b : s.size() == 4 ? tag::aBcd16b : tag::aBcde16b;
  if (md == memory::desc(to_dims(s), memory::data_type::f32, t8)) return 8;
  if (md == memory::desc(to_dims(s), memory::data_type::f32, t16)) return 16;
  const tag nxc = s.size() == 3 ? tag::acb : s.size() == 4 ? tag::acdb : tag::acdeb;
  if (md == memory::desc(to_dims(s), memory::data_type::f32, nxc)) return -1;
  return 0;
}

}  // namespace

std::unique_ptr<Kernel> make_instnorm(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                                      LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() != 3 || !n.post.empty()) return nullptr;
  for (int v : n.in)
    if (v < 0) return nullptr;
  const auto& x = value(g, n.in[0]);
  if (x.shape.size() < 3 || x.shape.size() > 5 || numel(x.shape) == 0) return nullptr;
  const int blk = channel_block(producer[0], x.shape);
  dec.inputs.assign(3, Layout{});
  dec.inputs[0] = blk ? producer[0] : Layout{};
  dec.outputs = {dec.inputs[0]};
  return std::make_unique<InstanceNormKernel>(x.shape, blk, n.node.attrs.get_float("epsilon", 1e-5f));
}

}  // namespace qsmcore::kernels::onednn
