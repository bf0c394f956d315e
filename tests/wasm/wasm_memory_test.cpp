// The wasm32 heap figures against what a host sees: the growth of the linear memory's size over
// load + one run, measured by the wasm build's qsm-measure-node (one Node process per point, as
// `qsm measure --wasm` measures the table), never under the prediction and at most 5 % below it
// (issue #15) at shapes the fit did not use:
// - the registry's figures of qsmcore-invnet (measured on its full-size twin) on the shipped
//   trained network, which has the same architecture;
// - a fit made here, on the reduced xQSM twin CI has, checked at a shape left out of it.
// And a run whose prediction is beyond the wasm32 heap maximum is refused before it allocates,
// whatever --mem-budget says. The wasm build is tools/wasm/build.sh's (QSM_WASM_DIR: another).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/npy.h"
#include "qsmcore/measure.h"
#include "qsmcore/models.h"
#include "support/test_data.h"
#include "wasm/wasm_run.h"

namespace fs = std::filesystem;

namespace {

std::string wasm_mt() {
  const char* d = std::getenv("QSM_WASM_DIR");
  return std::string(d ? d : QSM_SOURCE_DIR "/build-wasm") + "/mt";
}

#define QSM_REQUIRE_MEASURE_NODE()                                                               \
  do {                                                                                           \
    if (!fs::exists(wasm_mt() + "/qsm-measure-node.wasm")) {                                     \
      if (::qsmtest::allow_missing_data()) GTEST_SKIP() << "no qsm-measure-node in " << wasm_mt(); \
      FAIL() << "no qsm-measure-node in " << wasm_mt() << ": run tools/wasm/build.sh mt";        \
    }                                                                                            \
  } while (0)

struct Point {
  std::uint64_t voxels = 0;
  std::int64_t growth = 0;  // linear memory size at the end − at main's start
  std::int64_t heap = 0;    // at the end: the high-water a host reads
};

// One fresh wasm process: load `model` and run it once at `shape` (2 threads).
Point measure(const std::string& model, const std::string& shape) {
  const std::string out = testing::TempDir() + "/wasm_mem_" + shape + ".json";
  const std::string cmd = "node '" + wasm_mt() + "/qsm-measure-node.js' --threads 2 --shape " + shape + " '" + model +
                          "' > '" + out + "' 2>&1";
  Point p;
  std::ifstream f;
  if (std::system(cmd.c_str()) != 0) {
    f.open(out);
    ADD_FAILURE() << cmd << " failed:\n" << f.rdbuf();
    return p;
  }
  f.open(out);
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty() && line.front() == '{') last = line;
  const auto j = nlohmann::json::parse(last);
  p.voxels = j.at("voxels").get<std::uint64_t>();
  p.growth = j.at("growth_bytes").get<std::int64_t>();
  p.heap = j.at("heap_bytes").get<std::int64_t>();
  EXPECT_EQ(p.heap - j.at("heap_start_bytes").get<std::int64_t>(), p.growth);
  return p;
}

// issue #15: within +5 % / −0 % of the measured growth.
void expect_within(std::uint64_t predicted, const Point& p, const std::string& what) {
  EXPECT_GE(predicted, static_cast<std::uint64_t>(p.growth)) << what << ": under-predicted";
  EXPECT_LE(static_cast<double>(predicted), 1.05 * static_cast<double>(p.growth)) << what << ": over by more than 5 %";
}

TEST(WasmMemory, RegistryFiguresHoldOnTheShippedNetwork) {
  QSM_REQUIRE_MEASURE_NODE();
  const qsmcore::ModelSpec& spec = qsmcore::require_model("qsmcore-invnet");
  ASSERT_TRUE(spec.memory && spec.memory->wasm_bytes_per_voxel > 0) << "the table has no wasm32 figures for it";
  // Neither shape is in the table's sweep (64×32², 64²×32, 64³, 96×64²): one between, one beyond;
  // both deep enough for the chains the sweep is fitted on (default_wasm_measure_shapes).
  for (const auto& [shape, dims] : {std::pair<std::string, std::array<std::size_t, 3>>{"80x48x48", {80, 48, 48}},
                                    {"128x64x64", {128, 64, 64}}}) {
    SCOPED_TRACE(shape);
    const Point p = measure(QSM_SOURCE_DIR "/models/qsmcore-invnet.onnx", shape);
    ASSERT_EQ(p.voxels, qsmcore::voxel_count(dims));
    expect_within(spec.peak_bytes(dims, qsmcore::Heap::Wasm32), p, "qsmcore-invnet " + shape);
  }
}

