// The WebAssembly build against the native engine. Every reduced twin and both test networks run
// through `node tools/wasm/qsm.js onnx run` (the pthread build: the simd128 backend, 2 threads)
// and natively (oneDNN, 2 threads); every output must agree to max|Δ| ≤ 1e-5 × its range (a
// non-finite value fails), but for NeXtQSM's VJP graph, whose thresholds turn rounding ties into
// other branches: it is held to qsmtest::expect_threshold_graph_match, as against ONNX Runtime. A few run through the
// single-threaded build as well. The report's heap high-water must hold the accounted peak: the wasm heap is where
// every accounted byte lives. The wasm build is tools/wasm/build.sh's (QSM_WASM_DIR names another build-wasm folder).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "qsmcore/onnx_model.h"
#include "support/test_data.h"
#include "support/twin_cases.h"
#include "wasm/wasm_run.h"

namespace fs = std::filesystem;
using qsmtest::run_wasm;
using qsmtest::wasm_dir;
using qsmtest::WasmRun;

namespace {

/// Native outputs of the model on the inputs (oneDNN, 2 threads).
std::map<std::string, qsmcore::Tensor> run_native(const std::string& model, const std::vector<std::string>& names,
                                                  const std::vector<qsmcore::Tensor>& inputs) {
  qsmcore::ModelOptions o;
  o.threads = 2;
  auto m = qsmcore::OnnxModel::load(model, o);
  std::map<std::string, qsmcore::Tensor> in;
  for (std::size_t i = 0; i < inputs.size(); ++i) in.emplace(names[i], inputs[i]);
  return m.run(in);
}

/// `threshold_graph`: held to qsmtest::expect_threshold_graph_match instead (its rounding ties).
void expect_same(const std::map<std::string, qsmcore::Tensor>& native, const WasmRun& wasm,
                 bool threshold_graph = false) {
  ASSERT_EQ(wasm.outputs.size(), native.size()) << "output count";
  for (const auto& [name, want] : native) {
    auto it = wasm.outputs.find(name);
    ASSERT_NE(it, wasm.outputs.end()) << "wasm wrote no " << name << ".npy";
    if (threshold_graph) {
      qsmtest::expect_threshold_graph_match(it->second, want, name + ", wasm against native", 0.25);
      continue;
    }
    const double err = qsmtest::relative_max_error(it->second, want);
    EXPECT_LE(err, 1e-5) << name << ": max|Δ| / range, wasm against native";
  }
  const auto heap = wasm.report.at("process_peak_rss_bytes").get<std::int64_t>();
  const auto peak = wasm.report.at("measured_peak_bytes").get<std::int64_t>();
  EXPECT_GE(heap, peak) << "the wasm heap high-water is below the accounted peak";
}

void check_twin(const qsmtest::TwinCase& c, const std::string& variant) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  std::vector<std::string> names;
  for (const auto& [name, shape] : c.inputs) names.push_back(name);
  const auto inputs = qsmtest::twin_inputs(c, 11);
  const auto native = run_native(dir + "/" + c.file, names, inputs);
  const std::string work = testing::TempDir() + "/wasm_" + variant + "_" + fs::path(c.file).stem().string();
  expect_same(native, run_wasm(variant, dir + "/" + c.file, names, inputs, work), qsmtest::is_threshold_graph(c.file));
}

class WasmTwins : public testing::TestWithParam<qsmtest::TwinCase> {};

TEST_P(WasmTwins, MatchesNative) {
  QSM_REQUIRE_DATA(qsmtest::data_dir("QSM_TWINS_DIR"), "QSM_TWINS_DIR");
  QSM_REQUIRE_WASM("mt");
  check_twin(GetParam(), "mt");
}

INSTANTIATE_TEST_SUITE_P(Twins, WasmTwins, testing::ValuesIn(qsmtest::twin_cases()), qsmtest::twin_case_name);

// The single-threaded build (pages without SharedArrayBuffer) on a U-Net and an unrolled graph.
TEST(WasmSingleThread, MatchesNative) {
  QSM_REQUIRE_DATA(qsmtest::data_dir("QSM_TWINS_DIR"), "QSM_TWINS_DIR");
  QSM_REQUIRE_WASM("st");
  int ran = 0;
  for (const auto& c : qsmtest::twin_cases()) {
    if (c.file.rfind("xqsm", 0) != 0 && c.file.rfind("nextqsm", 0) != 0) continue;
    SCOPED_TRACE(c.file);
    check_twin(c, "st");
    ++ran;
  }
  EXPECT_GE(ran, 2) << "no xqsm / nextqsm twin in the manifest";
}

TEST(WasmTestNets, MatchNative) {
  const std::string dir = qsmtest::data_dir("QSM_TESTNETS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TESTNETS_DIR");
  QSM_REQUIRE_WASM("mt");
  for (const char* m : {"unet3d_b16.onnx", "hdbet_like_b16.onnx"}) {
    SCOPED_TRACE(m);
    const std::vector<qsmcore::Tensor> x{qsmtest::random_tensor({1, 1, 16, 32, 48}, 7)};
    const auto native = run_native(dir + "/" + m, {"input"}, x);
    expect_same(native, run_wasm("mt", dir + "/" + m, {"input"}, x, testing::TempDir() + "/wasm_net_" + m));
  }
}

}  // namespace

