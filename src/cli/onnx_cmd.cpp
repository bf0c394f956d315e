// qsm onnx info|run: the generic commands for any ONNX file, with NumPy .npy files as array
// I/O (what our users' Python tools read and write).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/byte_size.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/staged_outputs.h"
#include "io/atomic_file.h"
#include "io/npy.h"
#include "onnx/reader.h"
#include "qsmcore/error.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/residency.h"
#include "runtime/model_internals.h"
#include "runtime/plan.h"

namespace qsmcore::cli {
namespace {

std::string dims_string(const graph::ValueInfo& vi) {
  if (!vi.has_shape) return "(unknown shape)";
  std::string s = "[";
  for (std::size_t i = 0; i < vi.dims.size(); ++i) {
    if (i) s += ", ";
    s += vi.dims[i].value >= 0 ? std::to_string(vi.dims[i].value) : (vi.dims[i].param.empty() ? "?" : vi.dims[i].param);
  }
  return s + "]";
}

void info(const std::string& path) {
  const graph::Model m = onnx::read_model(path);
  std::printf("model: %s\n", path.c_str());
  std::printf("producer: %s %s, ir_version %lld\n", m.producer_name.c_str(), m.producer_version.c_str(),
              static_cast<long long>(m.ir_version));
  std::printf("opsets:");
  for (const auto& [d, v] : m.opsets)
    std::printf(" %s=%lld", d.empty() ? "ai.onnx" : d.c_str(), static_cast<long long>(v));
  std::printf("\ninputs:\n");
  for (const auto& vi : m.graph.inputs)
    std::printf("  %s: %s %s\n", vi.name.c_str(), dtype_name(vi.dtype), dims_string(vi).c_str());
  std::printf("outputs:\n");
  for (const auto& vi : m.graph.outputs)
    std::printf("  %s: %s %s\n", vi.name.c_str(), dtype_name(vi.dtype), dims_string(vi).c_str());
  std::uint64_t bytes = 0, params = 0;
  for (const auto& init : m.graph.initializers) {
    bytes += init.nbytes();
    params += static_cast<std::uint64_t>(numel(init.dims));
  }
  std::printf("parameters: %llu (%llu bytes in %zu initializers)\n", static_cast<unsigned long long>(params),
              static_cast<unsigned long long>(bytes), m.graph.initializers.size());
  std::map<std::string, int> hist;
  for (const auto& n : m.graph.nodes) ++hist[n.op_type];
  std::printf("operators (%zu nodes):\n", m.graph.nodes.size());
  for (const auto& [op, count] : hist) std::printf("  %-24s %d\n", op.c_str(), count);
}

// Output names may hold '/' and other characters that are no file names (torch exports
// "/dec/Conv_output_0"): keep [A-Za-z0-9._-], replace the rest with '_'.
std::string file_stem(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return s.empty() ? "output" : s;
}

struct OnnxRunArgs {
  std::string model;
  std::vector<std::string> ins;
  std::string out_dir;
  std::string backend = to_string(kDefaultBackend);
  std::string precision = "f32";
  int threads = 0;
  int repeat = 1;
  int batch = 1;           // input sets run layer-major through run_batch
  std::string mem_budget;  // "2GiB", "500MB", bytes; "none"; "" = what the process may use
  std::string residency = "full";
  std::string report;      // JSON file ("" = none)
  bool layerwise = false;  // no depth-slab conv chains
  // Activation spill file's directory: "" = the first disk-backed one of $TMPDIR, /tmp, /var/tmp;
  // a memory-backed folder (tmpfs, ramfs) is refused (spill/file.h).
  std::string spill_dir;
  bool no_spill = false;  // refuse over budget instead of spilling
  bool profile = false;   // print where the last run's kernel time went
};

// What a run measured, for the summary and the report.
struct RunFigures {
  double load_s = 0, run_s = 0, median_s = -1;
  std::vector<double> times;
  std::int64_t load_peak = 0, resident = 0, plan_bytes = 0, predicted_peak = -1, measured_peak = 0, weights_peak = 0;
  PlanMemory planned;  // the first run's plan figures (spilled ones when it must spill to fit)
  SpillReport spill;   // what the first run's spill tier did
};

std::map<std::string, Tensor> read_inputs(const OnnxRunArgs& a, const OnnxModel& model) {
  std::map<std::string, Tensor> inputs;
  for (const auto& spec : a.ins) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(ErrorKind::InvalidInput, "--in expects NAME=FILE.npy, got '" + spec + "'");
    inputs[spec.substr(0, eq)] = io::read_npy(spec.substr(eq + 1));
  }
  if (inputs.size() == 1 && model.inputs().size() == 1 && !inputs.count(model.inputs()[0].name)) {
    throw Error(ErrorKind::InvalidInput, a.model + ": the model's input is '" + model.inputs()[0].name + "', not '" +
                                             inputs.begin()->first + "'");
  }
  return inputs;
}

// Runs the model once (plan + run) and then repeat - 1 times more; fills the run's figures.
std::map<std::string, Tensor> run_model(const OnnxRunArgs& a, OnnxModel& model,
                                        const std::map<std::string, Tensor>& inputs, RunFigures& f) {
  std::vector<Shape> shapes;
  for (const auto& d : model.inputs()) {
    auto it = inputs.find(d.name);
    if (it != inputs.end()) shapes.push_back(it->second.shape());
  }
  const std::int64_t before_plan = memory_current();
  const auto t2 = std::chrono::steady_clock::now();
  // Plan first, so the run's peak is predicted from what the plan holds and then measured over
  // the run alone (the run refuses before allocating when the prediction is over the budget).
  if (shapes.size() == model.inputs().size()) {
    f.planned = model.plan_memory(shapes);  // builds the plan
    f.plan_bytes = memory_current() - before_plan;
    // Over the budget, one run spills its activations to fit: predict that run.
    const ModelOptions& o = model.options();
    const std::int64_t room = o.mem_budget > 0 ? model.engine_budget() - memory_current() : 0;
    if (a.batch <= 1 && room > 0 && f.planned.run_peak_bytes() > room && o.spill_activations) {
      try {
        f.planned = model.plan_memory(shapes, room);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::OutOfBudget) throw;  // the run refuses, with the whole story
      }
    }
    f.predicted_peak = memory_current() + f.planned.run_peak_bytes();
  }
  reset_memory_peak();
  // --batch N: N copies of the inputs run layer-major (each weight unit fetched once per batch).
  std::vector<std::vector<Tensor>> batch;
  if (a.batch > 1) {
    std::vector<Tensor> ordered;
    for (const auto& d : model.inputs()) {
      auto it = inputs.find(d.name);
      if (it == inputs.end()) throw Error(ErrorKind::InvalidInput, a.model + ": missing input '" + d.name + "'");
      ordered.push_back(it->second);
    }
    batch.assign(static_cast<std::size_t>(a.batch), ordered);
  }
  auto run_once = [&] {
    if (a.batch <= 1) return model.run(inputs);
    auto outs = model.run_batch(batch);
    std::map<std::string, Tensor> named;
    for (std::size_t i = 0; i < outs.front().size(); ++i) named[model.outputs()[i].name] = outs.front()[i];
    return named;
  };
  auto outputs = run_once();
  f.measured_peak = memory_peak();
  f.spill = model.last_spill();
  f.run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count();
  // Further runs reuse the plan: their median is the steady-state time.
  f.times = {f.run_s};
  const auto weights = static_cast<std::size_t>(MemCategory::Weights);
  const std::int64_t weights_peak_first = memory_counters().peak[weights];
  for (int r = 1; r < a.repeat; ++r) {
    const auto s0 = std::chrono::steady_clock::now();
    outputs = run_once();
    f.times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count());
  }
  f.weights_peak = std::max({weights_peak_first, memory_counters().peak[weights], f.load_peak});
  if (f.times.size() > 1) {
    std::vector<double> later(f.times.begin() + 1, f.times.end());
    std::sort(later.begin(), later.end());
    f.median_s = later[later.size() / 2];
  }
  return outputs;
}

