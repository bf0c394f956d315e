// Pieces every SIMD128 kernel shares: packed constants in accounted memory, the fused post-op
// epilogue on f32x4 vectors, and a job runner that hands each worker its own scratch slice.
#pragma once
#include <wasm_simd128.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/parallel.h"
#include "graph/typed_graph.h"
#include "kernels/kernel.h"
#include "qsmcore/memory.h"

namespace qsmcore::kernels::wasm {

const graph::TValue& value_of(const graph::TypedGraph& g, int v);
/// Every present input and output is f32.
bool all_f32(const graph::TypedGraph& g, const graph::TNode& n);
/// Every element is finite. Kernels that read zero-padded copies multiply pad zeros by weights,
/// which the reference skips: 0·inf would be a NaN the reference does not produce.
bool all_finite(const float* p, std::int64_t n);

/// Constants a kernel packed at construction, in accounted buffers (MemCategory::Weights, as
/// oneDNN's packed weights): one per allocate() call. A kernel packs its weights into a block of
/// exactly the plain weight's size and its bias into another: the plain tensor it packs from (or
/// the leaf a BN fold read) is freed just before or after, and wasm32's kept blocks
/// (core/accounting.cpp) hand a freed block only to a request of its exact size. With the bias in
/// the weights' block, that block was a few bytes larger than the plain weight, never took its
/// freed block and went above it: each 16 MB slice of QSMnet's full twin left a hole of its size,
/// 110 MB in all, that the accounting never saw (issue #54). When the active PackCache is dry (a
/// plan built only for its figures) nothing is allocated: the bytes are counted and the kernel
/// must never run.
class PackedConstants {
 public:
  /// Zeroed room for `floats` floats in a block of its own; nullptr when dry.
  float* allocate(std::size_t floats);
  std::int64_t bytes() const { return bytes_; }
  /// A kernel's pointer into the packed floats, which relocate() moves with them.
  void track(const float** slot) { slots_.push_back(slot); }
  /// Kernel::relocate_packed: copies each block into a fresh one if that lies lower in the heap
  /// (dlmalloc's best fit: the lowest hole it fits in), and frees the old one.
  void relocate();

 private:
  void relocate(Buffer& part);
  std::vector<Buffer> parts_;
  std::int64_t bytes_ = 0;
  std::vector<const float**> slots_;
};

/// The node's fused post-ops applied to output vectors: a Sum adds the addend (read before the
/// output is written, so the output may alias it), the other activations follow the reference's
/// scalar definitions exactly, NaN included (kernels/post_ops.cpp).
class PostChain {
 public:
  explicit PostChain(const std::vector<PostOp>& post);
  /// Index of the Sum addend among the step's inputs, or -1.
  int sum_input() const { return sum_input_; }
  /// v[0..V) (V ≤ 8) hold 4V consecutive outputs starting at `dst`, n ≤ 4V of them valid:
  /// applies the chain (addend at `add`, null without a Sum) and stores the n.
  template <int V>
  void finish(v128_t* v, const float* add, float* dst, int n) const {
    if (!post_.empty()) apply(v, V, add, n);
    if (n == 4 * V) {
      for (int i = 0; i < V; ++i) wasm_v128_store(dst + 4 * i, v[i]);
    } else {
      store_partial(v, V, dst, n);
    }
  }