namespace {

// Arenas in pieces (memory/arena_piece.h), which wasm32 needs above 2 GiB, forced small through
// QSM_ARENA_PIECE_BYTES so the wasm kernels run on a split arena at a test's size: the shipped
// network at 64³ in pieces of its largest value (16 MiB; its arena is about 48 MiB) against the
// native one-piece run.
TEST(WasmArenaPieces, APiecedRunMatchesNative) {
  QSM_REQUIRE_WASM("mt");
  const std::string model = QSM_SOURCE_DIR "/models/qsmcore-invnet.onnx";
  const std::vector<qsmcore::Tensor> x{qsmtest::random_tensor({1, 3, 64, 64, 64}, 3)};
  qsmcore::ModelOptions o;
  o.threads = 2;
  auto m = qsmcore::OnnxModel::load(model, o);
  const qsmcore::PlanMemory pm = m.plan_memory({x[0].shape()});
  const std::int64_t piece = std::max<std::int64_t>(pm.largest_block_bytes, pm.arena_bytes / 3);
  const auto native = run_native(model, {"input"}, x);
  expect_same(native, run_wasm("mt", model, {"input"}, x, testing::TempDir() + "/wasm_pieces",
                               "QSM_ARENA_PIECE_BYTES=" + std::to_string(piece)));
  // The variable reaches the wasm engine: pieces smaller than a value are refused by name.
  const std::string work = testing::TempDir() + "/wasm_pieces";
  const std::string cmd = "QSM_ARENA_PIECE_BYTES=4096 QSM_WASM_DIR='" + wasm_dir() +
                          "/mt' node " QSM_SOURCE_DIR "/tools/wasm/qsm.js onnx run '" + model +
                          "' --in 'input=" + work + "/in0.npy' --out '" + work + "/small' > '" + work +
                          "/small.log' 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  std::ifstream log(work + "/small.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("in one piece"), std::string::npos) << text;
}

}  // namespace

namespace {

// Conv chains on the simd128 backend (kernels/wasm/conv_chain.cpp): a few depth planes of each
// intermediate instead of whole volumes. At a depth of 48 the reduced twins form chains with
// every feature the kernel has: up-sampling sources, split concatenations and closing poolings
// (IR2QSM), residuals (LPCNN), whole-resolution blocks (QSMnet) and octave U-Nets (xQSM). A
// chained run must equal the unchained one (--no-conv-chains) to the bit, agree with native,
// and its plan must hold chains at all. The accounted peak may not rise.
TEST(WasmConvChains, ChainedRunsEqualUnchainedOnesToTheBit) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  QSM_REQUIRE_WASM("mt");
  int lower = 0;
  for (const char* net : {"ir2qsm", "lpcnn", "qsmnet", "xqsm"}) {
    SCOPED_TRACE(net);
    const std::string model = dir + "/" + net + ".onnx";
    const std::string work = testing::TempDir() + "/wasm_chain_" + net;
    fs::create_directories(work);
    const std::string plan_log = work + "/plan.log";
    const std::string plan = "QSM_WASM_DIR='" + wasm_dir() +
                             "/mt' node " QSM_SOURCE_DIR "/tools/wasm/qsm.js onnx plan '" + model +
                             "' --shape field=1x1x48x16x16 --steps > '" + plan_log + "' 2>&1";
    ASSERT_EQ(std::system(plan.c_str()), 0) << plan;
    std::ifstream log(plan_log);
    const std::string steps((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(steps.find("simd128:conv_chain"), std::string::npos) << "no chain in the plan:\n" << steps;
    const std::vector<qsmcore::Tensor> x{qsmtest::random_tensor({1, 1, 48, 16, 16}, 5)};
    const WasmRun chained = run_wasm("mt", model, {"field"}, x, work + "/chained");
    const WasmRun whole = run_wasm("mt", model, {"field"}, x, work + "/whole", "", "--no-conv-chains");
    ASSERT_EQ(chained.outputs.size(), whole.outputs.size());
    for (const auto& [name, t] : whole.outputs) {
      const auto it = chained.outputs.find(name);
      ASSERT_NE(it, chained.outputs.end()) << name;
      qsmtest::expect_bitwise({it->second}, {t}, name);
    }
    expect_same(run_native(model, {"field"}, x), chained);
    const auto peak = [](const WasmRun& r) { return r.report.at("measured_peak_bytes").get<std::int64_t>(); };
    EXPECT_LE(peak(chained), peak(whole)) << "chains raised the accounted peak";
    lower += peak(chained) < peak(whole) ? 1 : 0;
  }
  EXPECT_GE(lower, 1) << "chains lowered no network's accounted peak";
}

}  // namespace