void print_summary(const OnnxRunArgs& a, OnnxModel& model, const std::map<std::string, Tensor>& inputs,
                   const RunFigures& f) {
  const ModelOptions& opts = model.options();
  std::printf("backend %s, %d thread(s), precision %s\n", to_string(opts.backend), opts.threads,
              to_string(opts.precision));
  std::printf("residency %s\n", to_string(opts.residency).c_str());
  std::printf("load %.3f s, first run (plan + run) %.3f s%s\n", f.load_s, f.run_s,
              a.batch > 1 ? (", batches of " + std::to_string(a.batch) + " input sets, layer-major").c_str() : "");
  if (f.median_s >= 0) std::printf("median of %zu planned runs: %.3f s\n", f.times.size() - 1, f.median_s);
  std::printf("weight memory peak %s (accounted, load and runs)\n", mib(f.weights_peak).c_str());
  if (f.predicted_peak >= 0) {
    std::vector<Shape> shapes;
    for (const auto& d : model.inputs()) shapes.push_back(inputs.at(d.name).shape());
    const PlanMemory& pm = f.planned;
    std::printf("predicted run memory %s (arena %s, scratch %s, outputs %s; packed weights %s)\n",
                mib(pm.run_peak_bytes()).c_str(), mib(pm.arena_bytes).c_str(), mib(pm.scratch_bytes).c_str(),
                mib(pm.io_bytes).c_str(), mib(pm.packed_weight_bytes).c_str());
  }
  if (f.spill.written + f.spill.read > 0)
    std::printf(
        "activations spilled to fit the budget: %s written and %s read back through %s in %s, kernels "
        "waited %.3f s for it\n",
        mib(static_cast<std::int64_t>(f.spill.written)).c_str(), mib(static_cast<std::int64_t>(f.spill.read)).c_str(),
        mib(static_cast<std::int64_t>(f.spill.file_bytes)).c_str(), f.spill.dir.c_str(), f.spill.wait_seconds);
  std::printf("resident model %s; plan %s\n", mib(f.resident).c_str(), mib(f.plan_bytes).c_str());
  if (f.predicted_peak >= 0) {
    const std::string budget =
        opts.mem_budget > 0
            ? ", budget " + mib(opts.mem_budget + opts.mem_budget_outside) + " from " + opts.mem_budget_source +
                  (opts.mem_budget_outside > 0
                       ? " (" + mib(model.outside_share()) + " of it left to the process outside the engine" +
                             (model.outside_share() > opts.mem_budget_outside ? ", as measured once planned" : "") + ")"
                       : "")
            : "";
    std::printf("peak memory: predicted %s, measured %s (accounted)%s; process peak RSS %s\n",
                mib(f.predicted_peak).c_str(), mib(f.measured_peak).c_str(), budget.c_str(),
                mib(process_hwm_bytes()).c_str());
  }
}