 private:
  void apply(v128_t* v, int nv, const float* add, int n) const;
  static void store_partial(const v128_t* v, int nv, float* dst, int n);
  std::vector<PostOp> post_;
  int sum_input_ = -1;
};

/// How many workers a step's scratch, its job count and the thread count allow.
int worker_count(std::int64_t jobs, std::size_t scratch_per_worker, const ExecContext& ctx);

/// Runs f(job, scratch) for every job in [0, jobs): workers take the next run of jobs as they
/// come free, worker t with the t-th slice of the step's scratch. Not fixed halves: a pool thread
/// wakes tens of microseconds after the caller starts (longer in a browser), and a conv chain's
/// slab is a few jobs, so the caller waited for the late half of every slab (IR2QSM at 64³ on 2
/// threads in Chromium: 4.4 s in halves, 3.3 s in runs; Node took 3.0 either way). Each job is
/// run once, by one worker, so results do not depend on the thread count or on who ran what, as
/// long as a job's result does not depend on its worker.
template <class F>
void run_jobs(std::int64_t jobs, std::size_t scratch_per_worker, const ExecContext& ctx, F&& f) {
  const int workers = worker_count(jobs, scratch_per_worker, ctx);
  if (workers <= 1) {
    for (std::int64_t j = 0; j < jobs; ++j) f(j, ctx.scratch);
    return;
  }
  // Runs of consecutive jobs, each a share of what is left: consecutive output planes share
  // input planes in cache, which single jobs handed out in turn lost (the 32→32 conv at 64³:
  // 0.116 s in halves, 0.133 s a job at a time, 2 threads), and the runs shrink towards the end
  // so that the workers finish together. Fixed runs (an eighth of the jobs) left one worker idle
  // for half a run, on average, at the end of every slab of a conv chain; with shrinking runs
  // IR2QSM's chains at 64³ kept both workers busy 99 % of the time (Node: 4.34 s of work in 2.20 s).
  std::atomic<std::int64_t> next{0};
  parallel_for(workers, true, [&](std::int64_t t) {
    std::byte* scratch = ctx.scratch + static_cast<std::size_t>(t) * scratch_per_worker;
    std::int64_t lo = next.load(std::memory_order_relaxed);
    while (lo < jobs) {
      const std::int64_t run = std::max<std::int64_t>(1, (jobs - lo) / (2 * workers));
      if (!next.compare_exchange_weak(lo, lo + run, std::memory_order_relaxed)) continue;
      for (std::int64_t j = lo; j < lo + run; ++j) f(j, scratch);
      lo = next.load(std::memory_order_relaxed);
    }
  });
}

/// Register blocks of output channels per job group, for `blocks` blocks of `block_bytes` packed
/// weights each and `planes` (batch, depth) output planes: enough groups that every thread gets
/// jobs, few enough blocks per group that its weights stay in L2 while a segment streams them.
int blocks_per_group(int blocks, std::int64_t block_bytes, std::int64_t planes);

/// How many segments of outputs to copy input pieces for at once, given the floats one
/// segment's copies take and the segments in a row: as many as fit a budget that stays in L2.
int segments_per_copy(std::int64_t floats_per_segment, int segments_in_row);

/// Scratch bytes for one worker per thread this plan was built for, rounded to 64 B per worker.
std::size_t scratch_for_workers(std::size_t per_worker);
inline std::size_t round64(std::size_t b) {
  return (b + 63) / 64 * 64;
}

/// What the SIMD128 conv-like kernels share (Base: Kernel or PlaneKernel): weights and bias
/// (inputs 1 and 2) packed at construction, the node's fused post-ops, one scratch slice of
/// worker_bytes() per worker, and an output that may take the Sum addend's buffer (each output is
/// read from it just before it is written), but not when the addend is the input too: jobs read
/// every plane of the input.
template <class Base>
class PackedKernel : public Base {
 public:
  explicit PackedKernel(const graph::TNode& n) : post_(n.post) {
    const int sum = post_.sum_input();
    if (sum >= 0 && n.in[static_cast<std::size_t>(sum)] != n.in[0]) inplace_ = sum;
  }
  std::size_t scratch_bytes() const override { return scratch_for_workers(worker_bytes()); }
  std::int64_t packed_bytes() const override { return packed_.bytes(); }
  void relocate_packed() override { packed_.relocate(); }
  int inplace_input() const override { return inplace_; }
  bool reads_input(std::size_t i) const override { return i != 1 && i != 2; }

 protected:
  virtual std::size_t worker_bytes() const = 0;
  PostChain post_;
  PackedConstants packed_;
  int inplace_ = -1;
};

}  // namespace qsmcore::kernels::wasm
