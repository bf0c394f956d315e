// A Plan: one input-shape set of a model, scheduled. It holds the typed graph after passes,
// one kernel per step (weights packed once), each intermediate value's arena offset by
// liveness, and the memory figures — all known before anything runs. run() allocates exactly
// the arena, the scratch block and the output tensors, nothing else.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "graph/passes/passes.h"
#include "graph/typed_graph.h"
#include "kernels/backend.h"
#include "qsmcore/onnx_model.h"
#include "spill/spill.h"

namespace qsmcore {

/// A weight unit: one step whose weights are deferred (left on disk by a residency policy),
/// with what it takes to rebuild its execution-ready form. Units are in execution order.
struct WeightUnit {
  std::string id;                         // "u0007:<node>": zero-padded so id order = execution order
  int step = -1;                          // plan step it feeds
  int node = -1;                          // node index in the plan's typed graph (to rebuild the kernel)
  std::vector<kernels::Layout> producer;  // producer layouts the kernel was planned with
  std::vector<int> deferred_inputs;       // node input slots holding deferred constants
  std::vector<int> read_slots;            // of those, the ones the kernel reads at run time
  std::vector<graph::LeafKey> leaves;     // what it reads from the file
  std::uint64_t host_bytes = 0;           // raw bytes of its leaves
  std::uint64_t device_bytes = 0;         // execution-ready bytes: packed + plain read at run
  std::uint64_t derived_bytes = 0;        // held for a moment while it is built (Kernel::derived_bytes)
};

/// The execution-ready form of a unit (the "device copy"): its kernel with weights packed, and
/// the plain constants the kernel reads at run time (slot order of WeightUnit::read_slots).
struct UnitCopy {
  std::unique_ptr<kernels::Kernel> kernel;
  std::vector<Tensor> plain;
  std::uint64_t bytes = 0;
};

/// Supplies units while a plan runs: acquire before the unit's step, complete after it ran
/// (for every tile of a batch). Implemented by the residency executor.
class UnitProvider {
 public:
  virtual ~UnitProvider() = default;
  virtual void begin_forward() {}
  virtual const UnitCopy& acquire(int unit) = 0;
  virtual void complete(int unit) = 0;
  virtual void finish_forward(bool ok) { (void)ok; }
};

/// How one run places activations: the layout (nullptr = the plan's own) and, when it spills,
/// where the file goes and where the figures are reported.
struct SpillRun {
  const ArenaLayout* layout = nullptr;
  std::string dir;
  /// The file the run spills through, when the caller keeps one across runs (it holds at least
  /// layout->file_bytes per input set); else the run makes its own in `dir`. On a file system
  /// mounted with `discard` (this machine's ext4), freeing a spill file trims every block of it
  /// at once: 2.5-2.7 s for NeXtQSM's 9.1 GB at a quarter of its peak, in each of its six VJPs.
  const residency::SpillFile* file = nullptr;
  SpillReport* stats = nullptr;
  /// When set (one entry per step), each step's kernel seconds are added to it.
  std::vector<double>* step_seconds = nullptr;
};

class Plan {
 public:
  struct Step {
    std::string name;  // node name (or "reorder:<value>")
    std::string op_type;
    std::unique_ptr<kernels::Kernel> kernel;
    std::vector<int> in;  // plan value indices (-1 absent)
    std::vector<int> out;
    std::string impl;  // kernel implementation name (kept when the kernel is a unit's)
    int unit = -1;     // weight unit whose copy runs this step, or -1
    // Recorded at planning (a unit's kernel is released right after it was built).
    std::size_t scratch = 0;
    int inplace = -1;
    std::int64_t packed = 0;
    std::vector<bool> reads;  // per input: read at run time
    // Per input and output: what streaming it through the spill file takes (nullopt: the kernel
    // cannot). Recorded like scratch: a unit's kernel is gone after planning.
    std::vector<std::optional<kernels::StreamNeed>> stream_in, stream_out;
  };
  enum class Storage { Absent, Constant, Deferred, Input, Arena, Output };
  struct Value {
    std::string name;
    DType dtype = DType::Undefined;
    Shape shape;
    kernels::Layout layout;
    Storage storage = Storage::Absent;
    std::shared_ptr<const Tensor> constant;
    int index = -1;          // graph input/output index
    std::size_t offset = 0;  // in the arena, in the plan's own layout (ArenaLayout: per step)
    std::size_t bytes = 0;
  };

