// Resize (opsets 10, 11, 13) and Upsample (opsets 7, 9), f32. Interpolation is separable:
// each resized axis gets a table of taps (input index, weight) per output index, and the axes
// are applied one after another. That is exact for nearest and equal (up to rounding) to the
// n-linear / n-cubic forms of the spec. Opset 10 Resize and Upsample use the legacy geometry:
// asymmetric coordinates and onnxruntime's "simple" nearest rounding.
#include <algorithm>
#include <cmath>

#include "graph/ops/common.h"

namespace qsmcore::graph {
namespace ops {
namespace {

struct ResizeArgs {
  Shape out;
  std::vector<float> scales;  // per axis, as used by the coordinate transform
  // Resized length per axis as the coordinate transforms see it: in * scale when scales are
  // given (not floored: the ONNX reference and its align_corners cases use it so), else sizes.
  std::vector<double> out_len;
  std::vector<float> roi;     // tf_crop_and_resize: starts then ends
  std::string mode, coord, nearest;
  float cubic_a = -0.75f, extrapolation = 0.0f;
  bool exclude_outside = false, legacy = false;
};

bool given(const Inputs& in, std::size_t i) { return has_input(in, i) && numel(in[i].shape) > 0; }

ResizeArgs resize_args(const Node& n, const Inputs& in) {
  ResizeArgs a;
  const Shape& x = in[0].shape;
  const std::size_t rank = x.size();
  std::vector<float> scales;
  std::vector<std::int64_t> sizes;
  if (n.op_type == "Upsample") {
    a.legacy = true;
    scales = has_input(in, 1) ? const_floats(n, in, 1, "scales") : n.attrs.get_floats("scales");
  } else if (in.size() <= 2) {  // Resize-10: X, scales
    a.legacy = true;
    scales = const_floats(n, in, 1, "scales");
  } else {  // Resize-11/13: X, roi, scales, sizes
    if (given(in, 2)) scales = const_floats(n, in, 2, "scales");
    if (given(in, 3)) sizes = const_ints(n, in, 3, "sizes");
    if (given(in, 1)) a.roi = const_floats(n, in, 1, "roi");
    if (scales.empty() == sizes.empty()) invalid(n, "exactly one of scales and sizes must be given");
  }
  a.mode = n.attrs.get_string("mode", "nearest");
  if (a.mode == "bilinear" || a.mode == "trilinear") a.mode = "linear";  // Upsample-7 aliases
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic") unsupported(n, "unsupported mode '" + a.mode + "'");
  a.coord = a.legacy ? "asymmetric" : n.attrs.get_string("coordinate_transformation_mode", "half_pixel");
  static const char* kCoords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kCoords), std::end(kCoords), a.coord) == std::end(kCoords))
    unsupported(n, "unsupported coordinate_transformation_mode '" + a.coord + "'");
  a.nearest = a.legacy ? "simple" : n.attrs.get_string("nearest_mode", "round_prefer_floor");
  if (a.nearest != "simple" && a.nearest != "round_prefer_floor" && a.nearest != "round_prefer_ceil" && a.nearest != "floor" && a.nearest != "ceil")
    unsupported(n, "unsupported nearest_mode '" + a.nearest + "'");
  a.cubic_a = n.attrs.get_float("cubic_coeff_a", -0.75f);
  a.exclude_outside = n.attrs.get_int("exclude_outside", 0) != 0;
  a.extrapolation = n.attrs.get_float("extrapolation_value", 0.0f);
  if (n.attrs.get_int("antialias", 0) != 0) unsupported(n, "antialias is not supported");
  if (a.coord == "tf_crop_and_resize" && a.roi.size() != 2 * rank)
    invalid(n, "tf_crop_and_resize needs roi with " + std::to_string(2 * rank) + " values");
  if (!sizes.empty()) {
    if (sizes.size() != rank) invalid(n, "sizes " + ints_to_string(sizes) + " must have " + std::to_string(rank) + " values");
    a.out = sizes;
    for (std::size_t i = 0; i < rank; ++i) {
      if (sizes[i] < 0) invalid(n, "sizes " + ints_to_string(sizes) + " has a negative value");
      if (x[i] == 0 && sizes[i] != 0)  // nothing to interpolate from
        invalid(n, "sizes " + ints_to_string(sizes) + " resize the empty axis " + std::to_string(i) + " of " + shape_to_string(x));
      a.scales.push_back(x[i] ? static_cast<float>(sizes[i]) / static_cast<float>(x[i]) : 1.0f);
      a.out_len.push_back(static_cast<double>(sizes[i]));
    }
  } else {
    if (scales.size() != rank) invalid(n, "scales must have " + std::to_string(rank) + " values, got " + std::to_string(scales.size()));
    a.scales = scales;
    for (std::size_t i = 0; i < rank; ++i) {
      if (!(scales[i] > 0)) invalid(n, "scales must be positive");
      // Converting a length beyond int64 (an infinite or huge scale) is undefined: refuse it
      // here; the output shape is size-checked with every other op's.
      if (!(static_cast<double>(x[i]) * scales[i] < 0x1p62))
        invalid(n, "scales " + std::to_string(scales[i]) + " make axis " + std::to_string(i) + " too long");
      a.out_len.push_back(static_cast<double>(x[i]) * scales[i]);
      a.out.push_back(static_cast<std::int64_t>(std::floor(a.out_len.back())));
    }
  }
  return a;
}

