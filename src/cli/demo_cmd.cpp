// qsm demo: for now, runs a model on a generated smooth volume and prints time and memory.
// (The end-to-end QSM demo replaces this once the pipeline exists.)
#include <chrono>
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "qsmcore/error.h"
#include "qsmcore/onnx_model.h"

namespace qsmcore::cli {
namespace {

struct DemoArgs {
  std::string model;
  int size = 128;
  int threads = 0;
  std::string backend = "onednn";
};

// A smooth, deterministic test volume (sum of sinusoids): no RNG, so runs are comparable.
Tensor test_volume(const ValueDesc& d, int size) {
  const std::int64_t c = d.dims.size() == 5 && d.dims[1] > 0 ? d.dims[1] : 1;
  Tensor t = Tensor::empty(DType::F32, {1, c, size, size, size});
  float* p = t.data<float>();
  std::int64_t i = 0;
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (int z = 0; z < size; ++z)
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x)
          p[i++] = static_cast<float>(std::sin(0.11 * x + ch) * std::cos(0.07 * y) + 0.5 * std::sin(0.05 * z));
  return t;
}

void demo(const DemoArgs& a) {
  ModelOptions opts;
  opts.backend = backend_from_string(a.backend);
  opts.threads = a.threads;
  auto t0 = std::chrono::steady_clock::now();
  OnnxModel m = OnnxModel::load(a.model, opts);
  if (m.inputs().size() != 1) throw Error(ErrorKind::InvalidInput, a.model + ": the demo runs single-input models");
  const std::int64_t resident = memory_current();
  Tensor in = test_volume(m.inputs()[0], a.size);
  auto t1 = std::chrono::steady_clock::now();
  const PlanMemory pm = m.plan_memory({in.shape()});
  auto t2 = std::chrono::steady_clock::now();
  // The run's own peak, against the plan's prediction (both above what is held before it).
  const std::int64_t before_run = memory_current();
  reset_memory_peak();
  auto out = m.run(std::vector<Tensor>{in});
  auto t3 = std::chrono::steady_clock::now();
  const std::int64_t run_peak = memory_peak() - before_run;
  double lo = 1e30, hi = -1e30;
  for (float v : out[0].span<float>()) {
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  std::printf("model %s, input %s, backend %s, %d thread(s)\n", a.model.c_str(), shape_to_string(in.shape()).c_str(),
              to_string(m.options().backend), m.options().threads);
  std::printf("load %.2f s, plan %.2f s, run %.2f s\n", std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count(), std::chrono::duration<double>(t3 - t2).count());
  std::printf("memory: resident model %.1f MiB, plan (packed weights) %.1f MiB; run predicted %.1f MiB, measured "
              "%.1f MiB (accounted); process peak RSS %.1f MiB\n",
              resident / 1048576.0, pm.packed_weight_bytes / 1048576.0, pm.run_peak_bytes() / 1048576.0,
              run_peak / 1048576.0, process_hwm_bytes() / 1048576.0);
  std::printf("output %s in [%.4g, %.4g]\n", shape_to_string(out[0].shape()).c_str(), lo, hi);
}

}  // namespace

void register_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Run a model on a generated volume and report time and memory");
  auto args = std::make_shared<DemoArgs>();
  cmd->add_option("--model", args->model, "ONNX file (single 5-D input)")->required();
  cmd->add_option("--size", args->size, "edge of the cubic test volume")->check(CLI::Range(8, 512));
  cmd->add_option("--threads", args->threads, "threads (default: all cores)");
  cmd->add_option("--backend", args->backend, "onednn | reference")->check(CLI::IsMember({"onednn", "reference"}));
  cmd->callback([args] { demo(*args); });
}

}  // namespace qsmcore::cli