nlohmann::json report_json(const OnnxRunArgs& a, const OnnxModel& model, const RunFigures& f) {
  const ModelOptions& opts = model.options();
  nlohmann::json j;
  j["model"] = a.model;
  j["backend"] = to_string(opts.backend);
  j["precision"] = to_string(opts.precision);
  j["threads"] = opts.threads;
  const KernelThreads kt = model.kernel_threads();
  j["kernel_threads"] = {{"created", kt.created}, {"run", kt.run}};
  // The budget as given (on the process) and the engine's share of it.
  j["mem_budget_bytes"] = opts.mem_budget + opts.mem_budget_outside;
  j["mem_budget_engine_bytes"] = opts.mem_budget > 0 ? model.engine_budget() : 0;
  j["mem_budget_outside_bytes"] = opts.mem_budget > 0 ? model.outside_share() : 0;
  j["mem_budget_source"] = opts.mem_budget_source;
  j["batch"] = a.batch;
  j["load_seconds"] = f.load_s;
  j["first_run_seconds"] = f.run_s;
  j["run_seconds"] = f.times;
  if (f.median_s >= 0) j["median_run_seconds"] = f.median_s;
  j["load_peak_bytes"] = f.load_peak;
  j["predicted_peak_bytes"] = f.predicted_peak;
  j["measured_peak_bytes"] = f.measured_peak;
  j["weights_peak_bytes"] = f.weights_peak;
  j["process_peak_rss_bytes"] = process_hwm_bytes();
  j["residency"] = nlohmann::json::parse(model.residency_report_json());
  j["spill"] = spill_json(f.spill.file_bytes, f.spill.written, f.spill.read, f.spill.wait_seconds, f.spill.dir);
  j["spill"]["planned_write_bytes"] = f.planned.spill_write_bytes;
  j["spill"]["planned_read_bytes"] = f.planned.spill_read_bytes;
  j["spill"]["planned_direct_bytes"] = f.planned.spill_direct_bytes;
  // The conv chains' slabs the run took: finer than the default (6) when the budget needed them.
  j["spill"]["chain_window_share"] = f.spill.chain_window_share;
  // Slabs kernels streamed with direct I/O (through the page cache where the file system has none).
  j["spill"]["direct_bytes"] = f.spill.direct;
  return j;
}