/// Taps of one axis: for output j, `per` (index, weight) pairs; `outside[j]` = extrapolate.
struct Taps {
  int per = 1;
  std::vector<std::int64_t> idx;
  std::vector<float> w;
  std::vector<bool> outside;
  bool identity = true;
};

float original_coord(const ResizeArgs& a, std::size_t axis, std::int64_t j, std::int64_t in) {
  const double s = a.scales[axis], x = static_cast<double>(j);
  const double len_in = static_cast<double>(in), len_out = a.out_len[axis];
  if (a.coord == "half_pixel") return static_cast<float>((x + 0.5) / s - 0.5);
  if (a.coord == "pytorch_half_pixel") return len_out > 1 ? static_cast<float>((x + 0.5) / s - 0.5) : 0.0f;
  if (a.coord == "align_corners") return len_out == 1 ? 0.0f : static_cast<float>(x * (len_in - 1) / (len_out - 1));
  if (a.coord == "tf_half_pixel_for_nn") return static_cast<float>((x + 0.5) / s);
  if (a.coord == "tf_crop_and_resize") {
    const double b = a.roi[axis], e = a.roi[axis + a.scales.size()];
    return len_out > 1 ? static_cast<float>(b * (len_in - 1) + x * (e - b) * (len_in - 1) / (len_out - 1))
                   : static_cast<float>(0.5 * (b + e) * (len_in - 1));
  }
  return static_cast<float>(x / s);  // asymmetric
}

std::int64_t round_nearest(const ResizeArgs& a, float x, bool down) {
  const float f = std::floor(x);
  if (a.nearest == "floor") return static_cast<std::int64_t>(f);
  if (a.nearest == "ceil") return static_cast<std::int64_t>(std::ceil(x));
  if (a.nearest == "simple") return static_cast<std::int64_t>(down ? std::ceil(x) : f);
  if (x - f == 0.5f) return static_cast<std::int64_t>(a.nearest == "round_prefer_ceil" ? f + 1 : f);
  return static_cast<std::int64_t>(std::round(x));
}

void cubic_coeffs(float t, float A, float c[4]) {
  const float t1 = t + 1, u = 1 - t, u1 = u + 1;
  c[0] = ((A * t1 - 5 * A) * t1 + 8 * A) * t1 - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * u - (A + 3)) * u * u + 1;
  c[3] = ((A * u1 - 5 * A) * u1 + 8 * A) * u1 - 4 * A;
}

