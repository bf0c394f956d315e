// Conv and ConvTranspose (f32, 1-D to 3-D, groups, dilations, pads/auto_pad, optional bias).
// Both kernels run in 3-D (leading size-1 dims added) and parallelise over (batch, output
// channel): every output plane is written by one thread in a fixed order, so results do not
// depend on the thread count. The innermost loop runs over contiguous output x.
#include <algorithm>
#include <cstring>

#include "graph/ops/window.h"

namespace qsmcore::graph {
namespace ops {
namespace {

void check_inputs(const Node& n, const Inputs& in) {
  expect_inputs(n, in, 2, 3);
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i].present()) expect_float(n, in[i].dtype, i == 0 ? "X" : i == 1 ? "W" : "B");
}

struct ConvShapes {
  std::int64_t n = 0, c = 0, m = 0, group = 1;
  Window w;
};

ConvShapes conv_shapes(const Node& n, const Inputs& in, bool transposed) {
  check_inputs(n, in);
  const Shape& x = in[0].shape;
  const Shape& wt = in[1].shape;
  const ConvGeometry g = transposed ? conv_transpose_geometry(n, x, wt) : conv_geometry(n, x, wt);
  ConvShapes s;
  s.n = x[0];
  s.c = x[1];
  s.group = g.group;
  s.m = transposed ? wt[1] * g.group : wt[0];
  s.w = window_3d(n, g, x);
  if (has_input(in, 2) && in[2].shape != Shape{s.m})
    invalid(n, "B " + shape_to_string(in[2].shape) + " must have shape [" + std::to_string(s.m) + "]");
  return s;
}

std::vector<ValueType> conv_infer(const Node& n, const Inputs& in, bool transposed) {
  const ConvShapes s = conv_shapes(n, in, transposed);
  Shape out{s.n, s.m};
  const std::size_t skip = 3 - (in[0].shape.size() - 2);
  out.insert(out.end(), s.w.out + skip, s.w.out + 3);
  return one(DType::F32, out);
}

/// Everything both kernels unpack from the node and tensors: sizes, pointers and, per kernel
/// x-tap, the offset and the row range [lo, hi) where the tap stays inside the other side.
struct ConvRun {
  ConvShapes s;
  std::int64_t cg = 0, mg = 0, in_plane = 0, out_plane = 0, ksize = 0;
  const float* x = nullptr;
  const float* wt = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
  std::vector<std::int64_t> lo, hi, off;

  ConvRun(const Node& n, std::span<const Tensor> in, std::span<Tensor> out, bool transposed)
      : s(conv_shapes(n, types_of(in), transposed)) {
    const Window& w = s.w;
    cg = s.c / s.group, mg = s.m / s.group;
    in_plane = w.in[0] * w.in[1] * w.in[2];
    out_plane = w.out[0] * w.out[1] * w.out[2];
    ksize = w.kernel[0] * w.kernel[1] * w.kernel[2];
    x = in[0].data<float>();
    wt = in[1].data<float>();
    bias = has_input(in, 2) ? in[2].data<float>() : nullptr;
    y = out[0].data<float>();
    // Forward: output x reads input x*stride + off. Transposed: input x writes output x*stride + off.
    for (std::int64_t kw = 0; kw < w.kernel[2]; ++kw) {
      off.push_back(kw * w.dil[2] - w.pad_begin[2]);
      lo.push_back(0), hi.push_back(0);
      valid_range(off.back(), w.stride[2], transposed ? w.out[2] : w.in[2], transposed ? w.in[2] : w.out[2], lo.back(), hi.back());
    }
  }
  /// Output plane `job` = (batch, oc), initialised with the bias.
  float* plane(std::int64_t job) const {
    float* p = y + job * out_plane;
    std::fill(p, p + out_plane, bias ? bias[job % s.m] : 0.0f);
    return p;
  }
};

void conv_ref(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const ConvRun r(n, in, out, false);
  const ConvShapes& s = r.s;
  const Window& w = s.w;
  const std::int64_t cg = r.cg, mg = r.mg, in_plane = r.in_plane, ksize = r.ksize;
  const std::int64_t ID = w.in[0], IH = w.in[1], IW = w.in[2];
  const std::int64_t OD = w.out[0], OH = w.out[1], OW = w.out[2];
  const std::int64_t KD = w.kernel[0], KH = w.kernel[1], KW = w.kernel[2];
  const float* x = r.x;
  const float* wt = r.wt;
  const auto &lo = r.lo, &hi = r.hi, &off = r.off;
  const std::int64_t sw = w.stride[2];
  parallel_for(s.n * s.m, cg * ksize * r.out_plane, [&](std::int64_t job) {
    const std::int64_t b = job / s.m, oc = job % s.m, g = oc / mg;
    float* yp = r.plane(job);
    for (std::int64_t od = 0; od < OD; ++od) {
      for (std::int64_t oh = 0; oh < OH; ++oh) {
        float* yrow = yp + (od * OH + oh) * OW;
        // The output row stays in L1 while all taps of all input channels accumulate into it.
        for (std::int64_t icg = 0; icg < cg; ++icg) {
          const float* xp = x + (b * s.c + g * cg + icg) * in_plane;
          const float* wk = wt + (oc * cg + icg) * ksize;
          for (std::int64_t kd = 0; kd < KD; ++kd) {
            const std::int64_t id = od * w.stride[0] - w.pad_begin[0] + kd * w.dil[0];
            if (id < 0 || id >= ID) continue;
            for (std::int64_t kh = 0; kh < KH; ++kh) {
              const std::int64_t ih = oh * w.stride[1] - w.pad_begin[1] + kh * w.dil[1];
              if (ih < 0 || ih >= IH) continue;
              const float* xrow = xp + (id * IH + ih) * IW;
              const float* wrow = wk + (kd * KH + kh) * KW;
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const float wv = wrow[kw];
                const float* xs = xrow + off[kw];
                if (sw == 1) {
                  for (std::int64_t ox = lo[kw]; ox < hi[kw]; ++ox) yrow[ox] += wv * xs[ox];
                } else {
                  for (std::int64_t ox = lo[kw]; ox < hi[kw]; ++ox) yrow[ox] += wv * xs[ox * sw];
                }
              }
            }
          }
        }
      }
    }
  });
}