// Kernel seconds of the last run by op type and implementation, most first.
void print_profile(const std::vector<StepTime>& profile) {
  double total = 0;
  for (const auto& t : profile) total += t.seconds;
  std::printf("kernel time of the last run by op and implementation (%.3f s in all):\n", total);
  std::printf("  %-18s %-50s %6s %9s %6s\n", "op", "implementation", "steps", "seconds", "share");
  for (const auto& t : profile) {
    std::printf("  %-18s %-50s %6lld %9.3f %5.1f%%\n", t.op_type.c_str(), t.impl.c_str(),
                static_cast<long long>(t.steps), t.seconds, total > 0 ? 100.0 * t.seconds / total : 0.0);
  }
}

void run(const OnnxRunArgs& a) {
  // Output places are checked before the model is read; the outputs and the report are written
  // as one set at the end (staged, renamed together), so a failure leaves none of them.
  require_parent_folder((std::filesystem::path(a.out_dir) / "x").string(), "--out");
  if (!a.report.empty()) require_parent_folder(a.report, "--report");
  ModelOptions opts;
  opts.backend = backend_from_string(a.backend);
  opts.precision = precision_from_string(a.precision);
  opts.threads = a.threads;
  opts.stream_conv_chains = !a.layerwise;
  opts.spill_dir = a.spill_dir;
  opts.spill_activations = !a.no_spill;
  opts.profile_steps = a.profile;
  apply_mem_budget(a.mem_budget, opts);
  opts.residency = parse_residency(a.residency);
  RunFigures f;
  reset_memory_peak();
  const auto t0 = std::chrono::steady_clock::now();
  OnnxModel model = OnnxModel::load(a.model, opts);
  f.load_peak = memory_peak();
  f.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  f.resident = memory_current();
  const std::map<std::string, Tensor> inputs = read_inputs(a, model);
  const std::map<std::string, Tensor> outputs = run_model(a, model, inputs, f);

  StagedOutputs staged;
  for (const auto& [name, t] : outputs)
    io::write_npy(staged.stage((std::filesystem::path(a.out_dir) / (file_stem(name) + ".npy")).string()), t);
  print_summary(a, model, inputs, f);
  if (a.profile) print_profile(model.last_profile());
  if (!a.report.empty()) {
    const std::string text = report_json(a, model, f).dump(2) + "\n";
    io::write_file_atomically(staged.stage(a.report), std::as_bytes(std::span(text.data(), text.size())));
  }
  staged.commit();
  for (const auto& [name, t] : outputs)
    std::printf("wrote %s/%s.npy %s\n", a.out_dir.c_str(), file_stem(name).c_str(), shape_to_string(t.shape()).c_str());
  if (!a.report.empty()) std::printf("wrote %s\n", a.report.c_str());
}

// "input=1x1x64x64x64" -> (name, shape)
std::pair<std::string, Shape> parse_shape_arg(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(ErrorKind::InvalidInput, "--shape expects NAME=DxDx..., got '" + spec + "'");
  Shape s;
  std::size_t pos = eq + 1;
  while (pos <= spec.size()) {
    const auto x = spec.find('x', pos);
    const std::string part = spec.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos)
      throw Error(ErrorKind::InvalidInput,
                  std::string("--shape '").append(spec).append("': '").append(part).append("' is not a dimension"));
    s.push_back(std::stoll(part));
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return {spec.substr(0, eq), s};
}

