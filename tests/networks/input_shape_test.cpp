// network_input_shape (qsmcore/tiling.h) against what every registry network's wrapper really
// feeds its graph: each twin runs through run_network at odd volume shapes, and every rank-5
// tensor of every graph run (observed through NetworkOptions::on_graph_run) must have the
// spatial shape the helper returns. The oracle is the tensor the wrapper hands the engine, not
// the wrapper's own bookkeeping; the padding rules are also pinned by hand for a few networks.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "qsmcore/error.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/tiling.h"
#include "support/test_data.h"

using namespace qsmcore;

namespace {

using Shape3 = std::array<std::size_t, 3>;

// Smooth-ish positive or centred random data; every voxel inside the mask, so the networks that
// crop to a bounding box (iQSM+'s eroded mask ± 16, HD-BET's non-zero magnitude) keep the volume.
struct Inputs {
  Volume field, phase, magnitude, mask, r2star, r2prime, qsm, rodent;
};

Volume filled(const Dims3& d, const Geometry& g, double lo, double hi, unsigned seed, std::int64_t frames = 1) {
  Volume v = Volume::zeros(d, g, frames);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& x : v.values()) x = u(rng);
  return v;
}

Inputs make_inputs(const Dims3& d) {
  const Geometry g;  // 1 mm, identity affine: RAS, so SynthSeg sees the volume's own axes
  Inputs in{filled(d, g, -0.02, 0.02, 1), filled(d, g, -3.0, 3.0, 2, 2),
            filled(d, g, 0.5, 1.5, 3),    filled(d, g, 1.0, 1.0, 4),
            filled(d, g, 20.0, 40.0, 5),  filled(d, g, 5.0, 15.0, 6),
            filled(d, g, -0.05, 0.05, 7), filled(d, Geometry::with_voxel({0.16, 0.25, 0.2}), 0.5, 1.5, 8)};
  return in;
}

NetworkInputs network_inputs(const ModelSpec& spec, const Inputs& d) {
  const NetworkNeeds n = network_needs(spec);
  NetworkInputs in;
  in.field = &d.field;
  if (n.field_kind == "wrapped phase") {
    in.field = &d.phase;
    in.field_unit = FieldUnit::Rad;
    in.echo_times_s = {0.004, 0.012};
  }
  if (spec.id == "rs2-net") {  // magnitude only, on its own grid
    NetworkInputs m;
    m.magnitude = &d.rodent;
    return m;
  }
  in.magnitude = &d.magnitude;
  in.mask = &d.mask;
  in.r2star = &d.r2star;
  in.r2prime = &d.r2prime;
  in.qsm = &d.qsm;
  in.te_s = 0.012;
  in.b0_tesla = 3.0;
  return in;
}

// The graph's declared spatial input patch (the fixed-patch networks), in the graph's order.
std::optional<Shape3> declared_patch(const ModelSpec& spec, const std::string& dir) {
  if (!has_fixed_patch(spec)) return std::nullopt;
  const OnnxModel m = OnnxModel::load(dir + "/" + std::string(spec.files[0].name));
  const auto& dims = m.inputs().at(0).dims;
  return Shape3{static_cast<std::size_t>(dims.at(2)), static_cast<std::size_t>(dims.at(3)),
                static_cast<std::size_t>(dims.at(4))};
}

// The volume shape network_input_shape is documented to take, for these inputs: the input
// volume (the crops keep all of it here), RS2-Net's fixed patch aside.
Shape3 as_shape(const Dims3& d) {
  return {static_cast<std::size_t>(d[0]), static_cast<std::size_t>(d[1]), static_cast<std::size_t>(d[2])};
}