void conv_transpose_ref(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const ConvRun r(n, in, out, true);
  const ConvShapes& s = r.s;
  const Window& w = s.w;
  const std::int64_t cg = r.cg, mg = r.mg, in_plane = r.in_plane, ksize = r.ksize;
  const std::int64_t ID = w.in[0], IH = w.in[1], IW = w.in[2];
  const std::int64_t OD = w.out[0], OH = w.out[1], OW = w.out[2];
  const std::int64_t KD = w.kernel[0], KH = w.kernel[1], KW = w.kernel[2];
  const float* x = r.x;
  const float* wt = r.wt;
  const auto &lo = r.lo, &hi = r.hi, &off = r.off;
  const std::int64_t sw = w.stride[2];
  // Gather form per output plane (one thread each): output rows receive contributions from
  // every input row/tap that lands on them, accumulated in a fixed (icg, id, kd, ih, kh, kw) order.
  parallel_for(s.n * s.m, cg * ksize * in_plane, [&](std::int64_t job) {
    const std::int64_t b = job / s.m, oc = job % s.m, g = oc / mg, ocg = oc % mg;
    float* yp = r.plane(job);
    for (std::int64_t icg = 0; icg < cg; ++icg) {
      const std::int64_t ic = g * cg + icg;
      const float* xp = x + (b * s.c + ic) * in_plane;
      const float* wk = wt + (ic * mg + ocg) * ksize;
      for (std::int64_t id = 0; id < ID; ++id) {
        for (std::int64_t kd = 0; kd < KD; ++kd) {
          const std::int64_t od = id * w.stride[0] - w.pad_begin[0] + kd * w.dil[0];
          if (od < 0 || od >= OD) continue;
          for (std::int64_t ih = 0; ih < IH; ++ih) {
            const float* xrow = xp + (id * IH + ih) * IW;
            for (std::int64_t kh = 0; kh < KH; ++kh) {
              const std::int64_t oh = ih * w.stride[1] - w.pad_begin[1] + kh * w.dil[1];
              if (oh < 0 || oh >= OH) continue;
              float* yrow = yp + (od * OH + oh) * OW;
              const float* wrow = wk + (kd * KH + kh) * KW;
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const float wv = wrow[kw];
                float* ys = yrow + off[kw];
                if (sw == 1) {
                  for (std::int64_t ix = lo[kw]; ix < hi[kw]; ++ix) ys[ix] += wv * xrow[ix];
                } else {
                  for (std::int64_t ix = lo[kw]; ix < hi[kw]; ++ix) ys[ix * sw] += wv * xrow[ix];
                }
              }
            }
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace ops

void register_conv_ops(OpRegistry& r) {
  OpDef conv;
  conv.name = "Conv";
  conv.infer = [](const Node& n, const ops::Inputs& in) { return ops::conv_infer(n, in, false); };
  conv.ref = ops::conv_ref;
  r.add(std::move(conv));

  OpDef convt;
  convt.name = "ConvTranspose";
  convt.infer = [](const Node& n, const ops::Inputs& in) { return ops::conv_infer(n, in, true); };
  convt.ref = ops::conv_transpose_ref;
  r.add(std::move(convt));
}

}  // namespace qsmcore::graph