// Plans without running: every step with its kernel and output, then the memory figures.
// The arena values live while step `at` runs (made at or before it, read at or after it), the
// largest first: what a peak step holds. Values sharing bytes (in place) are listed once.
void print_live_at(const Plan& p, int at) {
  const auto& steps = p.steps();
  if (at < 0 || static_cast<std::size_t>(at) >= steps.size())
    throw Error(ErrorKind::InvalidInput,
                "--live-at " + std::to_string(at) + ": the plan has " + std::to_string(steps.size()) + " steps");
  const auto& vals = p.values();
  std::vector<int> def(vals.size(), -1), last(vals.size(), -1);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    for (int v : steps[s].out)
      if (v >= 0 && def[static_cast<std::size_t>(v)] < 0) def[static_cast<std::size_t>(v)] = static_cast<int>(s);
    for (int v : steps[s].in)
      if (v >= 0) last[static_cast<std::size_t>(v)] = static_cast<int>(s);
  }
  std::vector<std::size_t> live;
  for (std::size_t v = 0; v < vals.size(); ++v)
    if (vals[v].storage == Plan::Storage::Arena && def[v] >= 0 && def[v] <= at && std::max(last[v], def[v]) >= at)
      live.push_back(v);
  std::stable_sort(live.begin(), live.end(),
                   [&](std::size_t a, std::size_t b) { return vals[a].bytes > vals[b].bytes; });
  std::printf("values live at step %d (%s):\n", at, steps[static_cast<std::size_t>(at)].op_type.c_str());
  std::printf("  %-40s %-22s %12s %6s %6s\n", "value", "shape", "bytes", "made", "last");
  std::vector<std::size_t> offsets;
  for (std::size_t v : live) {
    if (std::find(offsets.begin(), offsets.end(), vals[v].offset) != offsets.end()) continue;  // in place
    offsets.push_back(vals[v].offset);
    std::printf("  %-40s %-22s %12zu %6d %6d\n", vals[v].name.substr(0, 40).c_str(),
                shape_to_string(vals[v].shape).c_str(), vals[v].bytes, def[v], last[v]);
  }
}

// What a spilled layout holds while step `at` runs, the largest first: resident values (spilled
// ones only between the steps that need them), staging blocks of streamed operands, scratch.
void print_held_at(const Plan& p, const ArenaLayout& l, int at) {
  const auto& steps = p.steps();
  if (at < 0 || static_cast<std::size_t>(at) >= steps.size())
    throw Error(ErrorKind::InvalidInput,
                "--live-at " + std::to_string(at) + ": the plan has " + std::to_string(steps.size()) + " steps");
  const auto s = static_cast<std::size_t>(at);
  struct Row {
    std::string what, shape;
    std::size_t bytes;
    std::string span;
  };
  std::vector<Row> rows;
  for (const auto& r : l.residents) {
    if (r.first > at || r.last < at) continue;
    const auto& v = p.values()[static_cast<std::size_t>(r.value)];
    rows.push_back(
        {v.name, shape_to_string(v.shape), v.bytes, std::to_string(r.first) + ".." + std::to_string(r.last)});
  }
  for (const auto& st : l.streamed[s]) {
    const int v = (st.output ? steps[s].out : steps[s].in)[st.slot];
    rows.push_back({"staging:" + p.values()[static_cast<std::size_t>(v)].name,
                    shape_to_string(p.values()[static_cast<std::size_t>(v)].shape), st.staging_bytes + st.io_bytes,
                    st.output ? "writes" : "reads"});
  }
  if (l.scratch_slot[s] > 0) rows.push_back({"scratch", "-", l.scratch_slot[s], std::to_string(at)});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.bytes > b.bytes; });
  std::printf("held at step %d (%s, %s) in the least layout:\n", at, steps[s].op_type.c_str(),
              steps[s].name.substr(0, 60).c_str());
  std::printf("  %-52s %-22s %12s %12s\n", "value", "shape", "bytes", "steps");
  for (const auto& r : rows)
    std::printf("  %-52s %-22s %12zu %12s\n", r.what.substr(0, 52).c_str(), r.shape.c_str(), r.bytes, r.span.c_str());
}

