// One budget (tiling.h, memory.md §4.4): a host that budgets a tiled run with the registry's
// figures decides the tiles in flight qsmcore then runs. For every tiled network's twin, at
// several tile configs and budgets, run_network's tiles_in_flight must equal what memory.md
// §4.3's formula gives from the registry row alone (min(threads, ⌊(room − resident − inference
// fixed − wrapper) / (tile B/voxel · patch³)⌋), written out here, not called), and tile_concurrency
// must give the same.
#include <gtest/gtest.h>

#include <random>

#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/tiling.h"
#include "support/registry_params.h"
#include "support/test_data.h"

using namespace qsmcore;

namespace {

Volume filled(const Dims3& d, double lo, double hi, unsigned seed) {
  Volume v = Volume::zeros(d, Geometry{});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& x : v.values()) x = u(rng);
  return v;
}

// The host's figure, from the registry row and memory.md §4.3 only.
std::int64_t host_in_flight(const ModelSpec& s, std::int64_t core, std::int64_t halo, std::int64_t room,
                            std::int64_t threads, std::int64_t voxels) {
  std::int64_t d = s.size_divisor;
  for (auto m : s.pad_multiple) d = std::max<std::int64_t>(d, m);
  const std::int64_t p = (core + 2 * halo + d - 1) / d * d;
  // The native tile cost (TileCost): the line, or below the last small point the chord.
  const std::int64_t v = p * p * p;
  std::int64_t per = static_cast<std::int64_t>(s.native_tile_fixed_bytes) +
                     static_cast<std::int64_t>(*s.native_tile_bytes_per_voxel) * v;
  std::vector<std::pair<std::int64_t, std::int64_t>> pts;
  for (const TilePoint& t : s.native_tile_small)
    if (t.voxels > 0) pts.emplace_back(static_cast<std::int64_t>(t.voxels), static_cast<std::int64_t>(t.bytes));
  if (!pts.empty() && v < pts.back().first) {
    per = pts.front().second;
    for (std::size_t i = 1; i < pts.size() && v > pts.front().first; ++i)
      if (v <= pts[i].first && v > pts[i - 1].first) {
        const auto [a, ab] = pts[i - 1];
        const auto [b, bb] = pts[i];
        per = bb <= ab ? ab : ab + ((bb - ab) * (v - a) + (b - a) - 1) / (b - a);
      }
  }
  // The output (+ the TKD prior); the field is given in ppm, so it is read in place.
  const std::int64_t volumes = s.id == "qsmcore-invnet" ? 2 : 1;
  const std::int64_t held = static_cast<std::int64_t>(s.memory->resident_bytes + s.memory->inference_fixed_bytes) +
                            volumes * 8 * voxels + 4096;
  const std::int64_t fit = room > held ? (room - held) / per : 0;
  return std::max<std::int64_t>(1, std::min(threads, fit));
}

class TiledNetwork : public ::testing::TestWithParam<std::string> {};

TEST_P(TiledNetwork, WrapperRunsTheTilesInFlightAHostComputes) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& spec = require_model(GetParam());
  ASSERT_TRUE(spec.tiled && spec.memory && spec.native_tile_bytes_per_voxel) << "a tiled network without its figures";
  std::vector<std::string> paths;
  for (const auto& f : spec.files) paths.push_back(dir + "/" + std::string(f.name));
  const Dims3 dims{41, 36, 38};
  const Volume field = filled(dims, -0.02, 0.02, 1), mask = filled(dims, 1.0, 1.0, 2);
  NetworkInputs in;
  in.field = &field;
  in.mask = &mask;
  in.te_s = 0.012;
  in.b0_tesla = 3.0;
  const std::int64_t V = field.voxels();
  constexpr std::int64_t kThreads = 2;
  int ones = 0, twos = 0;
  for (const auto& [core, halo] : {std::pair<std::int64_t, std::int64_t>{16, 8}, {24, 4}}) {
    const TileConfig cfg{static_cast<std::size_t>(core), static_cast<std::size_t>(halo)};
    const auto per = static_cast<std::int64_t>(tile_bytes(spec, cfg));
    const auto wrapper = static_cast<std::int64_t>(tiled_wrapper_bytes(spec, static_cast<std::uint64_t>(V), false));
    const std::int64_t held =
        static_cast<std::int64_t>(spec.memory->resident_bytes + spec.memory->inference_fixed_bytes) + wrapper;
    // Rooms for one tile and a half, and for two and a bit (two is what two threads run at most).
    for (const std::int64_t room : {held + per * 3 / 2, held + 2 * per + 4096}) {
      SCOPED_TRACE("core " + std::to_string(core) + " halo " + std::to_string(halo) + " room " + std::to_string(room));
      const std::int64_t want = host_in_flight(spec, core, halo, room, kThreads, V);
      EXPECT_EQ(static_cast<std::int64_t>(tile_concurrency(spec, cfg, static_cast<std::uint64_t>(room), kThreads,
                                                           static_cast<std::uint64_t>(wrapper))),
                want);
      (want == 1 ? ones : twos) += 1;
      NetworkOptions o;
      o.model.threads = kThreads;
      o.tile = TileRequest{{core, core, core}, halo};
      o.model.mem_budget = memory_current() + room;
      const NetworkRun run = run_network(spec, paths, in, o);
      ASSERT_GT(run.tiles, 1);
      EXPECT_EQ(run.tiles_in_flight, want);
    }
  }
  // Both decisions were exercised.
  EXPECT_GT(ones, 0);
  EXPECT_GT(twos, 0);
}

INSTANTIATE_TEST_SUITE_P(Registry, TiledNetwork, ::testing::ValuesIn(qsmtest::tiled_network_ids()),
                         qsmtest::IdTestName{});

}  // namespace
