// A raw ONNX entry of the browser module, for bench/wasm_vs_ort_web.sh only: the engine on one
// float32 input, with no network recipe around it, so the same file and the same input can be
// given to onnxruntime-web in the same page and the two compared op for op.
//
// qsm_bench_onnx(request, input): request {"model_path" (a MEMFS file the Worker wrote, or a
// WORKERFS-mounted Blob, as the page does), "shape" (the input's), "threads", "repeat",
// "residency" (parse_residency's syntax; default full)} -> JSON {load_seconds, plan_seconds,
// run_seconds [a warm-up run, then `repeat` runs], accounted_peak_bytes (the engine's own
// high-water over load and runs), plan (arena/packed-weight bytes), heap_bytes}. The model stays
// loaded: qsm_bench_again() runs it once more (the driver interleaves these with ORT-web's runs).
// The last run's first output stays readable through qsm_bench_output_data/size.
#include <emscripten/emscripten.h>
#include <emscripten/heap.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "qsmcore/memory.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/residency.h"
#include "qsmcore/tensor.h"

using nlohmann::json;
using namespace qsmcore;

namespace {
using Clock = std::chrono::steady_clock;
std::optional<OnnxModel> g_model;  // the last qsm_bench_onnx call's model, for qsm_bench_again
Shape g_shape;
float* g_input = nullptr;
std::vector<Tensor> g_output;  // the last run's outputs, kept as the engine made them (no copy)
std::string g_reply;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE double qsm_bench_again();

EMSCRIPTEN_KEEPALIVE const char* qsm_bench_onnx(const char* request, const float* input) {
  json reply;
  g_output.clear();
  g_model.reset();
  try {
    const json req = json::parse(request);
    ModelOptions opts;
    opts.threads = req.value("threads", 0);
    // Spilling would write to MEMFS, i.e. into the JS heap: a bench run either fits or fails.
    opts.spill_activations = false;
    if (req.contains("residency")) opts.residency = parse_residency(req["residency"].get<std::string>());
    g_shape = req.at("shape").get<Shape>();
    g_input = const_cast<float*>(input);
    const int repeat = req.value("repeat", 3);
    reset_memory_peak();
    auto t = Clock::now();
    g_model.emplace(OnnxModel::load(req.at("model_path").get<std::string>(), opts));
    reply["load_seconds"] = seconds_since(t);
    t = Clock::now();
    const PlanMemory pm = g_model->plan_memory({g_shape});  // builds and caches the plan the runs use
    reply["plan_seconds"] = seconds_since(t);
    reply["plan"] = {{"arena_bytes", pm.arena_bytes}, {"packed_weight_bytes", pm.packed_weight_bytes},
                     {"io_bytes", pm.io_bytes}};
    std::vector<double> times;
    for (int i = 0; i <= repeat; ++i) times.push_back(qsm_bench_again());  // run 0 is the warm-up
    reply["run_seconds"] = times;
    reply["accounted_peak_bytes"] = memory_peak();
    reply["output_shape"] = g_output.at(0).shape();
  } catch (const std::exception& e) {
    reply["error"] = e.what();
  }
  reply["heap_bytes"] = static_cast<std::int64_t>(emscripten_get_heap_size());
  g_reply = reply.dump();
  return g_reply.c_str();
}

/// One more run of the model the last qsm_bench_onnx call kept, on the same input: its seconds
/// (-1 on error). The driver alternates these with ORT-web's runs, so both see the same load.
EMSCRIPTEN_KEEPALIVE double qsm_bench_again() {
  if (!g_model) return -1;
  try {
    g_output.clear();  // the previous run's output is freed first, as ORT-web's is
    // A view: the caller's copy in the heap is the input, as ORT-web's tensor is its own.
    const std::vector<Tensor> in{Tensor::view(DType::F32, g_shape, g_input)};
    const auto t = Clock::now();
    g_output = g_model->run(in);
    return seconds_since(t);
  } catch (const std::exception&) {
    return -1;
  }
}

/// The engine's accounted high-water since the last qsm_bench_onnx call started.
EMSCRIPTEN_KEEPALIVE double qsm_bench_accounted_peak() { return static_cast<double>(memory_peak()); }

/// The first output of the last qsm_bench_onnx call and its element count.
EMSCRIPTEN_KEEPALIVE const float* qsm_bench_output_data() {
  return g_output.empty() ? nullptr : g_output[0].data<float>();
}
EMSCRIPTEN_KEEPALIVE int qsm_bench_output_size() {
  return g_output.empty() ? 0 : static_cast<int>(g_output[0].numel());
}

}  // extern "C"