// The op with the algorithm its convolutions got (issue #50): Conv[winograd], Conv[bf16] (direct
// on bf16 inputs, --precision bf16) or Conv[direct]; a conv chain's letter per layer from its
// kernel's name (w Winograd, b bf16 direct, d direct).
std::string op_with_algorithm(const std::string& op, const std::string& impl) {
  if (op == "Conv") {
    if (impl.find("winograd") != std::string::npos) return op + "[winograd]";
    return op + (impl.find("onednn[bf16]") != std::string::npos ? "[bf16]" : "[direct]");
  }
  const auto open = impl.find(")[");
  if (impl.rfind("qsm:conv_chain(", 0) == 0 && open != std::string::npos) {
    const auto close = impl.find(']', open);
    if (close != std::string::npos) return op + impl.substr(open + 1, close - open);
  }
  return op;
}

void print_steps(const Plan& p, const std::vector<std::size_t>& live) {
  // live = arena bytes in use while the step runs; the largest is where the peak is.
  std::printf("%-4s %-22s %-34s %-24s %12s %10s %10s\n", "#", "op", "kernel", "output", "bytes", "live", "scratch");
  std::size_t i = 0;
  for (const auto& st : p.steps()) {
    const auto& out = st.out.empty() || st.out[0] < 0 ? Plan::Value{} : p.values()[static_cast<std::size_t>(st.out[0])];
    const std::size_t scratch = st.kernel ? st.kernel->scratch_bytes() : st.scratch;
    std::printf("%-4zu %-22s %-34s %-24s %12zu %10s %10s%s\n", i, op_with_algorithm(st.op_type, st.impl).c_str(),
                st.impl.substr(0, 34).c_str(), shape_to_string(out.shape).c_str(), out.bytes,
                mib(static_cast<std::int64_t>(live[i])).c_str(), mib(static_cast<std::int64_t>(scratch)).c_str(),
                out.layout.plain() ? "" : " (blocked)");
    ++i;
  }
}

// Where a spilled layout moves its bytes: per step, what its kernel streams and what gap
// transfers run around it (synchronous ones stall the run; overlapped ones run beside a kernel),
// the steps moving the most first, and the totals: what a budget costs in time.
void print_spill_traffic(const Plan& p, const ArenaLayout& l) {
  struct Row {
    std::size_t step;
    std::uint64_t stream_r = 0, stream_w = 0, sync_r = 0, sync_w = 0, over_r = 0, over_w = 0;
    std::uint64_t total() const { return stream_r + stream_w + sync_r + sync_w + over_r + over_w; }
  };
  std::vector<Row> rows;
  Row sum{0};
  for (std::size_t s = 0; s < p.steps().size(); ++s) {
    Row r{s};
    for (const auto& st : l.streamed[s]) {
      if (st.output) {
        r.stream_w += st.operand_bytes;
      } else {
        const auto need = st.output ? p.steps()[s].stream_out[st.slot] : p.steps()[s].stream_in[st.slot];
        r.stream_r += st.operand_bytes * (need ? std::max(need->reads, 1u) : 1u);
      }
    }
    for (const auto& t : l.transfers[s]) {
      const bool sync = t.when != ArenaLayout::When::During;
      (t.write ? (sync ? r.sync_w : r.over_w) : (sync ? r.sync_r : r.over_r)) += t.bytes;
    }
    if (r.total() == 0) continue;
    for (auto [a, b] : {std::pair{&sum.stream_r, r.stream_r},
                        {&sum.stream_w, r.stream_w},
                        {&sum.sync_r, r.sync_r},
                        {&sum.sync_w, r.sync_w},
                        {&sum.over_r, r.over_r},
                        {&sum.over_w, r.over_w}})
      *a += b;
    rows.push_back(r);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total() > b.total(); });
  auto m = [](std::uint64_t b) { return mib(static_cast<std::int64_t>(b)); };
  std::printf(
      "spill traffic (MiB): streamed by the kernel read/write, synchronous read/write, overlapped read/write\n");
  std::printf("  %-5s %-16s %-40s %11s %11s %11s %11s %11s %11s\n", "step", "op", "name", "stream r", "stream w",
              "sync r", "sync w", "overlap r", "overlap w");
  for (std::size_t i = 0; i < rows.size() && i < 30; ++i) {
    const Row& r = rows[i];
    const auto& st = p.steps()[r.step];
    std::printf("  %-5zu %-16s %-40s %11s %11s %11s %11s %11s %11s\n", r.step, st.op_type.substr(0, 16).c_str(),
                st.name.substr(0, 40).c_str(), m(r.stream_r).c_str(), m(r.stream_w).c_str(), m(r.sync_r).c_str(),
                m(r.sync_w).c_str(), m(r.over_r).c_str(), m(r.over_w).c_str());
  }
  std::printf("  %-5s %-16s %-40s %11s %11s %11s %11s %11s %11s\n", "all", "", "", m(sum.stream_r).c_str(),
              m(sum.stream_w).c_str(), m(sum.sync_r).c_str(), m(sum.sync_w).c_str(), m(sum.over_r).c_str(),
              m(sum.over_w).c_str());
}