Taps make_taps(const ResizeArgs& a, std::size_t axis, std::int64_t in, std::int64_t out) {
  Taps t;
  t.per = a.mode == "nearest" ? 1 : a.mode == "linear" ? 2 : 4;
  const auto clampi = [in](std::int64_t i) { return std::clamp<std::int64_t>(i, 0, in - 1); };
  for (std::int64_t j = 0; j < out; ++j) {
    float x = original_coord(a, axis, j, in);
    const bool outside = a.coord == "tf_crop_and_resize" && (x < 0 || x > static_cast<float>(in - 1));
    // Every tap index is clamped to the axis, so a coordinate a few elements beyond it gives the
    // same taps and weights as one further out; clamping keeps a huge or NaN coordinate (a tiny
    // scale, a hostile roi) from an undefined float-to-int64 conversion.
    const float lo = -4.0f, hi = static_cast<float>(in) + 3.0f;
    if (!(x >= lo)) x = lo;
    if (x > hi) x = hi;
    t.outside.push_back(outside);
    if (a.mode == "nearest") {
      t.idx.push_back(clampi(round_nearest(a, x, a.scales[axis] < 1)));
      t.w.push_back(1.0f);
    } else {
      const float f = std::floor(x), r = x - f;
      const auto i0 = static_cast<std::int64_t>(f);
      float c[4] = {1 - r, r, 0, 0};
      std::int64_t first = i0;
      if (t.per == 4) cubic_coeffs(r, a.cubic_a, c), first = i0 - 1;
      float sum = 0;
      for (int p = 0; p < t.per; ++p) {
        const std::int64_t i = first + p;
        if (a.exclude_outside && (i < 0 || i >= in)) c[p] = 0;
        sum += c[p];
      }
      for (int p = 0; p < t.per; ++p) {
        t.idx.push_back(clampi(first + p));
        t.w.push_back(a.exclude_outside && sum != 0 ? c[p] / sum : c[p]);
      }
    }
    // An axis is the identity when every output takes exactly its own input element.
    bool own = !outside && out == in;
    for (int p = 0; p < t.per && own; ++p) {
      const std::size_t k = static_cast<std::size_t>(j * t.per + p);
      own = t.w[k] == 0.0f || (t.idx[k] == j && t.w[k] == 1.0f);
    }
    t.identity = t.identity && own;
  }
  return t;
}

/// Resamples `x` (shape s) along `axis` into `y` (shape s with s[axis] = out).
void apply_axis(const float* x, float* y, const Shape& s, std::size_t axis, std::int64_t out, const Taps& t, float extrap) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i < axis) outer *= s[i];
    else if (i > axis) inner *= s[i];
  }
  const std::int64_t in = s[axis];
  parallel_for(outer * out, inner * t.per, [&](std::int64_t job) {
    const std::int64_t o = job / out, j = job % out;
    float* yr = y + job * inner;
    if (t.outside[static_cast<std::size_t>(j)]) {
      std::fill(yr, yr + inner, extrap);
      return;
    }
    std::fill(yr, yr + inner, 0.0f);
    for (int p = 0; p < t.per; ++p) {
      const std::size_t k = static_cast<std::size_t>(j * t.per + p);
      const float w = t.w[k];
      const float* xr = x + (o * in + t.idx[k]) * inner;
      for (std::int64_t i = 0; i < inner; ++i) yr[i] += w * xr[i];
    }
  });
}

OpDef resize_def(const char* name, std::vector<int> consts) {
  OpDef d;
  d.name = name;
  d.const_inputs = std::move(consts);
  d.infer = [](const Node& n, const Inputs& in) {
    expect_inputs(n, in, 1, 4);
    expect_float(n, in[0].dtype, "X");
    return one(DType::F32, resize_args(n, in).out);
  };
  d.ref = [](const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
    Inputs types = types_of(in);
    for (std::size_t i = 1; i < in.size(); ++i) types[i].value = in[i].defined() ? &in[i] : nullptr;
    const ResizeArgs a = resize_args(n, types);
    Shape cur = in[0].shape();
    Tensor bufs[2];
    const float* src = in[0].data<float>();
    std::vector<std::size_t> axes;
    std::vector<Taps> taps;
    for (std::size_t ax = 0; ax < cur.size(); ++ax) {
      Taps t = make_taps(a, ax, cur[ax], a.out[ax]);
      if (!t.identity) axes.push_back(ax), taps.push_back(std::move(t));
    }
    if (axes.empty() && out[0].nbytes()) std::memcpy(out[0].raw(), src, out[0].nbytes());
    for (std::size_t k = 0; k < axes.size(); ++k) {
      Shape next = cur;
      next[axes[k]] = a.out[axes[k]];
      float* dst = out[0].data<float>();
      if (k + 1 < axes.size()) {  // intermediate: ping-pong scratch tensors
        bufs[k % 2] = Tensor::empty(DType::F32, next, MemCategory::Scratch);
        dst = bufs[k % 2].data<float>();
      }
      apply_axis(src, dst, cur, axes[k], a.out[axes[k]], taps[k], a.extrapolation);
      src = dst;
      cur = next;
    }
  };
  return d;
}

}  // namespace
}  // namespace ops

void register_resize_ops(OpRegistry& r) {
  r.add(ops::resize_def("Resize", {1, 2, 3}));
  r.add(ops::resize_def("Upsample", {1}));
}

}  // namespace qsmcore::graph
