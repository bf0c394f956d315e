// Tile budgeting: the reference's fixed-constant functions and qsmcore's per-network ones
// (tiling.h). All byte arithmetic saturates, so an absurd config reads as "too big".
#include "qsmcore/tiling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/saturating.h"
#include "qsmcore/error.h"

namespace qsmcore {
namespace {

constexpr std::uint64_t kMax = kSaturated;
std::uint64_t voxels_in_cube(std::uint64_t p) {
  return saturating_mul(saturating_mul(p, p), p);
}

std::string cubed(std::size_t p) {
  return std::to_string(p) + "\u00b3";
}

// Advice for a patch that is too big: the largest core whose patch (a multiple of d, at most
// max_edge) fits with this halo, or to reduce the halo when the halo alone leaves no room.
std::string largest_core_advice(std::size_t max_edge, std::size_t d, std::size_t halo) {
  const std::size_t edge = max_edge / d * d;
  if (edge <= 2 * halo) return "reduce the halo (" + std::to_string(halo) + " on each side leaves no room for a core)";
  return "the largest core that fits is " + std::to_string(edge - 2 * halo);
}

}  // namespace

std::size_t tile_patch_size(TileConfig cfg, std::size_t divisor) {
  const std::size_t d = std::max<std::size_t>(divisor, 1);
  const std::uint64_t need = saturating_add(std::max<std::size_t>(cfg.core, 1), saturating_mul(2, cfg.halo));
  if (need > kMax - d) return static_cast<std::size_t>(kMax / d * d);
  return static_cast<std::size_t>((need + d - 1) / d * d);
}

std::uint64_t patch_activation_bytes(std::size_t p) {
  return saturating_mul(voxels_in_cube(p), kActivationBytesPerPatchVoxel);
}

std::size_t max_wasm_patch_edge() {
  std::size_t p = 1;
  while (patch_activation_bytes(p + 1) <= kWasmMaxPatchActivationBytes) ++p;
  return p;
}

void check_wasm_patch_fits(TileConfig cfg, std::size_t divisor) {
  const std::size_t d = std::max<std::size_t>(divisor, 1);
  const std::size_t p = tile_patch_size(cfg, d);
  const std::size_t max_edge = max_wasm_patch_edge();
  if (p <= max_edge) return;
  throw Error(ErrorKind::OutOfBudget,
              "a " + cubed(p) + " patch (core " + std::to_string(cfg.core) + ", halo " + std::to_string(cfg.halo) +
                  ") needs " + std::to_string(patch_activation_bytes(p)) + " bytes of activations, above the " +
                  std::to_string(kWasmMaxPatchActivationBytes) + " a wasm32 patch may use; " +
                  largest_core_advice(max_edge, d, cfg.halo));
}

std::size_t tiles_within_wasm_budget(TileConfig cfg) {
  const std::uint64_t per =
      patch_activation_bytes(static_cast<std::size_t>(saturating_add(cfg.core, saturating_mul(2, cfg.halo))));
  if (per == 0) return static_cast<std::size_t>(kWasmTileActivationBudget);
  return static_cast<std::size_t>(std::max<std::uint64_t>(1, kWasmTileActivationBudget / per));
}

std::size_t tile_divisor(const ModelSpec& spec) {
  return std::max<std::size_t>(
      {1, spec.size_divisor, spec.pad_multiple[0], spec.pad_multiple[1], spec.pad_multiple[2]});
}

std::uint64_t tile_bytes(const ModelSpec& spec, TileConfig cfg) {
  const std::optional<TileCost> cost = spec.tile_cost();
  if (!cost) throw Error(ErrorKind::InvalidInput, "'" + std::string(spec.id) + "' is not run tiled");
  const std::size_t p = tile_patch_size(cfg, tile_divisor(spec));
  return cost->bytes({p, p, p});
}

std::size_t tile_concurrency(const ModelSpec& spec, TileConfig cfg, std::uint64_t budget, std::size_t threads,
                             std::uint64_t wrapper_bytes) {
  const std::size_t pool = std::max<std::size_t>(threads, 1);
  const std::uint64_t per = tile_bytes(spec, cfg);
  if (budget == 0) return pool;
  const NetworkMemory& m = *spec.memory;  // tile_bytes threw if it were absent
  const std::uint64_t held = saturating_add(saturating_add(m.resident_bytes, m.inference_fixed_bytes), wrapper_bytes);
  const std::uint64_t avail = budget > held ? budget - held : 0;
  const std::uint64_t fit = per == 0 ? pool : avail / per;
  if (fit >= 1) return static_cast<std::size_t>(std::min<std::uint64_t>(pool, fit));
  // Not one tile: find the largest patch edge (a multiple of the divisor) whose tile fits.
  const std::size_t d = tile_divisor(spec);
  const TileCost cost = *spec.tile_cost();
  std::size_t edge = 0;
  while (cost.bytes_per_voxel > 0 && cost.bytes({edge + d, edge + d, edge + d}) <= avail) edge += d;
  const std::size_t p = tile_patch_size(cfg, d);
  throw Error(ErrorKind::OutOfBudget,
              "one " + cubed(p) + " tile of '" + std::string(spec.id) + "' needs " + std::to_string(per) +
                  " bytes, but the budget of " + std::to_string(budget) + " bytes leaves " + std::to_string(avail) +
                  " after the model, its plan and the wrapper's buffers (" + std::to_string(held) + "); " +
                  (edge == 0 ? std::string("no tile fits: raise the budget") : largest_core_advice(edge, d, cfg.halo)));
}

std::vector<std::array<std::size_t, 3>> tile_cost_patches(const ModelSpec& spec) {
  std::vector<std::array<std::size_t, 3>> out;
  for (const std::size_t core : {16, 24, 32, 48, 64}) {
    const std::size_t p = tile_patch_size(TileConfig{core, 8}, tile_divisor(spec));
    if (out.empty() || out.back()[0] != p) out.push_back({p, p, p});
  }
  return out;
}

TileCost fit_tile_cost(const ModelSpec& spec, std::vector<TilePoint> runs) {
  std::sort(runs.begin(), runs.end(), [](const TilePoint& a, const TilePoint& b) { return a.voxels < b.voxels; });
  const std::uint64_t from = voxels_in_cube(tile_patch_size(TileConfig{32, 8}, tile_divisor(spec)));
  std::vector<TilePoint> line;
  TileCost cost;
  std::size_t n_small = 0;
  for (const TilePoint& r : runs) {
    if (r.voxels >= from) line.push_back(r);
    if (r.voxels > from) continue;
    if (n_small == cost.small.size())
      throw Error(ErrorKind::InvalidInput, "fit_tile_cost: more than 3 patches up to the line's first");
    cost.small[n_small++] = r;
  }
  if (line.size() < 2 || line.front().voxels == line.back().voxels)
    throw Error(ErrorKind::InvalidInput, "fit_tile_cost: the line needs two patches of core 32 (halo 8) or more");
  // Least squares, then the envelope: the slope rounded up, the fixed part the least that leaves
  // every point at or below the line (memory.md M2: an under-count is a failure).
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const TilePoint& r : line) {
    sx += static_cast<double>(r.voxels);
    sy += static_cast<double>(r.bytes);
  }
  const double k = static_cast<double>(line.size()), mx = sx / k, my = sy / k;
  for (const TilePoint& r : line) {
    sxx += (static_cast<double>(r.voxels) - mx) * (static_cast<double>(r.voxels) - mx);
    sxy += (static_cast<double>(r.voxels) - mx) * (static_cast<double>(r.bytes) - my);
  }
  const double slope = sxy / sxx;
  cost.bytes_per_voxel = slope > 0 ? static_cast<std::uint64_t>(std::ceil(slope)) : 0;
  for (const TilePoint& r : line) {
    const std::uint64_t on_slope = saturating_mul(r.voxels, cost.bytes_per_voxel);
    if (r.bytes > on_slope) cost.fixed_bytes = std::max(cost.fixed_bytes, r.bytes - on_slope);
  }
  return cost;
}

