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
#include "memory/spill_planner.h"
#include "qsmcore/onnx_model.h"
#include "residency/spill_file.h"

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

/// Where the arena values sit at each step, and the spill transfers around the steps
/// (activation residency, issue #16). A plan's own layout keeps every value resident for its
/// whole life; Plan::layout_within builds one for a smaller arena, in which values leave the
/// arena between uses and come back, possibly elsewhere. Outputs are the same bits either way:
/// the same kernels run in the same order on the same bytes, only their addresses differ.
struct ArenaLayout {
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  // Overlapped transfers run During a step (started as it starts, finished before the next);
  // synchronous ones right Before or After its kernel.
  enum class When { Before, During, After };
  struct Transfer {
    When when = When::During;
    bool write = false;  // arena -> file (else file -> arena)
    std::size_t arena_offset = 0;
    std::uint64_t file_offset = 0;
    std::size_t bytes = 0;
  };
  std::size_t arena_bytes = 0;
  // The arena is allocated in pieces of this many bytes (the last one smaller), none of which any
  // value or scratchpad straddles; 0: one piece (memory/arena_piece.h).
  std::size_t piece_bytes = 0;
  std::vector<std::vector<std::size_t>> in_offset, out_offset;  // per step and slot (npos: not in the arena)
  std::vector<std::size_t> scratch_offset, scratch_slot;        // per step
  // Per step. An overlapped write runs during the step after a value's last use before a gap,
  // an overlapped read during the step before its next use; a synchronous one right after that
  // use or right before the next.
  std::vector<std::vector<Transfer>> transfers;
  // Per step: the operands it streams through the file instead of holding them (their offsets
  // above are npos), each with its own staging block in the arena.
  struct Streamed {
    bool output = false;
    std::size_t slot = 0;
    std::uint64_t file_offset = 0;
    std::size_t staging_offset = 0, staging_bytes = 0;
    std::size_t operand_bytes = 0;  // the operand's whole size (its region of the file)
    // The block its direct I/O passes through (residency::SpillFile::stream_io_bytes), after
    // the staging; 0 bytes where there is no direct I/O.
    std::size_t io_offset = 0, io_bytes = 0;
  };
  std::vector<std::vector<Streamed>> streamed;
  // Each resident stretch: the value (root of its in-place group) held in the arena over steps
  // [first, last]. Runs do not read it; tools show from it what a step holds (qsm onnx plan).
  struct Resident {
    int value = -1;
    int first = 0, last = 0;
  };
  std::vector<Resident> residents;
  std::uint64_t file_bytes = 0, write_bytes = 0, read_bytes = 0;  // per set
  std::uint64_t streamed_bytes = 0;  // of those moved, the bytes kernels stream slab by slab
  bool direct_streams = false;       // those go by direct I/O through io blocks (Plan::Streams::Direct)
  bool fits = true;                  // within the limit it was built for
  bool spills() const { return file_bytes > 0; }
  /// The bytes moved through the page cache per set, plus 0.6 of those streamed directly: what a
  /// choice between layouts weighs. At 181x217x181 (full-size twins, this 2-core VM) it ranks
  /// every pair measured as their times did: NeXtQSM at half its peak ran faster streaming
  /// through the page cache (14.2 GB moved) than directly (22.7 GB, 10.4 of them direct: the io
  /// blocks' room sent more whole values to the file); at a quarter, directly on finer slabs
  /// (46 GB, 40 direct: 195 s) than through the page cache (48 GB: 222 s); xQSM at a half and a
  /// quarter directly (19 GB, 11 direct; 28 GB, 25 direct) than through the page cache (16 and
  /// 28 GB). Direct I/O costs the CPU almost nothing (writing 2 GB: 0.25 s of system time
  /// against 5.1 s through the page cache), but the disk time stays. Half was too generous:
  /// once NeXtQSM's masks ran inside its chains, at half its peak direct streaming moved 19.4
  /// GB a VJP (10.2 direct) against 14.7 through the page cache, and weighed at half it won and
  /// ran slower (153 s of iterations against 141 and 149). At 0.6 every pair above still ranks
  /// as measured.
  static constexpr double kDirectWeight = 0.6;
  double transfer_cost() const {
    const double moved = static_cast<double>(write_bytes + read_bytes);
    return direct_streams ? moved - (1.0 - kDirectWeight) * static_cast<double>(streamed_bytes) : moved;
  }
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
  Plan(graph::TypedGraph g, Backend backend, int threads, const graph::LeafFn* leaf = nullptr,
       bool keep_weights = false);

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
  /// staging, by direct I/O overlapped with the kernel (runtime/spill_direct_operand.h), or
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
