// OnnxModel: load an ONNX file (weights indexed by offset, copied once into accounted memory),
// plan it for a set of input shapes (shape inference, folding, fusion, kernel choice, arena
// offsets by liveness), and run it. Plans are cached by input shapes: run() builds a plan the
// first time it sees a shape set and reuses it after. Which calls may run concurrently: the
// comment above class OnnxModel.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qsmcore/residency.h"
#include "qsmcore/tensor.h"

namespace qsmcore {

/// OneDnn: the native kernels. Simd128: the WebAssembly SIMD kernels (src/kernels/wasm). Both
/// fall back to the reference kernels for what they do not implement; Reference runs only those
/// (the test oracle).
enum class Backend { OneDnn, Reference, Simd128 };
const char* to_string(Backend b);
Backend backend_from_string(const std::string& s);  // "onednn" | "reference" | "simd128"

/// The fast backend of this build: Simd128 in the WebAssembly build, oneDNN natively.
#ifdef __EMSCRIPTEN__
inline constexpr Backend kDefaultBackend = Backend::Simd128;
#else
inline constexpr Backend kDefaultBackend = Backend::OneDnn;
#endif

/// The arithmetic of convolutions. F32: as the file says. Bf16 (opt-in, issue #50): on the
/// oneDNN backend, every convolution's input and weights are rounded to bfloat16 (8 bits of
/// mantissa) and its products accumulated in f32; outputs, post-ops and all other ops stay f32.
/// About twice as fast where the CPU has avx512_bf16 or AMX, at a relative error of order 1e-3
/// per layer. Refused on other backends and on CPUs without native bf16.
enum class Precision { F32, Bf16 };
const char* to_string(Precision p);
Precision precision_from_string(const std::string& s);  // "f32" | "bf16"

/// ModelOptions::mem_budget: what the process may use (process_mem_budget()).
inline constexpr std::int64_t kAutoMemBudget = -1;

struct ModelOptions {
  Backend backend = kDefaultBackend;
  /// Threads of every kernel, from plan creation on, in whatever thread runs or rebuilds it.
  /// 0 = the CPUs this process may use (usable_cpus(): affinity, cgroup quota, SLURM).
  int threads = 0;
  /// Convolution arithmetic (Precision); F32 unless asked.
  Precision precision = Precision::F32;
  /// Bytes; 0 = unlimited; kAutoMemBudget = what the process may use (process_mem_budget()). A
  /// plan whose peak exceeds it is refused before anything of the run is allocated.
  std::int64_t mem_budget = kAutoMemBudget;
  /// Where mem_budget came from, named when a run is refused ("--mem-budget", or the limit the
  /// automatic budget was read from; filled by with_process_defaults).
  std::string mem_budget_source;
  /// Of a budget on the whole process (the command line's --mem-budget): the bytes it leaves to
  /// what the process holds outside the engine's accounting (binary, libraries, thread stacks,
  /// oneDNN's generated code). Already taken off mem_budget; a refusal counts it among what is
  /// held and names its figures with it, so a figure it names, given back as the budget, fits.
  std::int64_t mem_budget_outside = 0;
  /// Run Concat(axis=1) -> Conv as per-input convs summed in place, so the concatenated tensor
  /// is never built (lower peak). Changes the summation order, so graphs that threshold
  /// computed values (a ReLU derivative, say) can flip rounding-level ties; off = as written.
  /// Also gates the exact companion rewrite: a Conv read only by a channel Split runs as one
  /// conv per part.
  bool split_concat_convs = true;
  /// Values made by at most two cheap ops from the graph's inputs and read only much later (a
  /// VJP's first ReLU mask) are made again right before that reader, freeing their bytes in
  /// between: a lower peak for a little more compute; off = computed once, where the file says.
  bool recompute_cheap_values = true;
  /// Run chains of same-size 3-D convolutions as depth slabs (oneDNN backend): intermediates
  /// hold a few planes instead of whole volumes (lower peak, same arithmetic per voxel).
  bool stream_conv_chains = true;
  /// Convolutions with more weight bytes than this run as input-channel chunks accumulated in
  /// place, so no weight unit a residency policy moves is larger (0 = never split). Applied
  /// under every policy, so the arithmetic — and the output bits — do not depend on the policy.
  std::uint64_t max_unit_weight_bytes = std::uint64_t{16} << 20;
  /// Where the weights live while the model runs (residency.md). FullyResident reads and packs
  /// everything once; LayerwiseHost keeps raw weights in memory and a bounded window packed;
  /// DenseDiskStream leaves them in the file and streams them through bounded caches. Outputs
  /// are bitwise identical under every policy. Non-resident policies need a model file.
  LayerWeightResidency residency;
  /// Plans kept for reuse (one per input-shape set, least recently used dropped first; a plan a
  /// run is using lives until that run ends). Under FullyResident the plans of one model share
  /// one packed copy of each weight, so a cached plan costs its tables and primitives; under a
  /// residency policy one plan is held at a time whatever this says.
  int max_cached_plans = 4;
  /// Activation residency: a run whose activations do not fit the budget writes values to a
  /// spill file between their uses and reads them back before the next, instead of being
  /// refused. Outputs are bitwise those of the unbudgeted run (same kernels, same order); the
  /// price is the I/O, overlapped with the kernels. Off = such a run is refused.
  bool spill_activations = true;
  /// Directory of the spill file, on a disk: "" = the first disk-backed one of $TMPDIR, /tmp
  /// and /var/tmp; a memory-backed folder (tmpfs, ramfs) is refused, as what it holds would stay
  /// in memory. The file is unlinked as soon as it is created, and written back and dropped from
  /// the page cache after every transfer.
  std::string spill_dir;
  /// Time every kernel call of a run (OnnxModel::last_profile). Off by default: the clock
  /// reads are cheap, but a run that is not asked for its profile keeps none.
  bool profile_steps = false;
};

/// `o` with threads 0 and mem_budget kAutoMemBudget replaced by what this process may use
/// (qsmcore/process_limits.h); OnnxModel::load and run_network apply it. Refuses a precision
/// the backend cannot run (check_precision).
ModelOptions with_process_defaults(ModelOptions o);
/// Throws Unsupported, naming why, where `precision` cannot run on `backend` here (Bf16 needs
/// the oneDNN backend on a CPU with native bf16: avx512_bf16 or AMX, asked at run time).
/// with_process_defaults and every plan check it.
void check_precision(Backend backend, Precision precision);

/// A graph input or output as declared in the file (dims: -1 = dynamic, with its name in params).
struct ValueDesc {
  std::string name;
  DType dtype = DType::Undefined;
  std::vector<std::int64_t> dims;
  std::vector<std::string> dim_params;
  bool has_shape = false;
};

/// Memory figures of one plan, known before it runs.
struct PlanMemory {
  std::int64_t arena_bytes = 0;          // activations (one block, offsets by liveness)
  std::int64_t scratch_bytes = 0;        // largest kernel scratchpad (inside the arena: each step's
                                         // scratch is an arena buffer live for that step)
  std::int64_t packed_weight_bytes = 0;  // execution-ready weights owned by the plan
  std::int64_t unit_weight_bytes = 0;    // execution-ready weights of units a residency policy
                                         // holds (not the plan); 0 when fully resident
  std::int64_t table_bytes = 0;          // plan bookkeeping (approximate)
  std::int64_t io_bytes = 0;             // output tensors handed back
  std::int64_t weight_window_bytes = 0;  // weights a streamed run brings in (residency window,
                                         // host cache, staging); 0 when fully resident
  /// Activation residency, when the run must spill to fit (else 0): the spill file's size and
  /// the bytes one run writes to it and reads back. arena_bytes is then the spilled arena.
  std::int64_t spill_file_bytes = 0;
  std::int64_t spill_write_bytes = 0;
  std::int64_t spill_read_bytes = 0;
  /// Of those, the bytes kernels are to stream slab by slab with direct I/O (0 when the run's
  /// slabs go through the page cache: where the io blocks' room would cost more whole values).
  std::int64_t spill_direct_bytes = 0;
  /// The largest value or scratchpad the arena holds: it needs that many bytes in one piece
  /// (in wasm32 one allocation stays below 2 GiB, and larger arenas are split into pieces).
  std::int64_t largest_block_bytes = 0;
  /// Predicted peak above the resident model and plan for one run (arena, scratch included, +
  /// outputs + the streamed weights' window).
  std::int64_t run_peak_bytes() const { return arena_bytes + io_bytes + weight_window_bytes; }
};

/// What a run's activation spill tier did: the file's size and directory, bytes written and
/// read back, seconds the spill worker spent in I/O and seconds the kernels waited for it.
struct SpillReport {
  std::uint64_t file_bytes = 0, written = 0, read = 0;
  /// Of those, the bytes kernels streamed slab by slab with direct I/O (no page cache); the
  /// rest went through the page cache (whole values, or a file system without direct I/O).
  std::uint64_t direct = 0;
  double io_seconds = 0, wait_seconds = 0;
  /// Conv chains' slabs: windows of at most 1/share of an intermediate (6 unless the budget
  /// needed finer slabs; the output is the same bits either way). 0 before a run.
  std::int64_t chain_window_share = 0;
  std::string dir;
};

/// Kernel time of one op type on one implementation, summed over a run's steps (profile_steps).
struct StepTime {
  std::string op_type;
  std::string impl;
  double seconds = 0;
  std::int64_t steps = 0;
};

/// OpenMP threads the kernels of the last run got, as observed (not as asked): when its plan's
/// kernels were created (oneDNN primitives keep that count) and in the thread that ran them.
/// 0 before the first run.
struct KernelThreads {
  int created = 0;
  int run = 0;
};

/// Thread safety. One OnnxModel may be used from several threads at once (a tiled network runs
/// its tiles on several; a server may share one model between requests), as follows.
///
/// - May run concurrently with any call below and with each other: run, run_batch,
///   plan_memory, min_run_bytes, engine_budget, outside_share, clear_plans, set_threads,
///   last_spill, last_profile, residency_report_json, kernel_threads, the const accessors path,
///   inputs and outputs (fixed at load), and the network wrappers' budget calls
///   (src/runtime/model_budget.h: limit_run_bytes, release_spill_file, spill_since_load).
/// - A run holds its plan, its residency executor and its arena layout until it returns:
///   clear_plans, set_threads, or plan_memory / min_run_bytes building a plan for other shapes
///   (under a streaming residency policy the model keeps one plan at a time and replaces it)
///   drop them from the cache only; what a run in progress holds is freed when it ends. Until
///   then the model may hold that plan and a new one together, beyond what one plan's figures
///   say.
/// - Under FullyResident, runs of the same or different shapes proceed in parallel, each with
///   its own arena. Under a streaming policy (residency.md) the weight window belongs to one
///   forward: runs take turns (run_batch is how several inputs share one pass over the weights),
///   while the other calls above go on beside them.
/// - A run started before set_threads finishes with the threads of its plan; runs after it get
///   plans built with the new count. limit_run_bytes applies to runs that start after it.
/// - Plans are built one at a time (two callers asking for the same new plan build it once);
///   plan_memory and min_run_bytes may wait for a build another thread started.
/// - Outputs do not depend on what else runs: a run gives the same bits as it would alone (for
///   the same plan: shapes, window share, threads).
/// - last_spill and last_profile report the run that finished last; spill_since_load sums all.
///
/// A caller must not: destroy, move from or move-assign a model while any other call on it is
/// in progress; read options().threads while set_threads may run (options() is otherwise
/// fixed after load); use the engine's internal tools (runtime/model_internals.h: plan_for's
/// reference, run_on_window_share) concurrently with clear_plans, set_threads or runs of other
/// shapes. Different models share nothing a caller must lock: oneDNN's primitive cache is
/// process-wide, and the engine empties it of unused primitives (after clear_plans, a dropped
/// plan) only while no thread of the process is creating primitives, else as the last one ends.
class OnnxModel {
 public:
  static OnnxModel load(const std::string& path, const ModelOptions& opts = {});
  static OnnxModel load(std::span<const std::uint8_t> bytes, const ModelOptions& opts = {},
                        const std::string& name = "<memory>");
  OnnxModel(OnnxModel&&) noexcept;
  OnnxModel& operator=(OnnxModel&&) noexcept;
  ~OnnxModel();

