// Per-tile growth (issue #54, memory.md §4.5): for every network qsmcore runs tiled, the heap one
// more tile in flight adds, measured on a real tiled run, lies within +5 %/−0 % of tile_bytes —
// never under it, at most 5 % over.
//
// The figures tile_bytes reads come from the twin in QSM_TWINS_DIR, measured the way `qsm measure
// --all` measures the registry's (measure_cmd.cpp, measure_native_tile): each graph run alone
// (measure_network_memory, its run peak above the plan) at patches of several sizes, and the
// envelope line through them (fit_fixed_plus_per_voxel) as native_tile_fixed_bytes +
// native_tile_bytes_per_voxel. The oracle is independent of that: the accounted high-water of
// run_network with the tiled wrapper, once with two tiles in flight (2 threads) and once with
// three (3 threads, one thread per graph run either way); the difference is what one tile held.
// Three tile configs: patches of cores 16 and 24 (measured for the fit) and 40 (halo 8): 56³ is
// not measured where the divisor is 8 or less, so the line is checked between its points.
// The check must fail when tile_bytes drifts: a cost 6 % higher or lower is refused too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "qsmcore/measure.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/tiling.h"
#include "support/registry_params.h"
#include "support/test_data.h"
#include "tile_growth/twin_figures.h"

using namespace qsmcore;

namespace {

Volume filled(const Dims3& d, double lo, double hi, unsigned seed) {
  Volume v = Volume::zeros(d, Geometry{});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& x : v.values()) x = u(rng);
  return v;
}

// The +5 %/−0 % band: the prediction covers the growth and over-counts it by at most 5 %.
bool within_band(std::int64_t growth, std::uint64_t predicted) {
  return growth > 0 && predicted >= static_cast<std::uint64_t>(growth) &&
         predicted * 100 <= static_cast<std::uint64_t>(growth) * 105;
}

// `spec` with every native tile figure times `scale`, rounded away from 1.
ModelSpec scaled_tile_cost(const ModelSpec& spec, double scale) {
  const auto times = [scale](std::uint64_t v) {
    const double x = static_cast<double>(v) * scale;
    return static_cast<std::uint64_t>(scale > 1 ? std::ceil(x) : std::floor(x));
  };
  ModelSpec s = spec;
  s.native_tile_bytes_per_voxel = times(*spec.native_tile_bytes_per_voxel);
  s.native_tile_fixed_bytes = times(spec.native_tile_fixed_bytes);
  for (TilePoint& p : s.native_tile_small) p.bytes = times(p.bytes);
  return s;
}

// Accounted high-water of a tiled run above what was held before it, with `threads` threads and
// no budget: as many tiles in flight as threads.
std::int64_t tiled_peak(const ModelSpec& spec, const std::vector<std::string>& paths, const NetworkInputs& in,
                        TileConfig cfg, int threads) {
  NetworkOptions o;
  o.model.threads = threads;
  o.tile = TileRequest{
      {static_cast<std::int64_t>(cfg.core), static_cast<std::int64_t>(cfg.core), static_cast<std::int64_t>(cfg.core)},
      static_cast<std::int64_t>(cfg.halo)};
  const NetworkRun run = run_network(spec, paths, in, o);
  EXPECT_EQ(run.tiles, 3);
  EXPECT_EQ(run.tiles_in_flight, threads);
  EXPECT_EQ(run.threads_per_run, 1);
  return run.measured_peak_bytes;
}

class TiledNetwork : public ::testing::TestWithParam<std::string> {};

TEST_P(TiledNetwork, EachTileInFlightAddsTileBytes) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& registered = require_model(GetParam());
  std::vector<std::string> paths;
  for (const auto& f : registered.files) paths.push_back(dir + "/" + std::string(f.name));
  const ModelSpec spec = qsmtest::with_twin_tile_cost(registered, paths);
  ASSERT_GT(*spec.native_tile_bytes_per_voxel, 0u);

  for (const TileConfig cfg : {TileConfig{16, 8}, TileConfig{24, 8}, TileConfig{40, 8}}) {
    SCOPED_TRACE("core " + std::to_string(cfg.core) + " halo " + std::to_string(cfg.halo));
    // A volume at least a patch wide on every axis (a patch is cut to the padded volume), three
    // cores long, masked to one row of three tiles (tiles whose core holds no mask voxel are
    // skipped); the field in ppm is read in place.
    const auto c = static_cast<std::int64_t>(cfg.core), h = static_cast<std::int64_t>(cfg.halo);
    const Dims3 dims{3 * c, c + 2 * h, c + 2 * h};
    const Volume field = filled(dims, -0.02, 0.02, 1);
    Volume mask = Volume::zeros(dims, Geometry{});
    for (std::int64_t k = 0; k < c; ++k)
      for (std::int64_t j = 0; j < c; ++j)
        for (std::int64_t i = 0; i < dims[0]; ++i) mask.values()[i + dims[0] * (j + dims[1] * k)] = 1.0;
    NetworkInputs in;
    in.field = &field;
    in.mask = &mask;
    in.te_s = 0.012;
    in.b0_tesla = 3.0;
    // Two and three in flight, not one and two: qsmcore-invnet's TKD prior over the whole volume,
    // before the tiles, can hold more than one tile does, but not more than two.
    // Whether the tiles in flight hold their peaks at the same moment is the scheduler's: a tile
    // that finishes before another starts leaves a run's high-water one tile short (seen once in
    // seven runs for QSMnet's 32³ twin tiles, a few ms each). Each high-water can only fall short
    // of the tiles' sum, so the largest of a few runs is the growth; out of the band, the runs are
    // repeated (at most 4 of each) before the check, and a real misprediction stays out of it.
    const std::uint64_t predicted = tile_bytes(spec, cfg);
    std::int64_t two = 0, three = 0, growth = 0;
    for (int rep = 0; rep < 4 && (rep == 0 || !within_band(growth, predicted)); ++rep) {
      two = std::max(two, tiled_peak(spec, paths, in, cfg, 2));
      three = std::max(three, tiled_peak(spec, paths, in, cfg, 3));
      growth = three - two;
    }
    std::printf("%s core %zu halo %zu: a tile in flight added %lld B, tile_bytes %llu B (%+.2f %%)\n",
                std::string(spec.id).c_str(), cfg.core, cfg.halo, static_cast<long long>(growth),
                static_cast<unsigned long long>(predicted),
                growth > 0 ? 100.0 * (static_cast<double>(predicted) / static_cast<double>(growth) - 1.0) : 0.0);
    EXPECT_TRUE(within_band(growth, predicted))
        << "a second tile in flight added " << growth << " B; tile_bytes gives " << predicted << " B ("
        << *spec.native_tile_bytes_per_voxel << " B/voxel + " << spec.native_tile_fixed_bytes << " B, patch "
        << tile_patch_size(cfg, tile_divisor(spec)) << "³)";
    // A drifted figure fails the same check: every tile figure 6 % higher, or 6 % lower.
    for (const double scale : {1.06, 0.94}) {
      const ModelSpec drifted = scaled_tile_cost(spec, scale);
      EXPECT_FALSE(within_band(growth, tile_bytes(drifted, cfg))) << "scale " << scale;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, TiledNetwork, ::testing::ValuesIn(qsmtest::tiled_network_ids()),
                         qsmtest::IdTestName{});

}  // namespace
