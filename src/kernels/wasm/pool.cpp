// SIMD128 MaxPool / AveragePool for non-overlapping, unpadded windows (kernel = stride, no
// padding or dilation, every window inside the input: the U-Net down-sampling, kernel 2), on
// plain f32, 1-D to 3-D through the 3-D window, without MaxPool's Indices output. Anything else
// is declined to the reference kernel.
//
// Each output is folded over its window's taps in the reference's order (kd, kh, kw), with the
// reference's comparisons: MaxPool keeps the first tap and takes a later one only if greater
// (so a leading NaN stays and later NaNs are skipped, as in graph/ops/pool.cpp), AveragePool sums
// from 0 and divides by the tap count. Results are the reference's to the bit. Along x a window
// of 2 splits 8 inputs into even and odd taps for 4 outputs; a row's last outputs (fewer than 4)
// take the scalar path. Jobs are (batch·channel plane, od), reading and writing through plane
// views (plane_kernel.h), so a conv chain can pool a range of planes from its last window.
#include "graph/ops/window.h"
#include "kernels/wasm/backend.h"
#include "kernels/wasm/common.h"
#include "kernels/wasm/plane_kernel.h"

namespace qsmcore::kernels::wasm {
namespace {

struct PoolShape {
  int planes = 0;  // batch × channels
  int in[3] = {}, out[3] = {}, k[3] = {};
  int in_plane() const { return in[0] * in[1] * in[2]; }
  int out_plane() const { return out[0] * out[1] * out[2]; }
  int in_hw() const { return in[1] * in[2]; }
  int out_hw() const { return out[1] * out[2]; }
};

/// The fold of one tap into the running value: max as the reference compares, or a sum.
template <bool kMax>
inline v128_t fold(v128_t acc, v128_t x) {
  if constexpr (kMax) return wasm_v128_bitselect(x, acc, wasm_f32x4_gt(x, acc));
  return wasm_f32x4_add(acc, x);
}
template <bool kMax>
inline float fold(float acc, float x) {
  if constexpr (kMax) return x > acc ? x : acc;
  return acc + x;
}

template <bool kMax>
class PoolKernel final : public PlaneKernel {
 public:
  explicit PoolKernel(const PoolShape& s) : s_(s) {}
  void run(std::span<const Tensor> in, std::span<Tensor> out, ExecContext& ctx) override {
    // Batch and channels as one run of planes.
    run_planes({const_cast<float*>(in[0].data<float>()), s_.in_plane(), 0}, {},
               {out[0].data<float>(), s_.out_plane(), 0}, 0, s_.out[0], ctx);
  }
  void run_planes(const PlaneView& x, const PlaneView&, const PlaneView& y, int od0, int od1,
                  ExecContext&) const override {
    const int planes = od1 - od0;
    const std::int64_t jobs = static_cast<std::int64_t>(s_.planes) * planes;
    const bool parallel = jobs > 1 && static_cast<std::int64_t>(s_.in_hw()) * s_.k[0] * jobs > 32768;
    parallel_for(jobs, parallel, [&](std::int64_t j) {
      const int p = static_cast<int>(j / planes), od = od0 + static_cast<int>(j % planes);
      for (int oh = 0; oh < s_.out[1]; ++oh) {
        const float* xr = x.at(p, static_cast<std::ptrdiff_t>(od) * s_.k[0], s_.in_hw()) +
                          static_cast<std::ptrdiff_t>(oh) * s_.k[1] * s_.in[2];
        row(xr, y.at(p, od, s_.out_hw()) + static_cast<std::ptrdiff_t>(oh) * s_.out[2]);
      }
    });
  }
  std::string impl_name() const override { return kMax ? "simd128:maxpool" : "simd128:avgpool"; }

