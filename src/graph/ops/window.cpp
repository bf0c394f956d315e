#include "graph/ops/window.h"

#include <algorithm>

namespace qsmcore::graph::ops {
namespace {

std::vector<std::int64_t> per_dim(const Node& n, const char* name, std::size_t dims, std::int64_t def) {
  auto v = n.attrs.get_ints(name, std::vector<std::int64_t>(dims, def));
  if (v.size() != dims)
    invalid(n, std::string(name) + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(dims));
  for (auto x : v)
    if (x < 1) invalid(n, std::string(name) + " must be positive, got " + ints_to_string(v));
  return v;
}

void read_common(const Node& n, Window& w, const Shape& in, const std::vector<std::int64_t>& kernel) {
  const std::size_t d = in.size();
  if (kernel.size() != d)
    invalid(n, "kernel has " + std::to_string(kernel.size()) + " spatial dims, input has " + std::to_string(d));
  for (auto k : kernel)
    if (k < 1) invalid(n, "kernel_shape must be positive, got " + ints_to_string(kernel));
  w.in = in;
  w.kernel = kernel;
  w.stride = per_dim(n, "strides", d, 1);
  w.dil = per_dim(n, "dilations", d, 1);
  auto pads = n.attrs.get_ints("pads", std::vector<std::int64_t>(2 * d, 0));
  if (pads.size() != 2 * d)
    invalid(n, "pads has " + std::to_string(pads.size()) + " values, expected " + std::to_string(2 * d));
  for (auto p : pads)
    if (p < 0) invalid(n, "negative pads are not supported: " + ints_to_string(pads));
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(d));
  w.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(d), pads.end());
}

std::string auto_pad_of(const Node& n) {
  std::string a = n.attrs.get_string("auto_pad", "NOTSET");
  if (a != "NOTSET" && a != "SAME_UPPER" && a != "SAME_LOWER" && a != "VALID")
    invalid(n, "unsupported auto_pad value '" + a + "'");
  return a;
}

}  // namespace

Window Window::as_3d() const {
  Window w = *this;
  const std::size_t add = 3 - dims();
  auto pre = [add](std::vector<std::int64_t>& v, std::int64_t fill) { v.insert(v.begin(), add, fill); };
  pre(w.in, 1), pre(w.out, 1), pre(w.kernel, 1), pre(w.stride, 1), pre(w.dil, 1), pre(w.pad_begin, 0), pre(w.pad_end, 0);
  return w;
}

Shape spatial_dims(const Node& n, const Shape& s, const char* what) {
  if (s.size() < 3 || s.size() > 5)
    unsupported(n, std::string(what) + " has rank " + std::to_string(s.size()) + "; only 1-D to 3-D spatial inputs (rank 3 to 5) are supported");
  return Shape(s.begin() + 2, s.end());
}

Window forward_window(const Node& n, const Shape& in, const std::vector<std::int64_t>& kernel, bool ceil_mode) {
  Window w;
  read_common(n, w, in, kernel);
  const std::string ap = auto_pad_of(n);
  w.out.resize(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::int64_t ext = (w.kernel[i] - 1) * w.dil[i] + 1;  // dilated kernel extent
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      w.out[i] = (in[i] + w.stride[i] - 1) / w.stride[i];
      const std::int64_t total = std::max<std::int64_t>(0, (w.out[i] - 1) * w.stride[i] + ext - in[i]);
      w.pad_begin[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
      continue;
    }
    if (ap == "VALID") w.pad_begin[i] = w.pad_end[i] = 0;
    const std::int64_t span = in[i] + w.pad_begin[i] + w.pad_end[i] - ext;
    if (span < 0)
      invalid(n, "kernel extent " + std::to_string(ext) + " exceeds padded input size " +
                     std::to_string(in[i] + w.pad_begin[i] + w.pad_end[i]) + " in spatial dim " + std::to_string(i));
    w.out[i] = (ceil_mode ? (span + w.stride[i] - 1) / w.stride[i] : span / w.stride[i]) + 1;
    // With ceil_mode, a last window that would start inside the end padding is dropped
    // (PyTorch and onnxruntime agree on this).
    if (ceil_mode && (w.out[i] - 1) * w.stride[i] >= in[i] + w.pad_begin[i]) --w.out[i];
  }
  return w;
}

Window transposed_window(const Node& n, const Shape& in, const std::vector<std::int64_t>& kernel) {
  Window w;
  read_common(n, w, in, kernel);
  const std::string ap = auto_pad_of(n);
  const std::size_t d = in.size();
  auto out_pad = n.attrs.get_ints("output_padding", std::vector<std::int64_t>(d, 0));
  if (out_pad.size() != d) invalid(n, "output_padding has " + std::to_string(out_pad.size()) + " values, expected " + std::to_string(d));
  auto out_shape = n.attrs.get_ints("output_shape");
  if (out_shape.size() == d + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);  // N, C given too
  if (!out_shape.empty() && out_shape.size() != d)
    invalid(n, "output_shape " + ints_to_string(out_shape) + " does not match " + std::to_string(d) + " spatial dims");
  w.out.resize(d);
  for (std::size_t i = 0; i < d; ++i) {
    const std::int64_t ext = (w.kernel[i] - 1) * w.dil[i] + 1;
    const std::int64_t full = w.stride[i] * (in[i] - 1) + out_pad[i] + ext;  // output size with no pads
    if (!out_shape.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      w.out[i] = !out_shape.empty() ? out_shape[i] : in[i] * w.stride[i];
      const std::int64_t total = full - w.out[i];
      if (total < 0) invalid(n, "output_shape " + ints_to_string(out_shape) + " is larger than the input allows");
      // The spec: SAME_UPPER puts the extra pad at the end, everything else at the start.
      w.pad_begin[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
    } else {
      if (ap == "VALID") w.pad_begin[i] = w.pad_end[i] = 0;
      w.out[i] = full - w.pad_begin[i] - w.pad_end[i];
      if (w.out[i] < 1) invalid(n, "pads leave an empty output in spatial dim " + std::to_string(i));
    }
  }
  return w;
}

}  // namespace qsmcore::graph::ops