TEST(WasmMemory, FitOnAReducedTwinPredictsAShapeOutsideIt) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  QSM_REQUIRE_MEASURE_NODE();
  const std::string model = dir + "/xqsm.onnx";
  std::vector<std::uint64_t> xs;
  std::vector<std::int64_t> ys;
  for (const char* s : {"32x32x32", "64x32x32", "64x64x32", "64x64x64"}) {
    const Point p = measure(model, s);
    xs.push_back(p.voxels);
    ys.push_back(p.growth);
  }
  const qsmcore::LinearFit fit = qsmcore::fit_wasm_heap_growth(xs, ys);
  const Point held_out = measure(model, "48x48x48");
  expect_within(fit.fixed_bytes + fit.bytes_per_voxel * held_out.voxels, held_out, "reduced xqsm 48³");
}

// A test network at 400³ needs more than the 4 GiB a wasm32 memory can have, so even a
// budget of 64 GiB must not let it allocate: the refusal names the figure and the maximum.
TEST(WasmMemory, RunBeyondTheHeapMaximumIsRefusedBeforeItAllocates) {
  const std::string nets = qsmtest::data_dir("QSM_TESTNETS_DIR");
  QSM_REQUIRE_DATA(nets, "QSM_TESTNETS_DIR");
  if (!fs::exists(wasm_mt() + "/qsm-node.wasm")) {
    if (qsmtest::allow_missing_data()) GTEST_SKIP() << "no wasm build in " << wasm_mt();
    FAIL() << "no qsm-node in " << wasm_mt() << ": run tools/wasm/build.sh mt";
  }
  const std::string work = testing::TempDir() + "/wasm_mem_refuse";
  fs::create_directories(work);
  qsmcore::io::write_npy(work + "/x.npy", qsmcore::Tensor::zeros(qsmcore::DType::F32, {1, 1, 400, 400, 400}));
  const std::string log = work + "/log";
  const std::string cmd = "QSM_WASM_DIR='" + wasm_mt() + "' node " QSM_SOURCE_DIR "/tools/wasm/qsm.js onnx run '" +
                          nets + "/unet3d_b16.onnx' --in 'input=" + work + "/x.npy' --out '" + work +
                          "/out' --threads 2 --no-spill --mem-budget 64GiB > '" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  fs::remove(work + "/x.npy");
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  EXPECT_NE(rc, 0) << "a run beyond the wasm32 heap maximum was not refused:\n" << text.str();
  // Which wasm32 bound refuses it first depends on the plan: the heap maximum (an explicit budget
  // is capped there) or, since arenas come in pieces below 2 GiB, its 4 GB activation, larger
  // than any piece. Either way it is refused when planned, naming the bound.
  const bool capped = text.str().find("capped at the wasm32 heap maximum") != std::string::npos;
  const bool piece = text.str().find("in one piece") != std::string::npos;
  EXPECT_TRUE(capped || piece) << text.str();
  EXPECT_EQ(text.str().find("system refused"), std::string::npos) << "it allocated before failing:\n" << text.str();
  EXPECT_FALSE(fs::exists(work + "/out/output.npy"));
}

// Repeated runs of one plan keep the heap where one run left it: a freed arena is kept for the
// next run of its size (core/accounting.cpp). Without that, a small allocation between runs
// took the start of the freed arena and the next one went on top: the shipped network at 64³
// grew from 55.1 MiB after one run to 84.9 MiB after three.
TEST(WasmMemory, RepeatedRunsDoNotGrowTheHeap) {
  QSM_REQUIRE_WASM("mt");
  const std::string model = QSM_SOURCE_DIR "/models/qsmcore-invnet.onnx";
  const std::vector<qsmcore::Tensor> x{qsmtest::random_tensor({1, 3, 64, 64, 64}, 9)};
  const std::string work = testing::TempDir() + "/wasm_repeat";
  const auto heap = [](const qsmtest::WasmRun& r) { return r.report.at("process_peak_rss_bytes").get<std::int64_t>(); };
  const qsmtest::WasmRun once = qsmtest::run_wasm("mt", model, {"input"}, x, work + "/once");
  const qsmtest::WasmRun thrice = qsmtest::run_wasm("mt", model, {"input"}, x, work + "/thrice", "", "--repeat 3");
  ASSERT_GT(heap(once), 0);
  EXPECT_LE(heap(thrice), heap(once) + (std::int64_t{2} << 20)) << "three runs grew the heap beyond one run's";
}

}  // namespace