std::optional<std::uint64_t> wasm_tile_bytes_per_voxel(const ModelSpec& spec) {
  if (!spec.tiled) return std::nullopt;
  return spec.tile_bytes_per_voxel;
}

std::uint64_t wasm_tile_bytes(const ModelSpec& spec, TileConfig cfg) {
  if (!spec.tiled) throw Error(ErrorKind::InvalidInput, "'" + std::string(spec.id) + "' is not run tiled");
  const std::size_t p = tile_patch_size(cfg, tile_divisor(spec));
  if (spec.wasm_tiled_run) return spec.wasm_tiled_run->tile_cost().bytes({p, p, p});
  const std::optional<std::uint64_t> bpv = wasm_tile_bytes_per_voxel(spec);
  if (!bpv) throw Error(ErrorKind::NotFound, "wasm32 tile cost of '" + std::string(spec.id) + "' not measured yet");
  return TileCost{.bytes_per_voxel = *bpv}.bytes({p, p, p});
}

std::size_t wasm_tiles_in_flight(const ModelSpec& spec, TileConfig cfg, std::size_t pool, std::uint64_t budget,
                                 std::uint64_t wrapper_bytes) {
  const bool wasm = spec.wasm_tiled_run || wasm_tile_bytes_per_voxel(spec);
  const std::uint64_t per = wasm ? wasm_tile_bytes(spec, cfg) : tile_bytes(spec, cfg);
  const std::uint64_t fit = per == 0 ? kMax : std::max<std::uint64_t>(1, kWasmTileActivationBudget / per);
  const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(std::max<std::size_t>(pool, 1), fit));
  if (budget == 0) return n;
  if (spec.wasm_tiled_run) {
    // The wasm32 run's own terms, the ones wasm_tiled_peak_bytes counts.
    const std::uint64_t held = saturating_add(spec.wasm_tiled_run->held_bytes, wrapper_bytes);
    const std::uint64_t room = budget > held ? budget - held : 0;
    return static_cast<std::size_t>(std::clamp<std::uint64_t>(per == 0 ? n : room / per, 1, n));
  }
  try {
    return tile_concurrency(spec, cfg, budget, n, wrapper_bytes);  // at most n
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfBudget) throw;
    return 1;
  }
}