  const std::string& path() const;
  const std::vector<ValueDesc>& inputs() const;
  const std::vector<ValueDesc>& outputs() const;
  const ModelOptions& options() const;

  /// Runs with inputs in graph-input order; returns outputs in graph-output order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  /// Runs several input sets of one shape layer-major (each weight unit acquired once per batch:
  /// under a streaming policy the weight traffic is paid per batch, not per set). One activation
  /// arena per set is held at once.
  std::vector<std::vector<Tensor>> run_batch(const std::vector<std::vector<Tensor>>& batch);
  /// Runs with named inputs; returns named outputs.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs);

  /// Memory figures of the plan for these shapes (builds it if needed).
  PlanMemory plan_memory(const std::vector<Shape>& input_shapes);
  /// The same, for a run that may take at most `run_bytes` above the model (arena, outputs and
  /// weight window): activations spill as needed (spill_* figures). Throws OutOfBudget naming
  /// the least that would do when even spilling every activation does not fit, or when
  /// spill_activations is off and the run does not fit as planned.
  PlanMemory plan_memory(const std::vector<Shape>& input_shapes, std::int64_t run_bytes);
  /// The engine's budget and the share of a budget on the whole process left to what it holds
  /// outside the engine, as measured so far: once a plan is built, what the process holds
  /// beyond mem_budget_outside (the plans' generated kernels among it) comes out of the
  /// engine's budget (only where mem_budget_outside > 0).
  std::int64_t engine_budget() const;
  std::int64_t outside_share() const;
  /// The least bytes one run at these shapes needs above the model, every activation that can
  /// leave memory between its uses spilled (on finer conv-chain slabs where that is less).
  /// `enough`: a caller that only asks whether a run fits in this many bytes gets the first
  /// least at or below it (finer slabs are then not planned).
  std::int64_t min_run_bytes(const std::vector<Shape>& input_shapes, std::int64_t enough = 0);
  /// What the last run's spill tier did (all zero when it did not spill).
  SpillReport last_spill() const;
  /// Where the last run's kernel time went, by op type and implementation, most first (empty
  /// unless ModelOptions::profile_steps).
  std::vector<StepTime> last_profile() const;
  /// The residency report of the current plan as JSON (residency.md §8): policy, admission
  /// figures, per-unit bytes, tier counters, transfers, prefetch and weight-store counters.
  std::string residency_report_json() const;
  /// Threads the last run's kernels got (see KernelThreads).
  KernelThreads kernel_threads() const;
  /// Drops cached plans (and their packed weights); a run in progress keeps its own until it ends.
  void clear_plans();
  /// Sets the intra-op threads of later runs (ModelOptions::threads); a change drops the cached
  /// plans, whose kernels keep the count they were created with (a run in progress keeps its plan).
  void set_threads(int threads);

  struct Impl;

 private:
  friend struct ModelInternals;  // the engine's own tools (src/runtime/model_internals.h)
  friend struct ModelBudget;     // the network wrappers' budget calls (src/runtime/model_budget.h)
  explicit OnnxModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qsmcore