  /// Plans a typed graph (passes already run) for a backend. Steps reading deferred constants
  /// become weight units: each is built once here through `leaf` (to fix layouts and sizes),
  /// then released; a UnitProvider supplies them at run time.
  /// With `keep_weights` (FullyResident) the steps keep their kernels: each deferred weight is
  /// read, folded and packed here, and its raw copy freed at once — the plan never holds raw and
  /// packed weights of the whole model together.
  /// `precision` Bf16 is refused unless the backend is oneDNN on a CPU with native bf16.
  Plan(graph::TypedGraph g, Backend backend, int threads, const graph::LeafFn* leaf = nullptr,
       bool keep_weights = false, Precision precision = Precision::F32);

  /// One forward. A plan with weight units needs a provider.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, UnitProvider* units = nullptr) const;
  /// Forwards of several input sets of this plan's shapes, layer-major: each step runs for every
  /// set before the next step, so each weight unit is acquired once per batch. Holds one arena
  /// per set (the scratch block is shared).
  std::vector<std::vector<Tensor>> run_batch(const std::vector<std::vector<Tensor>>& batch,
                                             UnitProvider* units = nullptr, const SpillRun& spill = {}) const;

  /// The plan's own layout: every arena value resident from its first write to its last read.
  const ArenaLayout& layout() const { return *layout_; }
  /// How a spilled layout's streamed operands move: through an io block each beside their
  /// staging, by direct I/O overlapped with the kernel (spill/direct_operand.h), or
  /// Lean, through the page cache with no io block (the least arena; slower: system time).
  enum class Streams { Direct, Lean };
  /// A layout whose arena fits `arena_limit` bytes, spilling values between their uses when
  /// the plan's own does not; fits = false when even spilling every gap does not (the smallest
  /// arena there is, then). Cached per limit; thread-safe.
  std::shared_ptr<const ArenaLayout> layout_within(std::size_t arena_limit, Streams streams = Streams::Lean) const;
  /// The smallest arena this plan can run in, every spillable gap spilled (computed once).
  std::size_t min_arena_bytes(Streams streams = Streams::Lean) const;
  /// The layout of that smallest arena: what sets the least budget (computed once).
  std::shared_ptr<const ArenaLayout> least_layout(Streams streams = Streams::Lean) const;
  /// Arena bytes a layout holds while step s runs: resident values, staging blocks and the
  /// step's scratch. The busiest step is what keeps the arena from being smaller.
  std::vector<std::size_t> held_bytes(const ArenaLayout& l) const;

  const std::vector<WeightUnit>& units() const { return units_; }
  /// Builds unit u's execution-ready copy, reading its leaves through `leaf`.
  UnitCopy build_unit(int u, const graph::LeafFn& leaf) const;

  const PlanMemory& memory() const { return memory_; }
  /// Set by the residency executor: what a forward's weight window adds to the run's peak.
  void set_weight_window_bytes(std::int64_t b) { memory_.weight_window_bytes = b; }
  const std::vector<Step>& steps() const { return steps_; }
  const std::vector<Value>& values() const { return values_; }
  /// Arena bytes live while step s runs (in-place groups counted once): the arena can be no
  /// smaller than the largest of these; the rest of arena_bytes is fragmentation.
  const std::vector<std::size_t>& live_bytes() const { return live_bytes_; }
  const std::vector<Shape>& input_shapes() const { return input_shapes_; }
  Backend backend() const { return backend_; }
  /// OpenMP threads as observed, not as asked: when the kernels were created (what oneDNN
  /// primitives keep), and the team a parallel region got where the last run's kernels ran.
  int created_with_threads() const { return created_threads_; }
  /// The conv chains' window share its graph was built with (graph::kChainWindowShare unless a
  /// budget asked for finer slabs).
  std::int64_t window_share() const { return window_share_; }
  void set_window_share(std::int64_t s) { window_share_ = s; }
  int last_run_threads() const { return run_threads_.load(); }

