// BFRnet, xQSM, QSMnet/QSMnet+, IR2QSM, qsmcore-invnet: a field in, one map out; whole volume
// padded to the network's multiple, or core/halo tiles on that padded frame (models.md §4–§5).
#include <algorithm>
#include <cmath>

#include "networks/wrappers.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/physics.h"
#include "qsmcore/tiling.h"

namespace qsmcore::networks {

using tiling::Box;

Tensor pack_channels(const std::vector<const double*>& channels, const Dims3& dims, const Box& box,
                     const tiling::AxisOrder& order, tiling::Fill fill) {
  const Dims3 td = tiling::tensor_dims(box, order);
  Tensor t = f32_tensor({1, static_cast<std::int64_t>(channels.size()), td[0], td[1], td[2]});
  for (std::size_t ch = 0; ch < channels.size(); ++ch)
    tiling::pack_box(channels[ch], dims, box, order, fill, t.data<float>() + ch * box.voxels());
  return t;
}

std::optional<Dims3> static_spatial(const ValueDesc& d) {
  if (d.dims.size() != 5) return std::nullopt;
  for (std::size_t a = 2; a < 5; ++a)
    if (d.dims[a] <= 0) return std::nullopt;
  return Dims3{d.dims[2], d.dims[3], d.dims[4]};
}

Dims3 input_shape(const Context& c, const Dims3& dims) {
  std::array<std::size_t, 3> v{};
  for (std::size_t a = 0; a < 3; ++a) v[a] = static_cast<std::size_t>(std::max<std::int64_t>(dims[a], 0));
  const std::array<std::size_t, 3> s = network_input_shape(c.spec, v);
  return {static_cast<std::int64_t>(s[0]), static_cast<std::int64_t>(s[1]), static_cast<std::int64_t>(s[2])};
}

void add_output(Context& c, const std::string& name, const std::string& unit, Volume v) {
  c.run.outputs.push_back({name, unit, std::move(v)});
}

void axial_check(Context& c, const Volume& grid) {
  if (auto w = axial_only_warning(b0_direction(c.in, grid), c.id())) c.warn(*w);
}

void isotropy_check(Context& c, const Volume& grid) {
  const Vec3& v = grid.voxel_mm();
  const double lo = std::min({v[0], v[1], v[2]}), hi = std::max({v[0], v[1], v[2]});
  if (hi > lo * 1.05)
    c.warn(c.id() +
           " was trained on isotropic voxels and its authors resample anisotropic data to isotropic voxels "
           "and back around it; this volume has " +
           describe_grid(grid) + ": resample it to isotropic voxels first for the published result");
}

namespace {

struct FieldRecipe {
  tiling::PadRule rule = tiling::PadRule::CentredFloor;
  ZScore in{}, out{};
  bool mask_input = false;
  bool background = false;  // BFRnet: the output is the background field
  bool tiled = false;
  // qsmcore-invnet: channels [TKD χ, masked field, mask] (tools/train/model.py). TKD is global
  // (an FFT over the whole volume), so it is computed once before tiling; tiles then see the
  // same prior the whole-volume run does.
  bool tkd_prior = false;
};

// The TKD estimate the network corrects, exactly as it was trained on (tools/train/synth.py
// tkd(): threshold 0.19, D(0) = 0, unpadded, b̂ from the inputs, masked).
Volume tkd_prior(Context& c, const Volume& field, const Volume& mask) {
  const Vec3 b = b0_direction(c.in, field);
  const double tilt = std::acos(std::min(1.0, std::abs(b[2]))) * 180.0 / 3.14159265358979323846;
  if (tilt > 35.0)
    c.warn(c.id() + " was trained with B0 up to 35 degrees from voxel z; this volume's B0 is " +
           std::to_string(static_cast<int>(std::lround(tilt))) + " degrees off");
  return tkd(field, mask, b, TkdOptions{});
}

// The tiles in flight the registry's figures allow (tiling.h, "One budget"): what a host computes
// with tile_concurrency (natively, within the room the budget leaves above what the caller holds
// at `caller_held`) or wasm_tiles_in_flight (wasm32) for this tile config. A network not measured
// yet, or no budget, leaves it to the plans; where not one tile fits by the registry's figures,
// one is asked for and the plans decide (spilling, or a refusal naming the least budget).
std::int64_t registry_in_flight(const Context& c, const TileRequest& t, std::int64_t halo, std::int64_t caller_held) {
  const std::int64_t pool = c.pool();
  if (!c.spec.memory || !c.spec.native_tile_bytes_per_voxel) return pool;
  // An anisotropic core is budgeted as the cube of its largest edge (never fewer bytes).
  const TileConfig cfg{static_cast<std::size_t>(std::max({t.core[0], t.core[1], t.core[2]})),
                       static_cast<std::size_t>(halo)};
  const std::uint64_t room =
      c.budget() <= 0 ? 0 : static_cast<std::uint64_t>(std::max<std::int64_t>(c.budget() - caller_held, 0));
  const std::uint64_t wrapper =
      tiled_wrapper_bytes(c.spec, static_cast<std::uint64_t>(c.voxels()), FieldPpm::own_bytes(c.in) > 0);
#ifdef __EMSCRIPTEN__
  // The page's tile plan (web_api's tile_plan) asks the same function, with the room its budget
  // leaves; a budget already spent gets one tile (room 0 would mean no budget there).
  if (c.budget() > 0 && room == 0) return 1;
  return static_cast<std::int64_t>(wasm_tiles_in_flight(c.spec, cfg, static_cast<std::size_t>(pool), room, wrapper));
#else
  if (c.budget() <= 0) return pool;
  try {
    return static_cast<std::int64_t>(tile_concurrency(c.spec, cfg, room, static_cast<std::size_t>(pool), wrapper));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfBudget) throw;
    return 1;
  }
#endif
}

// The tiles a run takes: the cores of the requested tile config that hold a mask voxel (patches
// aligned to the pad multiple `m`), or the whole volume in its padded frame.
struct FieldTiles {
  std::vector<tiling::CoreTile> tiles;
  std::int64_t halo = 0;
  bool tiled = false;
};

FieldTiles field_tiles(Context& c, const FieldRecipe& r, const Dims3& dims, const Box& frame, std::int64_t m) {
  FieldTiles t;
  const bool asked = c.opts.tile && (c.opts.tile->core[0] > 0 || c.opts.tile->core[1] > 0 || c.opts.tile->core[2] > 0);
  t.tiled = r.tiled && asked;
  if (t.tiled) {
    t.halo = c.opts.tile->halo < 0 ? 8 : c.opts.tile->halo;
    t.tiles = tiling::core_tiles(dims, frame, c.opts.tile->core, t.halo, {m, m, m},
                                 [&](std::int64_t i) { return inside(c.in.mask, i); });
  } else {
    if (asked) c.warn(c.id() + " runs on the whole volume only; the tile request is ignored");
    t.tiles.push_back({{{0, 0, 0}, dims}, frame});
  }
  return t;
}

// What the wrapper holds beside its graph runs (memory.md §4.4): the field in ppm when it is a
// copy; with the TKD prior also the prior. Before any graph runs, TKD makes the prior from a
// copy of the field with its masked copy, FFT buffer, spectrum and kernel: tiled_prepare_bytes
// in all (tiling.h, what a host adds up too), less what wrapper_fixed counts (the copy, the
// prior; for tiles also the output, made after it). The output volume: beside the tiles in
// flight, or, for one whole-volume run, made once the run has returned its memory (then beside
// the graph's output only). Nothing reads the field, the prior or the tiles' output volume while
// a graph runs: all three park.
Context::Reservation field_reservation(const Context& c, const FieldRecipe& r, const FieldTiles& t, const Box& patch,
                                       std::int64_t workers, std::int64_t m) {
  const Dims3& dims = c.in.field->dims();
  Context::Reservation res;
  const std::int64_t channels = r.tkd_prior ? 3 : 1;
  res.shapes = {{{1, channels, patch.size[0], patch.size[1], patch.size[2]}}};
  const std::int64_t volume_bytes = c.in.field->voxels() * 8;
  const std::int64_t own = FieldPpm::own_bytes(c.in);
  res.wrapper_fixed = own + (r.tkd_prior ? 1 : 0) * volume_bytes + 4096;
  const std::int64_t prepare_bytes = r.tkd_prior
                                         ? static_cast<std::int64_t>(tiled_prepare_bytes(
                                               c.spec,
                                               {static_cast<std::size_t>(dims[0]), static_cast<std::size_t>(dims[1]),
                                                static_cast<std::size_t>(dims[2])},
                                               own > 0))
                                         : 0;
  res.wrapper_per_tile = channels * patch.voxels() * 4 + 4096;
  const bool whole = t.tiles.size() == 1;
  res.wrapper_fixed_tiled = res.wrapper_fixed + volume_bytes;
  if (whole) {
    res.wrapper_between = std::max(prepare_bytes - res.wrapper_fixed, volume_bytes + patch.voxels() * 4 + 4096);
  } else {
    res.wrapper_fixed = res.wrapper_fixed_tiled;
    res.wrapper_between = std::max<std::int64_t>(prepare_bytes - res.wrapper_fixed, 0);
  }
  res.parks = true;
  res.wrapper_parkable = {own, r.tkd_prior ? volume_bytes : 0, whole ? 0 : volume_bytes};
  res.in_flight = workers;
  res.tiles = std::max<std::int64_t>(static_cast<std::int64_t>(t.tiles.size()), 1);
  res.tileable = r.tiled;
  res.halo = t.tiled ? t.halo : 8;
  res.multiple = m;
  return res;
}

// A patch's input tensor: the field in ppm, z-scored (masked where the recipe says), after
// qsmcore-invnet's TKD prior channel and before its mask channel.
Tensor field_patch_input(const FieldRecipe& r, const FieldPpm& f, const Volume& prior, const Volume* mask,
                         const Dims3& dims, const Box& p) {
  Tensor x = f32_tensor({1, r.tkd_prior ? 3 : 1, p.size[0], p.size[1], p.size[2]});
  float* const field_channel = x.data<float>() + (r.tkd_prior ? p.voxels() : 0);
  tiling::pack_box(f.data(), dims, p, tiling::kXYZ, tiling::Fill::Zero, field_channel, [&](double v, std::int64_t i) {
    if (r.mask_input && !inside(mask, i)) return 0.0;
    return (v - r.in.mean) / r.in.std;
  });
  if (r.tkd_prior) {
    tiling::pack_box(prior.data(), dims, p, tiling::kXYZ, tiling::Fill::Zero, x.data<float>());
    tiling::pack_box(mask->data(), dims, p, tiling::kXYZ, tiling::Fill::Zero, x.data<float>() + 2 * p.voxels(),
                     [](double v, std::int64_t) { return mask_inside(v) ? 1.0 : 0.0; });
  }
  return x;
}

void run_field_net(Context& c, const FieldRecipe& r) {
  const std::int64_t caller_held = memory_current();  // what the run's budget is above
  const Volume& grid = *c.in.field;
  const Dims3 dims = grid.dims();
  const Volume* mask = c.in.mask;
  const std::int64_t m = std::max<std::int64_t>(c.spec.pad_multiple[0], 1);  // tiles' patches align to it
  const Box frame = tiling::pad_frame(dims, {1, 1, 1}, r.rule, input_shape(c, dims));
  const FieldTiles ft = field_tiles(c, r, dims, frame, m);
  const std::vector<tiling::CoreTile>& tiles = ft.tiles;
  const std::int64_t n = static_cast<std::int64_t>(tiles.size());
  std::int64_t workers = std::max<std::int64_t>(1, std::min<std::int64_t>(c.pool(), n));
  if (ft.tiled)
    workers = std::max<std::int64_t>(1, std::min(workers, registry_in_flight(c, *c.opts.tile, ft.halo, caller_held)));
  c.load(static_cast<int>(std::max<std::int64_t>(1, c.pool() / workers)));
  const Box patch = tiles.empty() ? frame : tiles.front().patch;
  const bool whole = tiles.size() == 1;
  const std::int64_t in_flight = c.reserve(field_reservation(c, r, ft, patch, workers, m));
  axial_check(c, grid);

  c.stage("prepare");
  const FieldPpm f(c.in);
  const Volume prior = r.tkd_prior ? tkd_prior(c, field_ppm(c.in), *mask) : Volume{};
  Volume out = whole ? Volume{} : make_like(grid);
  const Context::Parked parked_field = c.park_while_running(f.copy().storage());
  const Context::Parked parked_prior = c.park_while_running(prior.storage());
  const Context::Parked parked_out = c.park_while_running(out.storage());
  c.stage(ft.tiled ? "tiles" : "inference");
  std::int64_t finished = 0;
  c.run_tiles(
      0, n, in_flight,
      [&](std::int64_t t) {
        return std::vector<Tensor>{
            field_patch_input(r, f, prior, mask, dims, tiles[static_cast<std::size_t>(t)].patch)};
      },
      [&](std::int64_t t, std::vector<Tensor>& y) {
        const auto& tile = tiles[static_cast<std::size_t>(t)];
        if (whole) out = make_like(grid);
        tiling::unpack_box(y.at(0).data<float>(), dims, tile.patch, tiling::kXYZ, tile.core,
                           [&](std::int64_t i, double v, std::int64_t) {
                             if (!inside(mask, i)) return;
                             const double o = v * r.out.std + r.out.mean;
                             out.data()[i] = r.background ? f.data()[i] - o : o;
                           });
      },
      [&](std::int64_t) { c.progress(static_cast<double>(++finished) / static_cast<double>(n), "tiles"); });
  add_output(c, r.background ? "local_field" : "chi", "ppm", std::move(out));
}

}  // namespace