struct PlanArgs {
  std::string path;
  std::vector<std::string> shapes;
  std::string backend = to_string(kDefaultBackend);
  std::string precision = "f32";
  bool steps = false;
  bool least = false;       // the smallest arena's layout, every gap spilled: what sets the least budget
  std::string arena_limit;  // a spilled layout within this many arena bytes: where it moves bytes
  std::int64_t window_share = graph::kChainWindowShare;  // conv chains' slabs (a budget may choose finer)
  int live_at = -1;
};

void plan(const PlanArgs& a) {
  ModelOptions opts;
  opts.backend = backend_from_string(a.backend);
  opts.precision = precision_from_string(a.precision);
  OnnxModel model = OnnxModel::load(a.path, opts);
  std::map<std::string, Shape> given;
  for (const auto& s : a.shapes) given.insert(parse_shape_arg(s));
  std::vector<Shape> shapes;
  for (const auto& d : model.inputs()) {
    auto it = given.find(d.name);
    if (it == given.end()) throw Error(ErrorKind::InvalidInput, a.path + ": no --shape for input '" + d.name + "'");
    shapes.push_back(it->second);
  }
  const Plan& p = qsmcore::plan_for(model, shapes, a.window_share);
  const auto least = a.least ? p.least_layout() : nullptr;
  if (!a.arena_limit.empty()) {
    const auto limited = p.layout_within(static_cast<std::size_t>(parse_byte_size(a.arena_limit, "--arena-limit")));
    std::printf("layout within --arena-limit %s: arena %s%s, spill file %s, written %s, read %s per run\n",
                a.arena_limit.c_str(), mib(static_cast<std::int64_t>(limited->arena_bytes)).c_str(),
                limited->fits ? "" : " (does not fit: the least there is)",
                mib(static_cast<std::int64_t>(limited->file_bytes)).c_str(),
                mib(static_cast<std::int64_t>(limited->write_bytes)).c_str(),
                mib(static_cast<std::int64_t>(limited->read_bytes)).c_str());
    print_spill_traffic(p, *limited);
  }
  const std::vector<std::size_t> live = least ? p.held_bytes(*least) : p.live_bytes();
  if (a.steps) print_steps(p, live);
  if (a.live_at >= 0) least ? print_held_at(p, *least, a.live_at) : print_live_at(p, a.live_at);
  const PlanMemory& pm = p.memory();
  std::printf(
      "steps %zu; arena %s, scratch %s, outputs %s, packed weights %s; predicted run peak %s above the resident model "
      "(%s)\n",
      p.steps().size(), mib(pm.arena_bytes).c_str(), mib(pm.scratch_bytes).c_str(), mib(pm.io_bytes).c_str(),
      mib(pm.packed_weight_bytes).c_str(), mib(pm.run_peak_bytes()).c_str(), mib(memory_current()).c_str());
  if (least) {
    const auto busiest = static_cast<int>(std::max_element(live.begin(), live.end()) - live.begin());
    std::printf("least arena %s (every gap spilled, every streamable operand streamed); its busiest step is %d\n",
                mib(static_cast<std::int64_t>(least->arena_bytes)).c_str(), busiest);
    if (a.live_at < 0) print_held_at(p, *least, busiest);
  }
}

}  // namespace