std::uint64_t tiled_wrapper_bytes(const ModelSpec& spec, std::uint64_t voxels, bool field_copy) {
  if (!spec.tiled) throw Error(ErrorKind::InvalidInput, "'" + std::string(spec.id) + "' is not run tiled");
  // field_nets.cpp's tiled run: the output, the field's ppm copy and qsmcore-invnet's prior.
  const std::uint64_t volumes = 1 + (field_copy ? 1 : 0) + (spec.id == "qsmcore-invnet" ? 1 : 0);
  return saturating_add(saturating_mul(saturating_mul(volumes, 8), voxels), 4096);
}

std::uint64_t tiled_prepare_bytes(const ModelSpec& spec, std::array<std::size_t, 3> volume, bool field_copy) {
  if (!spec.tiled) throw Error(ErrorKind::InvalidInput, "'" + std::string(spec.id) + "' is not run tiled");
  if (spec.id != "qsmcore-invnet") return 0;
  // field_nets.cpp's TKD prior (physics tkd(), unpadded): at its inverse FFT the wrapper holds
  // the ppm copy it reads (field_copy), the copy tkd() is given, the masked copy that becomes
  // the prior and the FFT's real buffer, f64 volumes; the half spectrum (complex f64) and the
  // kernel (f64) on (x/2 + 1)·y·z. Measured at 96³ with 32³ patches (bench/tile_budget.sh): the
  // run's peak was this + 1.36 MB of plans.
  const std::uint64_t voxels = saturating_mul(saturating_mul(volume[0], volume[1]), volume[2]);
  const std::uint64_t half = saturating_mul(saturating_mul(volume[0] / 2 + 1, volume[1]), volume[2]);
  const std::uint64_t volumes = 3 + (field_copy ? 1 : 0);
  return saturating_add(saturating_add(saturating_mul(volumes * 8, voxels), saturating_mul(24, half)), 4096);
}

std::uint64_t tiled_peak_bytes(const ModelSpec& spec, TileConfig cfg, std::array<std::size_t, 3> volume,
                               std::size_t in_flight, bool field_copy) {
  const std::uint64_t per = tile_bytes(spec, cfg);
  const NetworkMemory& m = *spec.memory;  // tile_bytes threw if it were absent
  const std::uint64_t voxels = saturating_mul(saturating_mul(volume[0], volume[1]), volume[2]);
  const std::uint64_t tiles = saturating_add(tiled_wrapper_bytes(spec, voxels, field_copy),
                                             saturating_mul(std::max<std::size_t>(in_flight, 1), per));
  const std::uint64_t held = saturating_add(m.resident_bytes, m.inference_fixed_bytes);
  return std::max(m.load_peak_bytes,
                  saturating_add(held, std::max(tiles, tiled_prepare_bytes(spec, volume, field_copy))));
}

std::uint64_t wasm_tiled_peak_bytes(const ModelSpec& spec, TileConfig cfg, std::array<std::size_t, 3> volume,
                                    std::size_t in_flight, bool field_copy) {
  if (!spec.tiled) throw Error(ErrorKind::InvalidInput, "'" + std::string(spec.id) + "' is not run tiled");
  if (!spec.wasm_tiled_run)
    throw Error(ErrorKind::NotFound, "wasm32 tiled run of '" + std::string(spec.id) + "' not measured yet");
  const std::uint64_t voxels = saturating_mul(saturating_mul(volume[0], volume[1]), volume[2]);
  const std::uint64_t tiles =
      saturating_add(tiled_wrapper_bytes(spec, voxels, field_copy),
                     saturating_mul(std::max<std::size_t>(in_flight, 1), wasm_tile_bytes(spec, cfg)));
  return saturating_add(spec.wasm_tiled_run->held_bytes,
                        std::max(tiles, tiled_prepare_bytes(spec, volume, field_copy)));
}

}  // namespace qsmcore