class EveryNetworkInput : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryNetworkInput, HelperShapeIsWhatTheWrapperFeedsTheGraph) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& spec = require_model(GetParam());
  std::vector<std::string> paths;
  for (const auto& f : spec.files) paths.push_back(dir + "/" + std::string(f.name));
  // Odd, unequal extents (at least AutoQSM's 32³ output patch on every axis).
  for (const Dims3& d : {Dims3{33, 37, 35}, Dims3{45, 34, 39}}) {
    SCOPED_TRACE(std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]));
    const Inputs data = make_inputs(d);
    const Shape3 want = network_input_shape(spec, as_shape(d), declared_patch(spec, dir));
    std::set<Shape3> seen;
    NetworkOptions o;
    o.model.threads = 2;
    o.test_time_flips = false;
    // SynthSeg's graph is channels-last [1, D, H, W, 1]; every other's [1, C, D, H, W].
    const std::size_t first = spec.id.starts_with("synthseg") ? 1 : 2;
    o.on_graph_run = [&](std::size_t, const std::vector<Tensor>& ins, const std::vector<Tensor>&) {
      for (const Tensor& t : ins)
        if (t.shape().size() == 5)
          seen.insert({static_cast<std::size_t>(t.shape()[first]), static_cast<std::size_t>(t.shape()[first + 1]),
                       static_cast<std::size_t>(t.shape()[first + 2])});
    };
    const NetworkRun run = run_network(spec, paths, network_inputs(spec, data), o);
    ASSERT_FALSE(run.outputs.empty());
    ASSERT_EQ(seen.size(), 1u) << "graph inputs of more than one spatial shape";
    EXPECT_EQ(*seen.begin(), want);
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryNetworkInput, ::testing::ValuesIn([] {
                           std::vector<std::string> ids;
                           for (const ModelSpec& s : all_models()) ids.emplace_back(s.id);
                           return ids;
                         }()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-' || ch == '.') ch = '_';
                           return n;
                         });

// The rules by hand, from models.md §1.4/§5 and the authors' code (not from the helper).
TEST(NetworkInputShape, PinnedRules) {
  // QSMnet pads every axis to 16; xQSM to 8.
  EXPECT_EQ(network_input_shape(require_model("qsmnet"), {181, 217, 181}), (Shape3{192, 224, 192}));
  EXPECT_EQ(network_input_shape(require_model("xqsm"), {181, 217, 181}), (Shape3{184, 224, 184}));
  // HD-BET: window (x, y, z) = (192, 192, 96), capped at the shape rounded up to (32, 32, 16),
  // given in its graph's (z, y, x) order.
  EXPECT_EQ(network_input_shape(require_model("hd-bet"), {150, 210, 70}), (Shape3{80, 192, 160}));
  // χ-sepnet: window 192×192×128 capped at the volume rounded up to 16.
  EXPECT_EQ(network_input_shape(require_model("chi-sepnet"), {181, 217, 181}), (Shape3{192, 192, 128}));
  EXPECT_EQ(network_input_shape(require_model("chi-sepnet"), {33, 37, 35}), (Shape3{48, 48, 48}));
  // SynthSeg: multiples of 32, at least 128.
  EXPECT_EQ(network_input_shape(require_model("synthseg"), {181, 100, 33}), (Shape3{192, 128, 128}));
  // LPCNN does not pad; MoDL-QSM drops a slice of each odd axis; NeXtQSM pads to 64.
  EXPECT_EQ(network_input_shape(require_model("lpcnn"), {33, 37, 35}), (Shape3{33, 37, 35}));
  EXPECT_EQ(network_input_shape(require_model("modl-qsm"), {33, 38, 35}), (Shape3{32, 38, 34}));
  EXPECT_EQ(network_input_shape(require_model("nextqsm"), {33, 70, 35}), (Shape3{64, 128, 64}));
  // Fixed patches must be given; zero extents are refused.
  EXPECT_THROW(network_input_shape(require_model("qsmgan"), {64, 64, 64}), Error);
  EXPECT_EQ(network_input_shape(require_model("qsmgan"), {10, 10, 10}, Shape3{64, 64, 64}), (Shape3{64, 64, 64}));
  EXPECT_THROW(network_input_shape(require_model("qsmnet"), {0, 64, 64}), Error);
}

}  // namespace
