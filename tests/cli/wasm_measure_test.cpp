// `qsm measure --wasm`'s fit and check, on a stand-in driver (a few lines of JS printing the
// driver's JSON line) whose heap growth is a line except at the check shape, which lies above it
// as a wasm heap does when a block finds no hole: the markdown reports the fit's error there
// (negative: the validation fails visibly), and the table's fixed part is raised so that every
// measured point lies under the registry's bound.
#include "cli/wasm_measure.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "qsmcore/measure.h"
#include "qsmcore/models.h"

namespace {

std::string write_driver(std::int64_t extra_at_check) {
  // One file per test: ctest runs the tests of this binary as parallel processes.
  const std::string path = testing::TempDir() + "/fake_measure_driver_" +
                           testing::UnitTest::GetInstance()->current_test_info()->name() + ".js";
  std::ofstream(path) << "const a = process.argv;\n"
                         "const s = a[a.indexOf('--shape') + 1].split('x').map(Number);\n"
                         "const v = s[0] * s[1] * s[2];\n"
                         "const extra = s.join('x') === '48x48x48' ? "
                      << extra_at_check
                      << " : 0;\n"
                         "console.log(JSON.stringify({spatial: s, voxels: v, heap_start_bytes: 1000, "
                         "heap_bytes: 1000 + 5000000 + 100 * v + extra, growth_bytes: 5000000 + 100 * v + extra, "
                         "seconds: 0.1}));\n";
  return path;
}

TEST(WasmMeasure, ACheckPointAboveTheFitRaisesTheTableNotTheValidation) {
  const std::vector<std::array<std::size_t, 3>> fit{{32, 32, 32}, {64, 32, 32}, {64, 64, 32}, {64, 64, 64}};
  const std::int64_t extra = 3'000'000;
  const auto m = qsmcore::cli::measure_wasm(write_driver(extra), {"net.onnx"}, fit, {{48, 48, 48}}, 2);
  ASSERT_EQ(m.check.size(), 1u);
  const auto v = m.check[0].voxels;
  const auto g = static_cast<std::uint64_t>(m.check[0].growth_bytes);
  EXPECT_LT(m.predicted_growth(v), g) << "the fit alone under-predicts the check point";
  EXPECT_GT(m.check_raise_bytes, 0u);
  EXPECT_EQ(m.check_raise_bytes % 65536, 0u) << "whole pages";
  EXPECT_GE(m.table_fixed_bytes() + m.bytes_per_voxel * v, g) << "the table covers the check point";
  EXPECT_LT(m.table_fixed_bytes() + m.bytes_per_voxel * v, g + 65536) << "by less than a page more";
  for (const auto& p : m.fit)
    EXPECT_GE(m.predicted_growth(p.voxels), static_cast<std::uint64_t>(p.growth_bytes)) << "fit point above the fit";
  const std::string md = qsmcore::cli::wasm_measurement_markdown("net", m);
  const auto row = md.find("| no |");
  ASSERT_NE(row, std::string::npos) << md;
  const std::string check_row = md.substr(row, md.find('\n', row) - row);
  EXPECT_NE(check_row.find("| -"), std::string::npos) << "the fit's own error, negative: " << check_row;
  EXPECT_NE(md.find("lies above the fit"), std::string::npos) << md;
}

TEST(WasmMeasure, ACheckPointUnderTheFitLeavesTheTableAtTheFit) {
  const std::vector<std::array<std::size_t, 3>> fit{{32, 32, 32}, {64, 32, 32}, {64, 64, 32}, {64, 64, 64}};
  const auto m = qsmcore::cli::measure_wasm(write_driver(-1'000'000), {"net.onnx"}, fit, {{48, 48, 48}}, 2);
  EXPECT_EQ(m.check_raise_bytes, 0u);
  EXPECT_EQ(m.table_fixed_bytes(), m.fixed_bytes);
  EXPECT_EQ(qsmcore::cli::wasm_measurement_markdown("net", m).find("lies above the fit"), std::string::npos);
}

}  // namespace

namespace {

// The wasm sweep's default shapes: four distinct voxel counts on the network's pad multiples,
// every one at least 64 planes deep (deep enough for the conv chains), and a
// held-out check shape that is none of them and no shallower than the smallest (coarse pad
// multiples put it beyond the largest: an extrapolation).
TEST(WasmMeasure, DefaultShapesAreDeepDistinctAndHoldOutOneBetween) {
  for (const qsmcore::ModelSpec& spec : qsmcore::all_models()) {
    SCOPED_TRACE(std::string(spec.id));
    const auto base = qsmcore::default_measure_shapes(spec).front();
    const auto shapes = qsmcore::default_wasm_measure_shapes(spec);
    ASSERT_EQ(shapes.size(), 4u);
    std::set<std::size_t> voxels;
    for (const auto& s : shapes) {
      EXPECT_GE(s[0], 64u);
      for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(s[i] % base[i], 0u);
      voxels.insert(s[0] * s[1] * s[2]);
    }
    EXPECT_EQ(voxels.size(), 4u);
    std::array<std::size_t, 3> mult{};
    for (std::size_t i = 0; i < 3; ++i) mult[i] = std::max<std::size_t>({1, spec.pad_multiple[i], spec.size_divisor});
    const auto h = qsmcore::cli::held_out_shape(shapes, mult);
    const std::size_t hv = h[0] * h[1] * h[2];
    EXPECT_EQ(voxels.count(hv), 0u);
    EXPECT_GT(hv, *voxels.begin());
    EXPECT_GE(h[0], shapes.front()[0]);
  }
}

}  // namespace
