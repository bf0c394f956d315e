// A staging block for a plan build's short-lived weight copies (wasm32's heap placement).
//
// Building a plan reads each layer's raw weights, folds them (BatchNorm), hands them to the
// kernel, which packs them into its own block, and frees the raw and folded copies. wasm32's heap
// never shrinks and dlmalloc places each block in the best-fitting hole, so those freed copies
// leave holes between the packed blocks, and where the top of the packed weights ends up depends
// on the order and sizes of the layers' packings, which differ between shapes (Winograd tile,
// conv chains): SUSEP-Net's weights ended between 238 and 258 MiB of heap at the same accounted
// bytes, and the arena goes above them, so no line per voxel predicted its heap within 5 %
// (issue #15, docs/wasm.md). A staging block reserved before the build takes the copies instead:
// packed weights then lie next to each other, and the heap's top after a build no longer depends
// on the shape. A bump allocator, not a general one: a build's copies are freed layer by layer.
//
// The block itself is one accounted allocation (MemCategory::Weights); what is staged inside it is
// not counted again. A copy that must outlive the build is copied out (plan.cpp); one that still
// lives when the block's owner goes keeps the block alive until it is freed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace qsmcore::memory {

class StagingBlock {
 public:
  /// Reserves `capacity` bytes (accounted). Throws Error{OutOfBudget} as accounted_alloc does.
  explicit StagingBlock(std::size_t capacity);
  ~StagingBlock();
  StagingBlock(const StagingBlock&) = delete;
  StagingBlock& operator=(const StagingBlock&) = delete;

  /// Whether `p` points into the block.
  bool contains(const void* p) const;
  std::size_t capacity() const;
  /// Bytes staged now, counting the alignment of each copy (tests).
  std::size_t used() const;

  struct State;

 private:
  friend class StagingScope;
  std::shared_ptr<State> state_;
};

/// While alive, accounted allocations made on this thread go into `block` where they fit (else
/// to the heap as usual). Scopes nest: the innermost wins; a null block stops staging.
class StagingScope {
 public:
  explicit StagingScope(StagingBlock* block);
  ~StagingScope();
  StagingScope(const StagingScope&) = delete;
  StagingScope& operator=(const StagingScope&) = delete;

 private:
  StagingBlock::State* previous_;
};

/// Whether plan builds stage their weight copies: by default in wasm32 only (see above). Natively,
/// blocks this large are mapped and unmapped on their own (accounting.cpp): no hole to avoid.
bool stage_plan_builds();
/// Tests: turn staging on or off for plans built after this call (natively too).
void set_stage_plan_builds_for_testing(bool on);
/// Staging blocks reserved now, including those kept alive by a copy that outlived its build.
int staging_blocks_alive();

/// Since the process started: blocks reserved, allocations staged, and those made in a scope that
/// did not fit its block (they went to the heap).
struct StagingCounters {
  std::int64_t blocks = 0;
  std::int64_t staged = 0;
  std::int64_t overflowed = 0;
};
StagingCounters staging_counters();

namespace detail {
/// accounting.cpp: room for `rounded` bytes in this thread's staging block, or null.
void* staged_alloc(std::size_t rounded);
/// accounting.cpp: true when `p` was staged (it is then given back to its block).
bool staged_free(void* p) noexcept;
/// accounting.cpp: a staging block's own memory, counted (MemCategory::Weights) but never taken
/// from or left to wasm32's kept blocks (accounting.cpp says why).
void* staging_block_alloc(std::size_t bytes);
void staging_block_free(void* p, std::size_t bytes) noexcept;
}  // namespace detail

}  // namespace qsmcore::memory
