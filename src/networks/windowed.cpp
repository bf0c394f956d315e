// Sliding-window inference (windowed.h).
#include "networks/windowed.h"

#include <algorithm>

#include "qsmcore/error.h"

namespace qsmcore::networks {

using tiling::Box;

namespace {

// Flips a row-major [C, D, H, W] block along volume axis `axis` (mapped through `order`).
void flip_tensor(float* t, std::int64_t channels, const Dims3& td, const tiling::AxisOrder& order, int axis) {
  int ta = 0;
  for (int k = 0; k < 3; ++k)
    if (order[static_cast<std::size_t>(k)] == axis) ta = k;
  const std::int64_t s[3] = {td[1] * td[2], td[2], 1};
  for (std::int64_t c = 0; c < channels; ++c) {
    float* b = t + c * td[0] * td[1] * td[2];
    for (std::int64_t i = 0; i < td[0]; ++i)
      for (std::int64_t j = 0; j < td[1]; ++j)
        for (std::int64_t k = 0; k < td[2]; ++k) {
          std::int64_t p[3] = {i, j, k};
          const std::int64_t mirror = td[ta] - 1 - p[ta];
          if (mirror <= p[ta]) continue;
          std::int64_t q[3] = {i, j, k};
          q[ta] = mirror;
          std::swap(b[p[0] * s[0] + p[1] * s[1] + p[2] * s[2]], b[q[0] * s[0] + q[1] * s[1] + q[2] * s[2]]);
        }
  }
}

// The wrapper's memory for the windows: its volumes (the blender's sums and weights, the output,
// one window's Gaussian weights) and, per window in flight, the packed input and the outputs.
Context::Reservation windowed_reservation(const WindowedSpec& w, const Box& b0, const Dims3& td, std::int64_t V,
                                          std::int64_t wrapper_fixed, std::int64_t workers, std::int64_t n) {
  const auto C = static_cast<std::int64_t>(w.channels.size());
  std::vector<Shape> shapes;
  if (w.separate_inputs)
    for (std::int64_t ch = 0; ch < C; ++ch) shapes.push_back({1, 1, td[0], td[1], td[2]});
  else
    shapes.push_back({1, C, td[0], td[1], td[2]});
  Context::Reservation res;
  res.shapes = {shapes};
  res.wrapper_fixed = wrapper_fixed + (w.out_channels + 1) * V * 8 + w.out_channels * V * 8 + b0.voxels() * 8 + 8192;
  res.wrapper_per_tile = C * b0.voxels() * 4 + 2 * w.out_channels * b0.voxels() * 4 + 8192;
  res.in_flight = workers;
  res.tiles = n;
  res.tileable = true;
  res.multiple = w.multiple;
  return res;
}

// One window through the network, once per flip set, each output flipped back; the mean of the
// outputs over the flips, per output tensor.
std::vector<Tensor> run_window(Context& c, const WindowedSpec& w, const Box& b, const Dims3& td,
                               const std::vector<std::vector<int>>& flips) {
  const auto C = static_cast<std::int64_t>(w.channels.size());
  std::vector<Tensor> acc;
  for (const auto& fl : flips) {
    std::vector<Tensor> ins;
    if (w.separate_inputs) {
      for (std::int64_t ch = 0; ch < C; ++ch) {
        ins.push_back(pack_channels({w.channels[static_cast<std::size_t>(ch)]}, w.dims, b, w.order, w.fill));
        for (int a : fl) flip_tensor(ins.back().data<float>(), 1, td, w.order, a);
      }
    } else {
      ins.push_back(pack_channels(w.channels, w.dims, b, w.order, w.fill));
      for (int a : fl) flip_tensor(ins.back().data<float>(), C, td, w.order, a);
    }
    std::vector<Tensor> outs = c.run_model(0, ins);
    for (std::size_t o = 0; o < outs.size(); ++o) {
      const std::int64_t oc = outs[o].numel() / b.voxels();
      for (int a : fl) flip_tensor(outs[o].data<float>(), oc, td, w.order, a);
      if (acc.size() <= o) {
        acc.push_back(outs[o]);
      } else {
        float* d = acc[o].data<float>();
        const float* s = outs[o].data<float>();
        for (std::int64_t k = 0; k < outs[o].numel(); ++k) d[k] += s[k];
      }
    }
  }
  if (flips.size() > 1)
    for (auto& a : acc)
      for (float& v : a.span<float>()) v /= static_cast<float>(flips.size());
  return acc;
}

// A window's output channels into the blender, weighted by `gw` (empty: uniform).
void blend_window(tiling::Blender& blend, const WindowedSpec& w, const Box& b, const std::vector<Tensor>& outs,
                  const std::vector<double>& gw) {
  std::int64_t ch0 = 0;
  for (const Tensor& o : outs) {
    const std::int64_t oc = o.numel() / b.voxels();
    for (std::int64_t ch = 0; ch < oc && ch0 + ch < w.out_channels; ++ch)
      tiling::unpack_box(o.data<float>() + ch * b.voxels(), w.dims, b, w.order, b,
                         [&](std::int64_t i, double v, std::int64_t local) {
                           blend.add(ch0 + ch, i, v, gw.empty() ? 1.0 : gw[static_cast<std::size_t>(local)]);
                         });
    ch0 += oc;
  }
}

}  // namespace

Volume run_windowed(Context& c, const WindowedSpec& w, const Volume& grid, std::int64_t wrapper_fixed) {
  const std::vector<Box> wins = tiling::windows(w.frame, w.window, w.starts);
  const auto n = static_cast<std::int64_t>(wins.size());
  const std::int64_t workers = std::max<std::int64_t>(1, std::min<std::int64_t>(c.pool(), n));
  c.load(static_cast<int>(std::max<std::int64_t>(1, c.pool() / workers)));
  const Box& b0 = wins.front();
  const Dims3 td = tiling::tensor_dims(b0, w.order);
  const std::int64_t in_flight = c.reserve(windowed_reservation(w, b0, td, grid.voxels(), wrapper_fixed, workers, n));

  c.stage("windows");
  tiling::Blender blend(w.dims, w.out_channels);
  const std::vector<double> gw = w.gaussian ? tiling::gaussian_weights(b0.size) : std::vector<double>{};
  std::vector<std::vector<Tensor>> results(static_cast<std::size_t>(n));
  const std::vector<std::vector<int>> flips = w.flips.empty() ? std::vector<std::vector<int>>{{}} : w.flips;
  // A streaming policy runs one forward at a time (its weight windows are per forward).
  tiling::run_waves(
      n, c.layer_major() ? 1 : in_flight,
      [&](std::int64_t t) {
        results[static_cast<std::size_t>(t)] = run_window(c, w, wins[static_cast<std::size_t>(t)], td, flips);
      },
      [&](std::int64_t t) {
        blend_window(blend, w, wins[static_cast<std::size_t>(t)], results[static_cast<std::size_t>(t)], gw);
        results[static_cast<std::size_t>(t)].clear();
        c.progress(static_cast<double>(t + 1) / static_cast<double>(n), "windows");
      });
  Volume out = Volume::zeros(w.dims, grid.geometry(), w.out_channels);
  for (std::int64_t ch = 0; ch < w.out_channels; ++ch) blend.finish(ch, out.frame(ch).data());
  return out;
}

}  // namespace qsmcore::networks
