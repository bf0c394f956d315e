#include "graph/conv_geometry.h"

#include <algorithm>

#include "core/checked_size.h"
#include "qsmcore/error.h"

namespace qsmcore::graph {
namespace {

[[noreturn]] void bad(const Node& n, const std::string& what) {
  throw Error(ErrorKind::InvalidModel, n.label() + ": " + what);
}

// Kernel extents, strides, dilations and output padding come from the file; bounding them (and
// pads by the largest tensor) keeps every output-size formula below far from wrapping an int64.
constexpr std::int64_t kMaxWindow = std::int64_t{1} << 20;

void check_range(const Node& n, const char* name, const std::vector<std::int64_t>& v, std::int64_t lo, std::int64_t hi) {
  for (auto x : v)
    if (x < lo || x > hi)
      bad(n, std::string("attribute '") + name + "' value " + std::to_string(x) + " is outside [" + std::to_string(lo) +
                 ", " + std::to_string(hi) + "]");
}

std::vector<std::int64_t> spatial_attr(const Node& n, const char* name, std::size_t rank, std::int64_t def) {
  auto v = n.attrs.get_ints(name, std::vector<std::int64_t>(rank, def));
  if (v.size() != rank) bad(n, std::string("attribute '") + name + "' has " + std::to_string(v.size()) +
                                   " values, expected " + std::to_string(rank));
  for (auto x : v)
    if (x < 1) bad(n, std::string("attribute '") + name + "' must be positive");
  check_range(n, name, v, 1, kMaxWindow);
  return v;
}

// Fills pads from auto_pad or the pads attribute, given the (effective) kernel extents.
void resolve_pads(const Node& n, ConvGeometry& g, const Shape& x, const std::vector<std::int64_t>& eff_kernel,
                  bool transpose) {
  const std::size_t rank = eff_kernel.size();
  const std::string auto_pad = n.attrs.get_string("auto_pad", "NOTSET");
  g.pads_begin.assign(rank, 0);
  g.pads_end.assign(rank, 0);
  if (auto_pad == "NOTSET") {
    auto pads = n.attrs.get_ints("pads", std::vector<std::int64_t>(2 * rank, 0));
    if (pads.size() != 2 * rank) bad(n, "attribute 'pads' has " + std::to_string(pads.size()) + " values, expected " +
                                            std::to_string(2 * rank));
    for (std::size_t i = 0; i < rank; ++i) {
      g.pads_begin[i] = pads[i];
      g.pads_end[i] = pads[i + rank];
      if (pads[i] < 0 || pads[i + rank] < 0) bad(n, "negative pads are not supported");
    }
    check_range(n, "pads", pads, 0, kMaxTensorBytes);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (std::size_t i = 0; i < rank; ++i) {
      const std::int64_t in = x[i + 2];
      std::int64_t total;
      if (!transpose) {
        const std::int64_t out = (in + g.strides[i] - 1) / g.strides[i];
        total = std::max<std::int64_t>(0, (out - 1) * g.strides[i] + eff_kernel[i] - in);
      } else {
        total = std::max<std::int64_t>(0, (in - 1) * g.strides[i] + eff_kernel[i] - in * g.strides[i]);
      }
      const std::int64_t small = total / 2;
      // SAME_UPPER puts the odd pad at the end, for Conv and ConvTranspose alike (the ONNX
      // spec and its 1.12 test data; onnxruntime swaps it for ConvTranspose).
      const bool extra_at_end = auto_pad == "SAME_UPPER";
      g.pads_begin[i] = extra_at_end ? small : total - small;
      g.pads_end[i] = total - g.pads_begin[i];
    }
  } else if (auto_pad != "VALID") {
    throw Error(ErrorKind::Unsupported, n.label() + ": unsupported auto_pad value '" + auto_pad + "'");
  }
}

// Rank checks and the group attribute, common to Conv and ConvTranspose.
ConvGeometry start_geometry(const Node& n, const Shape& x, const Shape& w) {
  if (x.size() < 3) bad(n, "input must have rank >= 3 (N, C, spatial...), got rank " + std::to_string(x.size()));
  if (w.size() != x.size()) bad(n, "weights rank " + std::to_string(w.size()) + " differs from input rank " +
                                       std::to_string(x.size()));
  ConvGeometry g;
  g.group = n.attrs.get_int("group", 1);
  return g;
}

}  // namespace

ConvGeometry conv_geometry(const Node& n, const Shape& x, const Shape& w) {
  ConvGeometry g = start_geometry(n, x, w);
  const std::size_t rank = x.size() - 2;
  if (g.group < 1 || x[1] % g.group != 0 || w[0] % g.group != 0)
    bad(n, "group " + std::to_string(g.group) + " does not divide the channels");
  if (!checked_mul(w[1], g.group) || w[1] * g.group != x[1])
    bad(n, "weights expect " + std::to_string(w[1] * g.group) + " input channels, input has " + std::to_string(x[1]));
  g.kernel.assign(w.begin() + 2, w.end());
  auto ks = n.attrs.get_ints("kernel_shape", g.kernel);
  if (ks != g.kernel) bad(n, "kernel_shape does not match the weights");
  check_range(n, "kernel_shape", g.kernel, 0, kMaxWindow);
  g.strides = spatial_attr(n, "strides", rank, 1);
  g.dilations = spatial_attr(n, "dilations", rank, 1);
  std::vector<std::int64_t> eff(rank);
  for (std::size_t i = 0; i < rank; ++i) eff[i] = (g.kernel[i] - 1) * g.dilations[i] + 1;
  resolve_pads(n, g, x, eff, false);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t span = x[i + 2] + g.pads_begin[i] + g.pads_end[i] - eff[i];
    if (span < 0) bad(n, "kernel larger than the padded input on spatial axis " + std::to_string(i));
    g.out_spatial.push_back(span / g.strides[i] + 1);
  }
  return g;
}