 private:
  /// One output row from the k[0]·k[1] input rows of its windows (the first at xr).
  void row(const float* xr, float* yr) const {
    const int ow = s_.out[2], kx = s_.k[2], taps = s_.k[0] * s_.k[1] * kx;
    const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(s_.in[1]) * s_.in[2];
    int o = 0;
    for (; o + 4 <= ow; o += 4) {
      v128_t acc = wasm_f32x4_splat(0.0f);
      bool first = true;
      for (int kd = 0; kd < s_.k[0]; ++kd) {
        for (int kh = 0; kh < s_.k[1]; ++kh) {
          const float* r = xr + kd * plane + static_cast<std::ptrdiff_t>(kh) * s_.in[2] + o * kx;
          const v128_t a = wasm_v128_load(r);
          if (kx == 1) {
            acc = first && kMax ? a : fold<kMax>(acc, a);
          } else {
            const v128_t b = wasm_v128_load(r + 4);
            const v128_t even = wasm_i32x4_shuffle(a, b, 0, 2, 4, 6), odd = wasm_i32x4_shuffle(a, b, 1, 3, 5, 7);
            acc = fold<kMax>(first && kMax ? even : fold<kMax>(acc, even), odd);
          }
          first = false;
        }
      }
      if (!kMax) acc = wasm_f32x4_div(acc, wasm_f32x4_splat(static_cast<float>(taps)));
      wasm_v128_store(yr + o, acc);
    }
    for (; o < ow; ++o) yr[o] = scalar(xr, o);
  }
  float scalar(const float* xr, int o) const {
    const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(s_.in[1]) * s_.in[2];
    float acc = 0.0f;
    bool first = true;
    for (int kd = 0; kd < s_.k[0]; ++kd)
      for (int kh = 0; kh < s_.k[1]; ++kh)
        for (int kw = 0; kw < s_.k[2]; ++kw) {
          const float v = xr[kd * plane + static_cast<std::ptrdiff_t>(kh) * s_.in[2] + o * s_.k[2] + kw];
          acc = first && kMax ? v : fold<kMax>(acc, v);
          first = false;
        }
    return kMax ? acc : acc / static_cast<float>(s_.k[0] * s_.k[1] * s_.k[2]);
  }

  PoolShape s_;
};

template <bool kMax>
std::unique_ptr<PlaneKernel> make_pool(const graph::TypedGraph& g, const graph::TNode& n) {
  if (!all_f32(g, n) || n.in.empty() || n.in[0] < 0 || (n.out.size() > 1 && n.out[1] >= 0) || !n.post.empty())
    return nullptr;
  const Shape& x = value_of(g, n.in[0]).shape;
  if (x.size() < 3 || x.size() > 5) return nullptr;
  const graph::ops::Window w = graph::ops::window_3d(n.node, graph::pool_geometry(n.node, x), x);
  PoolShape s;
  s.planes = static_cast<int>(x[0] * x[1]);
  for (int i = 0; i < 3; ++i) {
    s.in[i] = static_cast<int>(w.in[i]), s.out[i] = static_cast<int>(w.out[i]), s.k[i] = static_cast<int>(w.kernel[i]);
    const bool dense = w.stride[i] == w.kernel[i] && (w.kernel[i] == 1 || w.dil[i] == 1);
    if (!dense || w.pad_begin[i] != 0 || w.out[i] * w.kernel[i] > w.in[i]) return nullptr;
  }
  if (s.k[2] > 2 || s.planes == 0) return nullptr;
  return std::make_unique<PoolKernel<kMax>>(s);
}

}  // namespace

std::unique_ptr<PlaneKernel> make_pool_planes(const graph::TypedGraph& g, const graph::TNode& n) {
  return n.node.op_type == "MaxPool" ? make_pool<true>(g, n) : make_pool<false>(g, n);
}

void register_pool_kernels(KernelTable& table) {
  table["MaxPool"] = [](const graph::TypedGraph& g, const graph::TNode& n) -> std::unique_ptr<Kernel> {
    return make_pool<true>(g, n);
  };
  table["AveragePool"] = [](const graph::TypedGraph& g, const graph::TNode& n) -> std::unique_ptr<Kernel> {
    return make_pool<false>(g, n);
  };
}

}  // namespace qsmcore::kernels::wasm
