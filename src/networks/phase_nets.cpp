// iQSM, iQFM and iQSM+: wrapped phase (rad) → χ or local field (models.md §5).
#include <algorithm>
#include <cmath>
#include <map>

#include "networks/wrappers.h"
#include "qsmcore/error.h"

namespace qsmcore::networks {

using tiling::Box;

namespace {

// v with its y and z axes exchanged (frames kept, voxel sizes swapped with them).
Volume swap_yz(const Volume& v) {
  const Dims3 d = v.dims();
  const Vec3& mm = v.voxel_mm();
  Volume s =
      Volume::zeros({d[0], d[2], d[1]}, Geometry::with_voxel({mm[0], mm[2], mm[1]}), v.frames(), MemCategory::IO);
  const std::int64_t n = v.voxels();
  for (std::int64_t f = 0; f < v.frames(); ++f)
    for (std::int64_t z = 0; z < d[2]; ++z)
      for (std::int64_t y = 0; y < d[1]; ++y)
        for (std::int64_t x = 0; x < d[0]; ++x)
          s.data()[f * n + x + d[0] * (z + d[2] * y)] = v.data()[f * n + x + d[0] * (y + d[1] * z)];
  return s;
}

// The part of the volume the network sees: all of it, or for iQSM+ the eroded mask's box
// grown by 16 voxels each side (clipped to the volume), as the authors crop.
Box network_region(const Volume& eroded, bool plus) {
  const Dims3 dims = eroded.dims();
  Box region{{0, 0, 0}, dims};
  if (!plus) return region;
  const Box bb = nonzero_bbox(eroded);
  if (bb.voxels() > 0)
    for (int a = 0; a < 3; ++a) {
      const std::int64_t lo = std::max<std::int64_t>(0, bb.origin[a] - 16);
      const std::int64_t hi = std::min(dims[a], bb.origin[a] + bb.size[a] + 16);
      region.origin[a] = lo;
      region.size[a] = hi - lo;
    }
  return region;
}

// The graph's input shapes by name: te and b0 scalars, z_prjs a direction, volumes otherwise.
std::vector<Shape> input_shapes(Context& c, const Shape& vol) {
  std::vector<Shape> shapes;
  for (const auto& d : c.model(0).inputs()) {
    if (d.name == "te" || d.name == "b0")
      shapes.push_back({1});
    else if (d.name == "z_prjs")
      shapes.push_back({1, 1, 3});
    else
      shapes.push_back(vol);
  }
  return shapes;
}

// 1 inside the frame, 0 on its one-voxel shell: the networks' `border` input.
Tensor border_tensor(const Box& frame, const Shape& vol) {
  Tensor border = f32_tensor(vol);
  float* b = border.data<float>();
  const Dims3& s = frame.size;
  for (std::int64_t i = 0; i < s[0]; ++i)
    for (std::int64_t j = 0; j < s[1]; ++j)
      for (std::int64_t k = 0; k < s[2]; ++k) {
        const bool shell = i == 0 || j == 0 || k == 0 || i == s[0] - 1 || j == s[1] - 1 || k == s[2] - 1;
        b[(i * s[1] + j) * s[2] + k] = shell ? 0.0f : 1.0f;
      }
  return border;
}

// B0's direction as the `z_prjs` input. iQSM+ was trained on B0 directions with a non-negative
// z component (sunhongfu/scripts' all-directions training data: z_prjs_z = sqrt(1 - x² - y²));
// the field is the same for b and −b (the dipole kernel holds (k·b)²), so a direction pointing
// down voxel z (a volume stored with z reversed) is given to the network as −b, inside what it
// learnt (#19 item 5).
Tensor direction_tensor(const NetworkInputs& in, const Volume& phase, bool plus) {
  Vec3 dir = b0_direction(in, phase);
  if (plus && dir[2] < 0.0)
    for (double& d : dir) d = -d;
  return Tensor::from_vector<float>(
      {1, 1, 3}, {static_cast<float>(dir[0]), static_cast<float>(dir[1]), static_cast<float>(dir[2])});
}

// The graph's inputs in its own order, from the tensors by name.
std::vector<Tensor> graph_inputs(Context& c, const std::map<std::string, Tensor>& named, bool plus) {
  std::vector<Tensor> inputs;
  for (const auto& d : c.model(0).inputs()) {
    auto it = named.find(d.name);
    if (it == named.end())
      throw Error(ErrorKind::InvalidInput, c.id() + ": the graph '" + c.model(0).path() + "' has an input '" + d.name +
                                               "' the iQSM glue does not know (expected phase, mask, te, b0" +
                                               (plus ? ", z_prjs" : "") + ", border)");
    inputs.push_back(it->second);
  }
  return inputs;
}

// The recipe on `in` (c.in, or iQSM+'s y/z-swapped copy of it).
void run_iqsm_on(Context& c, const NetworkInputs& in, bool plus, bool iqfm) {
  const Volume& phase = *in.field;
  const Dims3 dims = phase.dims();
  const std::int64_t echoes = phase.frames();
  std::vector<double> tes = in.echo_times_s;
  if (tes.empty()) tes.assign(static_cast<std::size_t>(echoes), *in.te_s);
  const double b0 = *in.b0_tesla;

  c.stage("prepare");
  Volume eroded = erode_sphere(*in.mask, 3);
  const Box region = network_region(eroded, plus);
  Box frame = tiling::pad_frame(region.size, {1, 1, 1}, tiling::PadRule::CentredFloor, input_shape(c, region.size));
  for (int a = 0; a < 3; ++a) frame.origin[a] += region.origin[a];
  const Shape vol{1, 1, frame.size[0], frame.size[1], frame.size[2]};

  c.load(c.pool());
  Context::Reservation res;
  res.shapes = {input_shapes(c, vol)};
  res.wrapper_fixed = 4 * phase.voxels() * 8 + 3 * frame.voxels() * 4 + 8192;
  c.reserve(res);
  if (!plus) axial_check(c, phase);  // iQSM+ takes B0's direction; no axial assumption
  isotropy_check(c, phase);

  auto in_region = [&](std::int64_t idx) {
    const std::int64_t x = idx % dims[0], y = (idx / dims[0]) % dims[1], z = idx / (dims[0] * dims[1]);
    const std::int64_t p[3] = {x, y, z};
    for (int a = 0; a < 3; ++a)
      if (p[a] < region.origin[a] || p[a] >= region.origin[a] + region.size[a]) return false;
    return true;
  };
  Tensor mask_t = f32_tensor(vol);
  tiling::pack_box(eroded.data(), dims, frame, tiling::kXYZ, tiling::Fill::Zero, mask_t.data<float>(),
                   [&](double v, std::int64_t i) { return in_region(i) ? v : 0.0; });
  const Tensor border = border_tensor(frame, vol);
  const Tensor b0_t = Tensor::from_vector<float>({1}, {static_cast<float>(b0)});
  const Tensor z_t = direction_tensor(in, phase, plus);
  Volume sum = make_like(phase), wsum = make_like(phase);
  c.stage("inference");
  for (std::int64_t e = 0; e < echoes; ++e) {
    Tensor ph = f32_tensor(vol);
    tiling::pack_box(phase.frame(e).data(), dims, frame, tiling::kXYZ, tiling::Fill::Zero, ph.data<float>(),
                     [&](double v, std::int64_t i) { return in_region(i) ? c.opts.phase_sign * v : 0.0; });
    Tensor te_t = Tensor::from_vector<float>({1}, {static_cast<float>(tes[static_cast<std::size_t>(e)])});
    const std::map<std::string, Tensor> named{{"phase", ph}, {"mask", mask_t}, {"te", te_t},
                                              {"b0", b0_t},  {"z_prjs", z_t},  {"border", border}};
    std::vector<Tensor> y = c.run_model(0, graph_inputs(c, named, plus));
    const double te = tes[static_cast<std::size_t>(e)];
    tiling::unpack_box(
        y.at(0).data<float>(), dims, frame, tiling::kXYZ, region, [&](std::int64_t i, double v, std::int64_t) {
          if (eroded.data()[i] == 0.0) return;
          const double mag = in.magnitude
                                 ? in.magnitude->frame(in.magnitude->frames() == 1 ? 0 : e)[static_cast<std::size_t>(i)]
                                 : 1.0;
          // Echo weights as the authors combine echoes: iQSM+ (mag·TE)² (iQSM_Plus inference.py
          // `weights = (mag_echo * te_bc) ** 2`, legacy/matlab/iQSM_plus.m); iQSM and iQFM mag·TE²
          // (iQSM.m / iQFM_multi_echo.m: TE·χₑ through echofit.m's Σ mag·TE·y / Σ mag·TE²).
          // Without a magnitude, mag = 1 in both.
          const double w = plus ? (mag * te) * (mag * te) : mag * te * te;
          sum.data()[i] += w * v;
          wsum.data()[i] += w;
        });
    c.progress(static_cast<double>(e + 1) / static_cast<double>(echoes), "echoes");
  }
  Volume out = make_like(phase);
  for (std::int64_t i = 0; i < out.voxels(); ++i) {
    const double w = wsum.data()[i];
    out.data()[i] = w > 0.0 ? sum.data()[i] / w : 0.0;
  }
  add_output(c, iqfm ? "local_field" : "chi", "ppm", std::move(out));
}

}  // namespace

// iQSM+ with B0 closer to y than to z: the authors exchange the y and z axes of phase, mask and
// magnitude and B0's y and z components before the network, and exchange the χ map back after
// (legacy/matlab/iQSM_plus.m: `if abs(B0_dir(3)) < abs(B0_dir(2))` ... permute(..., [1,3,2,4]);
// their Python port swaps the mask's x and y instead, which we take for a slip). #19 item 3.
void run_iqsm(Context& c, bool plus, bool iqfm) {
  const Vec3 dir = b0_direction(c.in, *c.in.field);
  if (!plus || std::abs(dir[1]) <= std::abs(dir[2])) {
    run_iqsm_on(c, c.in, plus, iqfm);
    return;
  }
  {
    const Volume phase = swap_yz(*c.in.field), mask = swap_yz(*c.in.mask);
    const Volume mag = c.in.magnitude ? swap_yz(*c.in.magnitude) : Volume{};
    NetworkInputs in = c.in;
    in.field = &phase;
    in.mask = &mask;
    in.magnitude = c.in.magnitude ? &mag : nullptr;
    in.b0_dir = Vec3{dir[0], dir[2], dir[1]};
    run_iqsm_on(c, in, plus, iqfm);
  }
  NetworkOutput& out = c.run.outputs.back();
  Volume back = swap_yz(out.volume);
  Volume on_grid = make_like(*c.in.field);
  std::copy(back.data(), back.data() + back.voxels(), on_grid.data());
  out.volume = std::move(on_grid);
  c.warn("iqsm-plus: B0 (" + std::to_string(dir[0]) + ", " + std::to_string(dir[1]) + ", " + std::to_string(dir[2]) +
         ") is closer to y than to z; the y and z axes were exchanged around the network, as its authors do");
}

}  // namespace qsmcore::networks
