// QSMGAN and AutoQSM: graphs with a fixed input patch and a smaller, centred output patch
// (models.md §5). The patch sizes are read from the graph, so a reduced twin works the same.
#include <algorithm>
#include <cmath>

#include "networks/wrappers.h"
#include "qsmcore/error.h"

namespace qsmcore::networks {

using tiling::Box;

namespace {

std::pair<Dims3, Dims3> fixed_patches(Context& c) {
  const auto p = static_spatial(c.model(0).inputs().at(0));
  const auto q = static_spatial(c.model(0).outputs().at(0));
  if (!p || !q)
    throw Error(ErrorKind::InvalidInput,
                c.id() + ": the graph '" + c.model(0).path() + "' must have a fixed [1,1,D,H,W] input and output");
  for (int a = 0; a < 3; ++a)
    if ((*p)[a] < (*q)[a] || ((*p)[a] - (*q)[a]) % 2 != 0)
      throw Error(ErrorKind::InvalidInput, c.id() + ": output patch larger than or not centred in the input patch");
  return {*p, *q};
}

}  // namespace

void run_qsmgan(Context& c) {
  const Volume& grid = *c.in.field;
  const Dims3 dims = grid.dims();
  c.load(c.pool());
  const auto patches = fixed_patches(c);
  const Dims3 P = patches.first, Q = patches.second;  // not a structured binding: lambdas capture these
  // Output-tile centres per axis: Q/2, Q/2 + Q, … while c ≤ dim + Q/2 (24, 72, … for 48³).
  std::array<std::vector<std::int64_t>, 3> centres;
  for (int a = 0; a < 3; ++a)
    for (std::int64_t x = Q[a] / 2; x <= dims[a] + Q[a] / 2 && x - Q[a] / 2 < dims[a]; x += Q[a])
      centres[a].push_back(x);
  std::vector<std::pair<Box, Box>> tiles;  // (input, output)
  for (auto z : centres[2])
    for (auto y : centres[1])
      for (auto x : centres[0]) {
        const Dims3 ce{x, y, z};
        Box in, out;
        for (int a = 0; a < 3; ++a) {
          in.origin[a] = ce[a] - P[a] / 2;
          in.size[a] = P[a];
          out.origin[a] = ce[a] - Q[a] / 2;
          out.size[a] = Q[a];
        }
        tiles.push_back({in, out});
      }
  Context::Reservation res;
  res.shapes = {{{1, 1, P[0], P[1], P[2]}}};
  res.wrapper_fixed = FieldPpm::own_bytes(c.in) + grid.voxels() * 8 + 4096;  // the field in ppm, the output
  res.wrapper_per_tile = P[0] * P[1] * P[2] * 4 + 4096;
  res.tiles = static_cast<std::int64_t>(tiles.size());
  const std::int64_t in_flight = c.reserve(res);
  axial_check(c, grid);
  c.stage("prepare");
  const FieldPpm f(c.in);
  Volume out = make_like(grid);
  const Volume* mask = c.in.mask;
  c.stage("tiles");
  std::int64_t finished = 0;
  const auto n = static_cast<std::int64_t>(tiles.size());
  c.run_tiles(
      0, n, in_flight,
      [&](std::int64_t t) {
        const auto& ib = tiles[static_cast<std::size_t>(t)].first;
        Tensor x = f32_tensor({1, 1, P[0], P[1], P[2]});
        tiling::pack_box(f.data(), dims, ib, tiling::kXYZ, tiling::Fill::Zero, x.data<float>(),
                         [](double v, std::int64_t) { return -100.0 * v; });
        return std::vector<Tensor>{x};
      },
      [&](std::int64_t t, std::vector<Tensor>& y) {
        const auto& ob = tiles[static_cast<std::size_t>(t)].second;
        tiling::unpack_box(
            y.at(0).data<float>(), dims, ob, tiling::kXYZ, ob, [&](std::int64_t i, double v, std::int64_t) {
              out.data()[i] = inside(mask, i) ? std::atanh(std::clamp(v, -0.999999, 0.999999)) / 10.0 : 0.0;
            });
      },
      [&](std::int64_t) { c.progress(static_cast<double>(++finished) / static_cast<double>(n), "tiles"); });
  add_output(c, "chi", "ppm", std::move(out));
}

namespace {

// Blends the first `overlap` slabs of patch r along `axis` with the last ones of its stored
// neighbour before it (util.py patch_process: weight 1 − l/(overlap − 1) on the neighbour).
void blend_with_neighbour(Volume& r, const Volume& nb, int axis, std::int64_t overlap) {
  const Dims3 q = r.dims();
  const std::int64_t shift = q[axis] - overlap;
  for (std::int64_t k = 0; k < q[2]; ++k)
    for (std::int64_t j = 0; j < q[1]; ++j)
      for (std::int64_t i = 0; i < q[0]; ++i) {
        const std::int64_t l[3] = {i, j, k};
        if (l[axis] >= overlap) continue;
        const double w = 1.0 - static_cast<double>(l[axis]) / static_cast<double>(overlap - 1);
        double& pv = r.at(i, j, k);
        pv = w * nb.at(i + (axis == 0 ? shift : 0), j + (axis == 1 ? shift : 0), k + (axis == 2 ? shift : 0)) +
             (1.0 - w) * pv;
      }
}

}  // namespace

void run_autoqsm(Context& c) {
  const Volume& grid = *c.in.field;
  const Dims3 dims = grid.dims();
  c.load(c.pool());
  const auto patches = fixed_patches(c);
  const Dims3 P = patches.first, Q = patches.second;  // not a structured binding: lambdas capture these
  constexpr std::int64_t kOverlap = 8;
  Dims3 frame{}, stride{};
  std::array<std::vector<std::int64_t>, 3> origins;
  for (int a = 0; a < 3; ++a) {
    if (dims[a] < Q[a])
      throw Error(ErrorKind::InvalidInput, c.id() + ": input 'field' is " + describe_grid(grid) +
                                               "; every dimension must be at least " + std::to_string(Q[a]) +
                                               " (the network's output patch)");
    stride[a] = Q[a] - kOverlap;
    const std::int64_t pad = (stride[a] - (dims[a] - Q[a]) % stride[a]) % stride[a];
    frame[a] = dims[a] + pad;
    for (std::int64_t o = 0; o + Q[a] <= frame[a]; o += stride[a]) origins[a].push_back(o);
  }
  std::vector<Dims3> tiles;
  for (auto z : origins[2])
    for (auto y : origins[1])
      for (auto x : origins[0]) tiles.push_back({x, y, z});
  const std::int64_t fv = frame[0] * frame[1] * frame[2];
  // The authors blend each patch with the stored (already blended) patches before it along x, y
  // and z (AMRI-Lab/AutoQSM code/util.py data_predict: output_patches[-1], [-num_i],
  // [-num_i*num_j]), not with the canvas, which later patches have partly overwritten: the last
  // num_i·num_j patches are kept (a ring; the neighbour along z shares the slot being replaced).
  const auto ni = static_cast<std::int64_t>(origins[0].size());
  const std::int64_t nij = ni * static_cast<std::int64_t>(origins[1].size());
  const std::int64_t qv = Q[0] * Q[1] * Q[2];
  Context::Reservation res;
  res.shapes = {{{1, 1, P[0], P[1], P[2]}}};
  res.wrapper_fixed = FieldPpm::own_bytes(c.in) + grid.voxels() * 8 + fv * 8 + (nij + 1) * qv * 8 + 8192;
  res.wrapper_per_tile = P[0] * P[1] * P[2] * 4 + 4096;
  res.tiles = static_cast<std::int64_t>(tiles.size());
  c.reserve(res);
  axial_check(c, grid);
  c.stage("prepare");
  const FieldPpm f(c.in);
  Volume acc = Volume::zeros(frame, grid.geometry());
  Volume r = Volume::zeros(Q, grid.geometry());
  std::vector<Volume> kept(static_cast<std::size_t>(nij));
  c.stage("tiles");
  const auto n = static_cast<std::int64_t>(tiles.size());
  for (std::int64_t t = 0; t < n; ++t) {
    const Dims3& o = tiles[static_cast<std::size_t>(t)];
    Box ib{{o[0] - (P[0] - Q[0]) / 2, o[1] - (P[1] - Q[1]) / 2, o[2] - (P[2] - Q[2]) / 2}, P};
    Tensor x = f32_tensor({1, 1, P[0], P[1], P[2]});
    tiling::pack_box(f.data(), dims, ib, tiling::kXYZ, tiling::Fill::Edge, x.data<float>());
    std::vector<Tensor> y = c.run_model(0, {x});
    Box qb{{0, 0, 0}, Q};
    tiling::unpack_box(y.at(0).data<float>(), Q, qb, tiling::kXYZ, qb,
                       [&](std::int64_t i, double v, std::int64_t) { r.data()[i] = v; });
    const std::int64_t back[3] = {1, ni, nij};
    for (int a = 0; a < 3; ++a)
      if (o[a] != 0) blend_with_neighbour(r, kept[static_cast<std::size_t>((t - back[a]) % nij)], a, kOverlap);
    for (std::int64_t k = 0; k < Q[2]; ++k)
      for (std::int64_t j = 0; j < Q[1]; ++j)
        for (std::int64_t i = 0; i < Q[0]; ++i) acc.at(o[0] + i, o[1] + j, o[2] + k) = r.at(i, j, k);
    Volume& slot = kept[static_cast<std::size_t>(t % nij)];
    if (slot.empty()) slot = Volume::zeros(Q, grid.geometry());
    std::copy(r.data(), r.data() + qv, slot.data());
    c.progress(static_cast<double>(t + 1) / static_cast<double>(n), "tiles");
  }
  Volume out = make_like(grid);
  const Volume* mask = c.in.mask;
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i)
        if (inside(mask, out.index(i, j, k))) out.at(i, j, k) = acc.at(i, j, k);
  add_output(c, "chi", "ppm", std::move(out));
}

}  // namespace qsmcore::networks