void register_onnx_commands(CLI::App& app) {
  auto* onnx = app.add_subcommand("onnx", "Inspect or run any ONNX file");
  onnx->require_subcommand(1);

  auto* info_cmd = onnx->add_subcommand("info", "Inputs, outputs, operators, parameters and opsets of a model");
  auto info_path = std::make_shared<std::string>();
  info_cmd->add_option("model", *info_path, "ONNX file")->required();
  info_cmd->callback([info_path] { info(*info_path); });

  auto* plan_cmd = onnx->add_subcommand("plan", "Plan a model for input shapes without running it: steps and memory");
  auto plan_args = std::make_shared<PlanArgs>();
  plan_cmd->add_option("model", plan_args->path, "ONNX file")->required();
  plan_cmd->add_option("--shape", plan_args->shapes, "NAME=1x1x64x64x64 (repeat per input)")->required();
  plan_cmd->add_option("--backend", plan_args->backend, "onednn | simd128 | reference")
      ->check(CLI::IsMember({"onednn", "simd128", "reference"}));
  plan_cmd->add_option("--precision", plan_args->precision, kPrecisionHelp)->check(CLI::IsMember({"f32", "bf16"}));
  plan_cmd->add_flag("--steps", plan_args->steps, "list every step");
  plan_cmd->add_flag("--least", plan_args->least,
                     "the layout of the smallest arena (every gap spilled): what each step holds there, and what the "
                     "busiest step holds");
  plan_cmd
      ->add_option("--window-share", plan_args->window_share,
                   "conv chains' windows at most 1/N of an intermediate (default 6; budgets may choose 12 or 24)")
      ->check(CLI::Range(1, 1024));
  plan_cmd->add_option("--arena-limit", plan_args->arena_limit,
                       "a spilled layout within this arena (e.g. 700MiB): the bytes it moves, by step");
  plan_cmd->add_option("--live-at", plan_args->live_at, "list the values live at this step (e.g. the peak one)");
  plan_cmd->callback([plan_args] { plan(*plan_args); });

  auto* run_cmd = onnx->add_subcommand("run", "Run a model on .npy inputs, writing DIR/<output>.npy");
  auto args = std::make_shared<OnnxRunArgs>();
  run_cmd->add_option("model", args->model, "ONNX file")->required();
  run_cmd->add_option("--in", args->ins, "NAME=FILE.npy (repeat per input)")->required();
  run_cmd->add_option("--out", args->out_dir, "output folder")->required();
  run_cmd->add_option("--backend", args->backend, "onednn | simd128 | reference")
      ->check(CLI::IsMember({"onednn", "simd128", "reference"}));
  run_cmd->add_option("--threads", args->threads, kThreadsHelp)->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--precision", args->precision, kPrecisionHelp)->check(CLI::IsMember({"f32", "bf16"}));
  run_cmd->add_option("--repeat", args->repeat, "run K times; prints the median of the runs after the first")
      ->check(CLI::Range(1, 1000));
  run_cmd->add_option("--mem-budget", args->mem_budget, kMemBudgetHelp);
  run_cmd->add_option("--spill-dir", args->spill_dir, kSpillDirHelp);
  run_cmd->add_flag("--no-spill", args->no_spill, kNoSpillHelp);
  run_cmd->add_flag("--profile", args->profile, "print the last run's kernel time by op and implementation");
  run_cmd
      ->add_option("--residency", args->residency,
                   "where weights live: full | layerwise[:depth=N,host=BYTES,device=BYTES] | "
                   "stream[:device=BYTES,host=BYTES,lookahead=N,queue=N,evict=lru|lfu,shards=N]")
      ->capture_default_str();
  run_cmd->add_flag("--no-conv-chains", args->layerwise,
                    "run every convolution on whole volumes (no depth-slab chains): more memory, for comparison");
  run_cmd->add_option("--report", args->report, "write a JSON report (times, memory, residency counters) here");
  run_cmd->add_option("--batch", args->batch, "run N copies of the inputs layer-major per run (tile batches)")
      ->check(CLI::Range(1, 1024));
  run_cmd->callback([args] { run(*args); });
}

}  // namespace qsmcore::cli