 private:
  int add_value(Value v);
  // Takes the graph by reference to release each packed constant after its last reader.
  void schedule(graph::TypedGraph& g, kernels::Backend* be, const graph::LeafFn* leaf, bool keep_weights);
  // schedule()'s steps, over its working state (plan.cpp).
  struct Scheduling;
  int primary_value(Scheduling& s, int t);
  int value_in_layout(Scheduling& s, int t, const kernels::Layout& want);
  void schedule_node(Scheduling& s, std::size_t ni);
  WeightUnit materialise_deferred(Scheduling& s, const graph::TNode& n);
  void add_node_outputs(Scheduling& s, const graph::TNode& n, const kernels::LayoutDecision& dec, Step& st);
  void release_read_constants(Scheduling& s, const graph::TNode& n, const kernels::Kernel& k, const Step& st,
                              const WeightUnit& unit);
  void finish_unit(Scheduling& s, std::size_t ni, const kernels::Kernel& k, WeightUnit unit,
                   const std::vector<kernels::Layout>& producer, Step& st);
  void schedule_outputs(Scheduling& s);
  void drop_unread_constants();
  void check_inputs(const std::vector<Tensor>& inputs) const;
  void assign_offsets();
  void alias_in_place();
  int alias_root(int v) const;
  void collect_buffer_events();
  void collect_scratch();
  memory::SpillLayout unspilled_layout();
  void check_pieces();
  std::shared_ptr<const ArenaLayout> build_layout(const memory::SpillLayout& sl, Streams streams) const;
  static std::optional<kernels::StreamNeed> stream_slot(const Step& st, bool output, std::size_t slot);

  Backend backend_;
  int threads_;
  int created_threads_ = 0;
  std::int64_t window_share_ = graph::kChainWindowShare;
  mutable std::atomic<int> run_threads_{0};
  std::vector<Shape> input_shapes_;
  std::vector<Step> steps_;
  std::vector<Value> values_;
  std::vector<int> inputs_, outputs_;
  std::vector<int> alias_;               // value -> value whose bytes it shares (in-place), or -1
  std::vector<std::size_t> live_bytes_;  // per step
  // Activation residency: one buffer per in-place group of arena values (what may spill), the
  // kernels' scratchpads (never spilled) and the step of each.
  std::vector<memory::SpillBuffer> buffers_;
  std::vector<memory::SpillBuffer> direct_buffers_;  // the same, streaming with io blocks (Streams::Direct)
  std::vector<int> buffer_of_;                       // value -> buffer, or -1 outside the arena
  std::vector<memory::Lifetime> scratch_;
  std::vector<int> scratch_step_;
  std::shared_ptr<const ArenaLayout> layout_;
  mutable std::mutex layout_mu_;
  struct KeptLayout {
    std::size_t limit;
    Streams streams;
    std::shared_ptr<const ArenaLayout> layout;
  };
  mutable std::vector<KeptLayout> spilled_layouts_;
  mutable std::shared_ptr<const ArenaLayout> least_, least_direct_;
  // The arena piece when the plan was made: the platform's, or a smaller one that packs tighter.
  std::size_t piece_ = 0;
  PlanMemory memory_;
  std::vector<WeightUnit> units_;
  // Kept only when the plan has units: the typed graph (deferred constants unset) and the
  // backend, to rebuild unit kernels. build_unit sets a unit's constants in g_ while its kernel
  // is made, hence the mutex.
  std::unique_ptr<kernels::Backend> be_;
  mutable graph::TypedGraph g_;
  mutable std::mutex build_mu_;
};

}  // namespace qsmcore