// BFRnet's authors centre the volume in the padded frame, the odd voxel before (#19 item 6).
void run_bfrnet(Context& c) {
  FieldRecipe r;
  r.rule = tiling::PadRule::CentredCeil;
  r.mask_input = true;
  r.background = true;
  run_field_net(c, r);
}

// xQSM, QSMnet/QSMnet+ and IR2QSM were trained on, and are fed by their authors, local fields
// that are zero outside the brain (xQSM run_demo.py: mask = Field != 0; QSMnet: V-SHARP output;
// iQSM_Plus Save_Input: field × mask), so the field is masked here too: a field that is not zero
// there (a phantom's, an eroded mask's) would otherwise add sources at the brain's edge (#19).
// xQSM pads as its authors' ZeroPadding.m: pos_init = ceil((upSize - imSize)/2) + 1, the odd
// voxel before the volume (#19 item 6).
void run_xqsm(Context& c) {
  FieldRecipe r;
  r.rule = tiling::PadRule::CentredCeil;
  r.tiled = true;
  r.mask_input = true;
  isotropy_check(c, *c.in.field);
  run_field_net(c, r);
}

void run_qsmnet(Context& c, bool plus) {
  FieldRecipe r;
  r.tiled = true;
  r.mask_input = true;
  r.in = plus ? ZScore{0.0, 0.0205} : ZScore{0.0, 0.01};
  r.out = plus ? ZScore{0.0, 0.0734} : ZScore{0.0, 0.0317};
  const Vec3& v = c.in.field->voxel_mm();
  if (std::abs(v[0] - 1) > 0.05 || std::abs(v[1] - 1) > 0.05 || std::abs(v[2] - 1) > 0.05)
    c.warn(c.id() + " was trained on 1 mm isotropic voxels; this volume has " + describe_grid(*c.in.field));
  run_field_net(c, r);
}

void run_qsmcore_invnet(Context& c) {
  FieldRecipe r;
  r.rule = tiling::PadRule::CentredFloor;
  r.mask_input = true;
  r.tiled = true;
  r.tkd_prior = true;
  run_field_net(c, r);
}

void run_ir2qsm(Context& c) {
  FieldRecipe r;
  r.rule = tiling::PadRule::CentredCeil;
  r.tiled = true;
  r.mask_input = true;
  run_field_net(c, r);
}

}  // namespace qsmcore::networks