ConvGeometry conv_transpose_geometry(const Node& n, const Shape& x, const Shape& w) {
  ConvGeometry g = start_geometry(n, x, w);
  const std::size_t rank = x.size() - 2;
  if (g.group < 1 || x[1] % g.group != 0) bad(n, "group " + std::to_string(g.group) + " does not divide the channels");
  if (w[0] != x[1]) bad(n, "weights expect " + std::to_string(w[0]) + " input channels, input has " + std::to_string(x[1]));
  g.kernel.assign(w.begin() + 2, w.end());
  check_range(n, "kernel_shape", g.kernel, 0, kMaxWindow);
  g.strides = spatial_attr(n, "strides", rank, 1);
  g.dilations = spatial_attr(n, "dilations", rank, 1);
  auto out_pad = n.attrs.get_ints("output_padding", std::vector<std::int64_t>(rank, 0));
  if (out_pad.size() != rank) bad(n, "attribute 'output_padding' has the wrong length");
  check_range(n, "output_padding", out_pad, 0, kMaxWindow);
  std::vector<std::int64_t> eff(rank);
  for (std::size_t i = 0; i < rank; ++i) eff[i] = (g.kernel[i] - 1) * g.dilations[i] + 1;
  const auto output_shape = n.attrs.get_ints("output_shape");
  if (!output_shape.empty()) {
    // Explicit output size: total padding follows from it (SAME_UPPER-style split unless
    // auto_pad says SAME_LOWER).
    if (output_shape.size() < rank) bad(n, "attribute 'output_shape' has fewer values than spatial axes");
    const std::vector<std::int64_t> os(output_shape.end() - static_cast<std::ptrdiff_t>(rank), output_shape.end());
    check_range(n, "output_shape", os, 1, kMaxTensorBytes);
    const bool lower = n.attrs.get_string("auto_pad", "NOTSET") == "SAME_LOWER";
    g.pads_begin.assign(rank, 0);
    g.pads_end.assign(rank, 0);
    for (std::size_t i = 0; i < rank; ++i) {
      // An output_shape beyond what the convolution produces is allowed: the extra outputs see
      // no input and hold just the bias (padding clamps at 0).
      const std::int64_t total =
          std::max<std::int64_t>(0, g.strides[i] * (x[i + 2] - 1) + out_pad[i] + eff[i] - os[i]);
      g.pads_begin[i] = lower ? total - total / 2 : total / 2;
      g.pads_end[i] = total - g.pads_begin[i];
      g.out_spatial.push_back(os[i]);
    }
    return g;
  }
  resolve_pads(n, g, x, eff, true);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t o = g.strides[i] * (x[i + 2] - 1) + out_pad[i] + eff[i] - g.pads_begin[i] - g.pads_end[i];
    if (o < 1) bad(n, "output size is not positive on spatial axis " + std::to_string(i));
    g.out_spatial.push_back(o);
  }
  // output_padding adds at the end: oneDNN expresses it as less right padding.
  for (std::size_t i = 0; i < rank; ++i) g.pads_end[i] -= out_pad[i];
  return g;
}

ConvGeometry pool_geometry(const Node& n, const Shape& x) {
  if (x.size() < 3) bad(n, "input must have rank >= 3 (N, C, spatial...), got rank " + std::to_string(x.size()));
  const std::size_t rank = x.size() - 2;
  ConvGeometry g;
  g.kernel = n.attrs.get_ints("kernel_shape");
  if (g.kernel.size() != rank) bad(n, "attribute 'kernel_shape' must have " + std::to_string(rank) + " values");
  check_range(n, "kernel_shape", g.kernel, 1, kMaxWindow);
  g.strides = spatial_attr(n, "strides", rank, 1);
  g.dilations = spatial_attr(n, "dilations", rank, 1);
  std::vector<std::int64_t> eff(rank);
  for (std::size_t i = 0; i < rank; ++i) eff[i] = (g.kernel[i] - 1) * g.dilations[i] + 1;
  resolve_pads(n, g, x, eff, false);
  const bool ceil_mode = n.attrs.get_int("ceil_mode", 0) != 0;
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t span = x[i + 2] + g.pads_begin[i] + g.pads_end[i] - eff[i];
    if (span < 0) bad(n, "window larger than the padded input on spatial axis " + std::to_string(i));
    std::int64_t o = (ceil_mode ? (span + g.strides[i] - 1) / g.strides[i] : span / g.strides[i]) + 1;
    // The last window must start inside the input or its left padding (ONNX/PyTorch rule).
    if (ceil_mode && (o - 1) * g.strides[i] >= x[i + 2] + g.pads_begin[i]) --o;
    g.out_spatial.push_back(o);
  }
  return g;
}

}  // namespace qsmcore::graph
