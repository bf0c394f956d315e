// HD-BET, RS2-Net (brain extraction) and SynthSeg 1.0/2.0 (segmentation) on magnitude images
// (models.md §5), each resampled to its network's voxel size and back (networks/resample.h);
// SynthSeg's topology clean-up is in networks/topology.h.
#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <vector>

#include "networks/resample.h"
#include "networks/topology.h"
#include "networks/windowed.h"
#include "qsmcore/error.h"

namespace qsmcore::networks {

using tiling::Box;

namespace {

// Brain extraction's input: the magnitude's root sum of squares over echoes, cropped to its
// non-zero box, z-scored and resampled to the network's spacing (nnU-Net's rule, `order` cubic
// for HD-BET, linear for RS2-Net). Empty (after writing an empty mask) when the image is all zero.
struct BetInput {
  Box bb;
  Volume img;   // on the network's grid
  Vec3 from{};  // the input's spacing
  Vec3 to{};    // the network's
};

std::optional<BetInput> bet_input(Context& c, const Vec3& target_mm, Interp order) {
  Volume img = rss_frames(*c.in.magnitude);
  const Box bb = nonzero_bbox(img);
  if (bb.voxels() == 0) {
    c.warn(c.id() + ": the magnitude image is zero everywhere; the mask is empty");
    add_output(c, "mask", "label", make_like(*c.in.magnitude));
    return std::nullopt;
  }
  Volume cimg = crop_box(img, bb);
  auto [mean, sd] = mean_std(cimg);
  sd = std::max(sd, 1e-8);
  for (double& v : cimg.values()) v = (v - mean) / sd;
  const Vec3 from = c.in.magnitude->voxel_mm();
  const Dims3 rd = dims_at_spacing(bb.size, from, target_mm);
  return BetInput{bb, nnunet_resample(cimg, rd, order, from, target_mm), from, target_mm};
}

// Bytes the wrapper holds besides the windowed blender: the RSS image, the crop and the
// resampling intermediates of the input and of the logits (`channels`) on the way back.
std::int64_t bet_fixed_bytes(const Context& c, const BetInput& in, std::int64_t channels) {
  const std::int64_t big = std::max(in.img.voxels(), in.bb.voxels());
  return 3 * c.in.magnitude->voxels() * 8 + (3 + 3 * channels) * big * 8;
}

// The logits on the network grid back to the crop box (linear, nearest through-plane if
// anisotropic), thresholded by `fg` and un-cropped into a mask on the input grid.
template <class Fg>
void bet_output(Context& c, const BetInput& in, const Volume& logits, Fg fg) {
  const Volume back = nnunet_resample(logits, in.bb.size, Interp::Linear, in.to, in.from);
  Volume mask = make_like(*c.in.magnitude);
  const Box& bb = in.bb;
  for (std::int64_t k = 0; k < bb.size[2]; ++k)
    for (std::int64_t j = 0; j < bb.size[1]; ++j)
      for (std::int64_t i = 0; i < bb.size[0]; ++i)
        mask.at(bb.origin[0] + i, bb.origin[1] + j, bb.origin[2] + k) = fg(back, i, j, k) ? 1.0 : 0.0;
  add_output(c, "mask", "label", std::move(mask));
}

}  // namespace

void run_hdbet(Context& c) {
  // Patch (x, y, z) = (192, 192, 96); multiples (x, y, z) = (32, 32, 16) (pad_multiple is z, y, x).
  const Dims3 multiple{c.spec.pad_multiple[2], c.spec.pad_multiple[1], c.spec.pad_multiple[0]};
  c.stage("prepare");
  auto input = bet_input(c, {1.0, 1.0, 1.0}, Interp::Cubic);
  if (!input) return;
  const Volume& img = input->img;
  const Dims3 rd = img.dims();
  // The window (x, y, z): network_input_shape's (192, 192, 96) capped at the volume, which it
  // returns in the graph's (z, y, x) order; a requested window is rounded and capped the same way.
  const Dims3 zyx = input_shape(c, rd);
  Dims3 win{zyx[2], zyx[1], zyx[0]};
  if (c.opts.tile)
    for (int a = 0; a < 3; ++a)
      if (c.opts.tile->core[a] > 0)
        win[a] = std::min(tiling::round_up(c.opts.tile->core[a], multiple[a]), tiling::round_up(rd[a], multiple[a]));
  WindowedSpec w;
  w.channels = {img.data()};
  w.dims = rd;
  // nnU-Net pads the volume only up to the patch (predict_from_raw_data.py: pad_nd_image(data,
  // patch_size)), so on an extent above the patch the last window ends on the last voxel (#19).
  w.frame = tiling::pad_frame(rd, {1, 1, 1}, tiling::PadRule::CentredFloor, win);
  w.window = win;
  w.starts = [](std::int64_t s, std::int64_t p) { return tiling::nnunet_starts(s, p, 0.5); };
  w.gaussian = true;
  w.order = tiling::kZYX;
  w.out_channels = 2;
  w.multiple = *std::max_element(multiple.begin(), multiple.end());
  if (c.opts.test_time_flips && c.opts.hdbet_mirroring)
    w.flips = {{}, {0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
  Volume o = run_windowed(c, w, img, bet_fixed_bytes(c, *input, 2));
  // Foreground where its logit beats the background's (a tie is background).
  bet_output(c, *input, o, [](const Volume& b, std::int64_t i, std::int64_t j, std::int64_t k) {
    return b.at(i, j, k, 1) > b.at(i, j, k, 0);
  });
}

void run_rs2net(Context& c) {
  // The fixed patch comes from the graph, in its (D, H, W) = (y, z, x) order.
  c.load(c.pool());
  const auto p = static_spatial(c.model(0).inputs().at(0));
  if (!p) throw Error(ErrorKind::InvalidInput, c.id() + ": the graph must have a fixed [1,1,D,H,W] input");
  const tiling::AxisOrder order = tiling::kYZX;
  Dims3 win{};
  for (int k = 0; k < 3; ++k) win[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = (*p)[k];
  const Dims3 one{1, 1, 1};
  c.stage("prepare");
  // The target spacing (0.25, 0.2, 0.16) mm is in the transposed (y, z, x) order: x 0.16, y 0.25,
  // z 0.2. Resampling on the volume's own axes makes the way back use the matching (transposed)
  // spacing, the reference's deliberate fix.
  auto input = bet_input(c, {0.16, 0.25, 0.2}, Interp::Linear);
  if (!input) return;
  const Volume& img = input->img;
  // A fixed-shape graph: the window never shrinks below the patch, the frame is padded up to it.
  WindowedSpec w;
  w.channels = {img.data()};
  w.dims = img.dims();
  w.frame = tiling::pad_frame(img.dims(), one, tiling::PadRule::CentredFloor, win);
  w.window = win;
  w.starts = [](std::int64_t s, std::int64_t pp) { return tiling::nnunet_starts(s, pp, 0.5); };
  // The authors blend windows with nnU-Net's Gaussian and mirror each along all three axes by
  // default (VitoLin21/Rodent-Skull-Stripping RS2/inference/predict.py: use_gaussian=True,
  // use_mirroring = not --disable_tta, mirror axes (0, 1, 2); #19).
  w.gaussian = true;
  if (c.opts.test_time_flips) w.flips = {{}, {0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
  w.order = order;
  w.out_channels = 1;
  w.multiple = 32;
  Volume o = run_windowed(c, w, img, bet_fixed_bytes(c, *input, 1));
  bet_output(c, *input, o,
             [](const Volume& b, std::int64_t i, std::int64_t j, std::int64_t k) { return b.at(i, j, k) > 0.0; });
}

namespace {

// Voxel axes → RAS: ras_axis[c] = the scanner axis voxel axis c runs along, flip[c] when it runs
// backwards (L, P or I).
struct Orientation {
  std::array<int, 3> ras_of_axis{0, 1, 2};
  std::array<bool, 3> flip{false, false, false};
};

Orientation orientation(const Affine& a) {
  Orientation o;
  std::array<bool, 3> used{false, false, false};
  for (int c = 0; c < 3; ++c) {
    const Vec3 col = a.axis(c);
    int best = -1;
    for (int r = 0; r < 3; ++r)
      if (!used[static_cast<std::size_t>(r)] && (best < 0 || std::abs(col[r]) > std::abs(col[best]))) best = r;
    used[static_cast<std::size_t>(best)] = true;
    o.ras_of_axis[static_cast<std::size_t>(c)] = best;
    o.flip[static_cast<std::size_t>(c)] = col[best] < 0;
  }
  return o;
}

// Index in the RAS volume of voxel (i, j, k).
std::array<std::int64_t, 3> to_ras(const Orientation& o, const Dims3& dims, std::int64_t i, std::int64_t j,
                                   std::int64_t k) {
  const std::int64_t p[3] = {i, j, k};
  std::array<std::int64_t, 3> r{};
  for (int c = 0; c < 3; ++c)
    r[static_cast<std::size_t>(o.ras_of_axis[static_cast<std::size_t>(c)])] =
        o.flip[static_cast<std::size_t>(c)] ? dims[c] - 1 - p[c] : p[c];
  return r;
}

// numpy.percentile (linear interpolation) of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
  const double pos = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

constexpr int kSynthSeg1[] = {0,  2,  3,  4,  5,  7,  8,  10, 11, 12, 13, 14, 15, 16, 17, 18,
                              26, 28, 41, 42, 43, 44, 46, 47, 49, 50, 51, 52, 53, 54, 58, 60};
constexpr int kSynthSeg2[] = {0,  2,  3,  4,  5,  7,  8,  10, 11, 12, 13, 14, 15, 16, 17, 18, 24,
                              26, 28, 41, 42, 43, 44, 46, 47, 49, 50, 51, 52, 53, 54, 58, 60};
// Topology class per channel (0 = exempt), from SynthSeg's topological-class tables.
constexpr int kTopology1[] = {0,  4,  4,  4,  4,  5,  5,  6,  7,  8,  9,  1,  2,  3,  10, 11,
                              12, 13, 14, 14, 14, 14, 15, 15, 16, 17, 18, 19, 20, 21, 22, 23};
constexpr int kTopology2[] = {0,  4,  4,  4,  4,  5,  5,  6,  7,  8,  9,  1,  2,  3,  10, 11, 0,
                              12, 13, 14, 14, 14, 14, 15, 15, 16, 17, 18, 19, 20, 21, 22, 23};
// FreeSurfer left ↔ right structures.
constexpr int kLeftRight[][2] = {{2, 41},  {3, 42},  {4, 43},  {5, 44},  {7, 46},  {8, 47},  {10, 49},
                                 {11, 50}, {12, 51}, {13, 52}, {17, 53}, {18, 54}, {26, 58}, {28, 60}};

// SynthSeg's grid: the input's, or 1 mm when its voxels are off 1 ± 0.05 mm (resampled
// linearly, factor = voxel/1 mm, ceil(n·factor) voxels, first blurred with σ = 0.25/factor voxels
// along axes that shrink; the labels come back nearest: resample.h maps keep both grids on the
// same field of view), and the RAS order of its axes.
struct SynthsegGrid {
  bool resampled = false;
  Dims3 dims{};  // the 1 mm grid's (the input's when not resampled)
  GridMap to_1mm, back;
  Vec3 sigma{0, 0, 0};
  Geometry geom;
  Orientation o;
  Dims3 rd{};  // dims in RAS order
};

SynthsegGrid synthseg_grid(const Volume& mag) {
  SynthsegGrid g;
  const Vec3& vs = mag.voxel_mm();
  g.resampled = std::any_of(vs.begin(), vs.end(), [](double v) { return std::abs(v - 1.0) > 0.05; });
  g.dims = mag.dims();
  if (g.resampled)
    for (std::size_t a = 0; a < 3; ++a) {
      const double f = vs[a];
      g.dims[a] = static_cast<std::int64_t>(std::ceil(static_cast<double>(g.dims[a]) * f));
      g.to_1mm[a] = {1.0 / f, 0.5 / f - 0.5};
      g.back[a] = {f, 0.5 * f - 0.5};
      if (f < 1.0) g.sigma[a] = 0.25 / f;
    }
  g.geom = g.resampled ? mapped_geometry(mag.geometry(), g.to_1mm) : mag.geometry();
  g.o = orientation(g.geom.affine);
  for (int a = 0; a < 3; ++a) g.rd[static_cast<std::size_t>(g.o.ras_of_axis[static_cast<std::size_t>(a)])] = g.dims[a];
  return g;
}

// The network's input: the echoes' RSS on the grid, in RAS order, clipped to its 0.5–99.5
// percentiles and rescaled to [0, 1].
Volume synthseg_intensities(const Volume& mag, const SynthsegGrid& g) {
  Volume img = rss_frames(mag);
  if (g.resampled) {
    img = gaussian_blur(img, g.sigma);
    img = resample(img, g.dims, g.to_1mm, {Interp::Linear, Interp::Linear, Interp::Linear});
  }
  Volume ras = Volume::zeros(g.rd, g.geom);
  for (std::int64_t k = 0; k < g.dims[2]; ++k)
    for (std::int64_t j = 0; j < g.dims[1]; ++j)
      for (std::int64_t i = 0; i < g.dims[0]; ++i) {
        const auto r = to_ras(g.o, g.dims, i, j, k);
        ras.at(r[0], r[1], r[2]) = img.at(i, j, k);
      }
  std::vector<double> sorted(ras.values().begin(), ras.values().end());
  std::sort(sorted.begin(), sorted.end());
  const double lo = percentile(sorted, 0.5), hi = percentile(sorted, 99.5);
  for (double& v : ras.values()) v = hi > lo ? (std::clamp(v, lo, hi) - lo) / (hi - lo) : 0.0;
  return ras;
}

// Channel index of each label's mirror (itself for midline structures); every channel its own
// when the label list is unknown.
std::vector<std::int64_t> mirror_channels(std::span<const int> labels, std::int64_t L) {
  std::vector<std::int64_t> mirror(static_cast<std::size_t>(L));
  for (std::int64_t l = 0; l < L; ++l) mirror[static_cast<std::size_t>(l)] = l;
  for (const auto& lr : kLeftRight) {
    auto a = std::find(labels.begin(), labels.end(), lr[0]), b = std::find(labels.begin(), labels.end(), lr[1]);
    if (a != labels.end() && b != labels.end()) {
      mirror[static_cast<std::size_t>(a - labels.begin())] = b - labels.begin();
      mirror[static_cast<std::size_t>(b - labels.begin())] = a - labels.begin();
    }
  }
  return mirror;
}

// Adds one pass's channel-last output (frame `frame` of RAS volume rd), divided by `passes`, to
// the posteriors' frames; the flipped pass (along RAS axis 0) into each label's mirror.
void add_posteriors(const float* p, const Box& frame, std::int64_t L, bool flipped,
                    const std::vector<std::int64_t>& mirror, int passes, Volume& post) {
  const Dims3& rd = post.dims();
  for (std::int64_t k = 0; k < rd[2]; ++k)
    for (std::int64_t j = 0; j < rd[1]; ++j)
      for (std::int64_t i = 0; i < rd[0]; ++i) {
        std::int64_t fi = i - frame.origin[0];
        const std::int64_t fj = j - frame.origin[1], fk = k - frame.origin[2];
        if (flipped) fi = frame.size[0] - 1 - fi;
        const float* q = p + ((fi * frame.size[1] + fj) * frame.size[2] + fk) * L;
        for (std::int64_t l = 0; l < L; ++l) {
          const std::int64_t dst = flipped ? mirror[static_cast<std::size_t>(l)] : l;
          post.at(i, j, k, dst) += q[l] / passes;
        }
      }
}

// Blurs each posterior: σ 0.5 voxel, 3 taps, zero padding, one axis after another.
void blur_posteriors(Volume& post, std::int64_t L) {
  const Dims3& rd = post.dims();
  const double e = std::exp(-1.0 / (2.0 * 0.25));
  const double w0 = 1.0 / (1.0 + 2.0 * e), w1 = e / (1.0 + 2.0 * e);
  Volume tmp = Volume::zeros(rd, post.geometry());
  for (std::int64_t l = 0; l < L; ++l)
    for (int a = 0; a < 3; ++a) {
      for (std::int64_t k = 0; k < rd[2]; ++k)
        for (std::int64_t j = 0; j < rd[1]; ++j)
          for (std::int64_t i = 0; i < rd[0]; ++i) {
            std::int64_t q[3] = {i, j, k};
            double s = w0 * post.at(i, j, k, l);
            for (int dlt : {-1, 1}) {
              q[a] += dlt;
              if (q[a] >= 0 && q[a] < rd[a]) s += w1 * post.at(q[0], q[1], q[2], l);
              q[a] -= dlt;
            }
            tmp.at(i, j, k) = s;
          }
      std::copy(tmp.values().begin(), tmp.values().end(), post.frame(l).begin());
    }
}

// Each voxel of the grid: the label of its largest posterior (the channel index without a list).
Volume argmax_labels(const Volume& post, const SynthsegGrid& g, std::span<const int> labels, std::int64_t L) {
  Volume out = Volume::zeros(g.dims, g.geom);
  for (std::int64_t k = 0; k < g.dims[2]; ++k)
    for (std::int64_t j = 0; j < g.dims[1]; ++j)
      for (std::int64_t i = 0; i < g.dims[0]; ++i) {
        const auto r = to_ras(g.o, g.dims, i, j, k);
        std::int64_t best = 0;
        for (std::int64_t l = 1; l < L; ++l)
          if (post.at(r[0], r[1], r[2], l) > post.at(r[0], r[1], r[2], best)) best = l;
        out.at(i, j, k) = labels.empty() ? static_cast<double>(best) : labels[static_cast<std::size_t>(best)];
      }
  return out;
}

}  // namespace

void run_synthseg(Context& c) {
  const Volume& mag = *c.in.magnitude;
  const SynthsegGrid g = synthseg_grid(mag);
  const Dims3& rd = g.rd;
  const std::int64_t V = g.dims[0] * g.dims[1] * g.dims[2];
  const Box frame = tiling::pad_frame(rd, {1, 1, 1}, tiling::PadRule::CentredFloor, input_shape(c, rd));
  const Shape in_shape{1, frame.size[0], frame.size[1], frame.size[2], 1};
  c.load(c.pool());
  const auto& od = c.model(0).outputs().at(0).dims;
  const std::int64_t L = od.size() == 5 && od[4] > 0 ? od[4] : 0;
  if (L <= 0) throw Error(ErrorKind::InvalidInput, c.id() + ": the graph's output must be [1,D,H,W,labels]");
  const bool flip = c.opts.test_time_flips;
  const std::int64_t F = frame.voxels();
  Context::Reservation res;
  res.shapes = {{in_shape}};
  res.wrapper_fixed = 4 * std::max(V, mag.voxels()) * 8 + (g.resampled ? 3 * (V + mag.voxels()) * 8 : 0) + F * 4 +
                      2 * L * F * 4 + L * rd[0] * rd[1] * rd[2] * 8 + 5 * rd[0] * rd[1] * rd[2] + 16384;
  c.reserve(res);
  c.stage("prepare");
  const Volume ras = synthseg_intensities(mag, g);
  const std::span<const int> labels = L == 32   ? std::span<const int>(kSynthSeg1)
                                      : L == 33 ? std::span<const int>(kSynthSeg2)
                                                : std::span<const int>();
  const std::vector<std::int64_t> mirror = mirror_channels(labels, L);
  if (labels.empty() && flip)
    c.warn(c.id() + ": " + std::to_string(L) +
           " output labels match no known SynthSeg label list; flip averaging "
           "does not swap left and right");
  // Posteriors on the RAS grid (channel-last tensor → frames).
  Volume post = Volume::zeros(rd, g.geom, L);
  c.stage("inference");
  const int passes = flip ? 2 : 1;
  for (int pass = 0; pass < passes; ++pass) {
    Tensor t = f32_tensor(in_shape);
    tiling::pack_box(ras.data(), rd, frame, tiling::kXYZ, tiling::Fill::Zero, t.data<float>());
    if (pass == 1) {
      // Flip along RAS axis 0 (the tensor's D axis).
      float* d = t.data<float>();
      const std::int64_t plane = frame.size[1] * frame.size[2];
      for (std::int64_t i = 0; i < frame.size[0] / 2; ++i)
        std::swap_ranges(d + i * plane, d + (i + 1) * plane, d + (frame.size[0] - 1 - i) * plane);
    }
    std::vector<Tensor> y = c.run_model(0, {t});
    add_posteriors(y.at(0).data<float>(), frame, L, pass == 1, mirror, passes, post);
    c.progress((pass + 1.0) / passes, "inference");
  }
  c.stage("postprocess");
  blur_posteriors(post, L);
  // (8) Topology clean-up: the largest component of the foreground and of each topology class.
  synthseg_topology_cleanup(post, L == 32   ? std::span<const int>(kTopology1)
                                  : L == 33 ? std::span<const int>(kTopology2)
                                            : std::span<const int>());
  Volume out = argmax_labels(post, g, labels, L);
  if (g.resampled) {
    // (10) Labels back to the input grid, nearest.
    out = resample(out, mag.dims(), g.back, {Interp::Nearest, Interp::Nearest, Interp::Nearest});
    out.set_geometry(mag.geometry());
  }
  add_output(c, "labels", "label", std::move(out));
}

}  // namespace qsmcore::networks
