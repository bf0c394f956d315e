// SUSEP-Net, χ-sepnet and R2PRIMEnet (models.md §5): z-scored, masked inputs; end-padded frame;
// SNU-LIST 0.75-stride windows averaged uniformly; de-normalised outputs.
#include <algorithm>
#include <cmath>

#include "networks/windowed.h"
#include "qsmcore/error.h"

namespace qsmcore::networks {

using tiling::Box;

namespace {

Volume zscored(const Volume& v, const ZScore& z, const Volume* mask, double scale = 1.0) {
  Volume out = make_like(v);
  const auto s = v.frame(0);
  auto d = out.values();
  for (std::size_t i = 0; i < d.size(); ++i)
    d[i] = inside(mask, static_cast<std::int64_t>(i)) ? (s[i] * scale - z.mean) / z.std : 0.0;
  return out;
}

// Window and frame: by default network_input_shape's window (the network's window, or the whole
// volume, rounded up to the multiple and capped at the volume rounded up to it: [O] a window
// never exceeds what the volume needs); a requested window is rounded and capped the same way.
// The frame is the volume end-padded to at least the window and no further, so the last window
// ends on the volume's last voxel as in the authors' recon.py (`pad = max(0, PATCH[k] - X)`; #19).
std::pair<Dims3, Box> window_frame(Context& c, const Dims3& dims, std::int64_t m) {
  Dims3 win = input_shape(c, dims);
  if (c.opts.tile)
    for (int a = 0; a < 3; ++a)
      if (c.opts.tile->core[a] > 0)
        win[a] = std::min(tiling::round_up(c.opts.tile->core[a], m), tiling::round_up(dims[a], m));
  const Box frame = tiling::pad_frame(dims, {1, 1, 1}, tiling::PadRule::End, win);
  return {win, frame};
}

}  // namespace

void run_susep(Context& c) {
  const Volume& grid = *c.in.field;
  const Volume* mask = c.in.mask;
  const std::int64_t m = std::max<std::int64_t>(c.spec.pad_multiple[0], 8);
  const auto [win, frame] = window_frame(c, grid.dims(), m);
  c.stage("prepare");
  Volume q = zscored(*c.in.qsm, {-6.0663105e-5, 0.023533047}, mask);
  Volume r = zscored(*c.in.r2prime, {4.7629275, 10.889079}, mask);
  Volume l =
      zscored(grid, {-4.8702253e-5, 0.012554166}, mask, field_to_ppm_factor(c.in.field_unit, c.in.b0_tesla, c.in.te_s));
  WindowedSpec w;
  w.channels = {q.data(), r.data(), l.data()};
  w.dims = grid.dims();
  w.frame = frame;
  w.window = win;
  w.starts = tiling::snu_starts;
  w.separate_inputs = true;
  w.out_channels = 2;
  w.multiple = m;
  Volume o = run_windowed(c, w, grid, 3 * grid.voxels() * 8);
  Volume pos = make_like(grid), neg = make_like(grid), tot = make_like(grid);
  for (std::int64_t i = 0; i < grid.voxels(); ++i) {
    if (!inside(mask, i)) continue;
    const double p = o.frame(0)[static_cast<std::size_t>(i)] * 0.025519046 + 0.0089528897;
    const double n = -std::abs(o.frame(1)[static_cast<std::size_t>(i)] * 0.019603666 + 0.0090135528);
    pos.data()[i] = p;
    neg.data()[i] = n;
    tot.data()[i] = p + n;
  }
  add_output(c, "chi_pos", "ppm", std::move(pos));
  add_output(c, "chi_neg", "ppm", std::move(neg));
  add_output(c, "chi_total", "ppm", std::move(tot));
}

void run_chisepnet(Context& c) {
  const Volume& grid = *c.in.field;
  const Volume* mask = c.in.mask;
  const std::int64_t m = std::max<std::int64_t>(c.spec.pad_multiple[0], 16);
  const auto [win, frame] = window_frame(c, grid.dims(), m);
  c.stage("prepare");
  constexpr double kDr = 114.0;
  Volume q = zscored(*c.in.qsm, {-0.0013402086915448308, 0.031504031270742416}, mask);
  Volume f = zscored(grid, {-0.0026045702397823334, 0.010849659331142902}, mask,
                     field_to_ppm_factor(c.in.field_unit, c.in.b0_tesla, c.in.te_s));
  Volume r = zscored(*c.in.r2prime, {0.05141879618167877, 0.06977531313896179}, mask, 1.0 / kDr);
  WindowedSpec w;
  w.channels = {q.data(), f.data(), r.data()};
  w.dims = grid.dims();
  w.frame = frame;
  w.window = win;
  w.starts = tiling::snu_starts;
  w.out_channels = 2;
  w.multiple = m;
  Volume o = run_windowed(c, w, grid, 3 * grid.voxels() * 8);
  Volume pos = make_like(grid), neg = make_like(grid);
  for (std::int64_t i = 0; i < grid.voxels(); ++i) {
    if (!inside(mask, i)) continue;
    // The authors zero-truncate both maps (SNU-LIST/chi_sepnet Code/test.py inference(),
    // "Zero-truncation": pred[pred < 0] = 0); χ− is returned with its sign, ≤ 0.
    pos.data()[i] = std::max(0.0, o.frame(0)[static_cast<std::size_t>(i)] * 0.03526417911052704 + 0.025912819430232048);
    neg.data()[i] =
        -std::max(0.0, o.frame(1)[static_cast<std::size_t>(i)] * 0.027936099097132683 + 0.026700690388679504);
  }
  add_output(c, "chi_pos", "ppm", std::move(pos));
  add_output(c, "chi_neg", "ppm", std::move(neg));
}

void run_r2primenet(Context& c) {
  const Volume& grid = *c.in.r2star;
  const Volume* mask = c.in.mask;
  const double b0 = *c.in.b0_tesla;
  if (std::abs(b0 - 3.0) > 0.3) {
    const std::string msg = c.id() + " was trained at 3 T only; B0 = " + std::to_string(b0) +
                            " T is outside 3 \u00b1 0.3 T (outside the trained domain)";
    if (!c.opts.ignore_domain) throw Error(ErrorKind::InvalidInput, msg + "; set ignore_domain to run anyway");
    c.warn(msg);
  }
  const std::int64_t m = std::max<std::int64_t>(c.spec.pad_multiple[0], 16);
  const auto [win, frame] = window_frame(c, grid.dims(), m);
  c.stage("prepare");
  Volume r = zscored(grid, {0.15865366160869598, 0.07501979172229767}, mask, 1.0 / 114.0);
  WindowedSpec w;
  w.channels = {r.data()};
  w.dims = grid.dims();
  w.frame = frame;
  w.window = win;
  w.starts = tiling::snu_starts;
  w.multiple = m;
  Volume o = run_windowed(c, w, grid, grid.voxels() * 8);
  Volume out = make_like(grid);
  for (std::int64_t i = 0; i < grid.voxels(); ++i)
    if (inside(mask, i))
      out.data()[i] = std::max(0.0, (o.data()[i] * 0.06977531313896179 + 0.05141879618167877) * 114.0);
  add_output(c, "r2prime", "Hz", std::move(out));
}

}  // namespace qsmcore::networks
