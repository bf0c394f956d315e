// Staging blocks (staging.h): a bump allocator per block, and a registry of live blocks so that a
// staged copy can be freed on any thread, after the scope that staged it.
#include "memory/staging.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "qsmcore/memory.h"

namespace qsmcore::memory {

struct StagingBlock::State {
  std::byte* base = nullptr;
  std::size_t capacity = 0;
  std::size_t top = 0;   // bump offset
  std::size_t live = 0;  // copies staged and not yet freed
  bool owned = true;     // false once the StagingBlock went: freed with its last copy
};

namespace {

thread_local StagingBlock::State* t_current = nullptr;

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<StagingBlock::State>> blocks;
  std::atomic<int> count{0};  // blocks.size(), read without the lock on every free
  StagingCounters counters;   // under mu
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: buffers may be freed during static destruction
  return *r;
}

// With the registry locked: a block whose owner went and whose last copy was freed leaves it, and
// its memory is returned for the caller to free once the lock is released (accounted_free asks
// the registry whether a pointer is staged).
std::byte* retire_if_done(Registry& r, const std::shared_ptr<StagingBlock::State>& s) {
  if (s->owned || s->live > 0) return nullptr;
  r.blocks.erase(std::find(r.blocks.begin(), r.blocks.end(), s));
  r.count.store(static_cast<int>(r.blocks.size()), std::memory_order_release);
  return s->base;
}

}  // namespace

StagingBlock::StagingBlock(std::size_t capacity) : state_(std::make_shared<State>()) {
  state_->base = static_cast<std::byte*>(detail::staging_block_alloc(capacity));
  state_->capacity = capacity;
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  r.blocks.push_back(state_);
  ++r.counters.blocks;
  r.count.store(static_cast<int>(r.blocks.size()), std::memory_order_release);
}

StagingBlock::~StagingBlock() {
  Registry& r = registry();
  std::byte* done = nullptr;
  {
    const std::lock_guard<std::mutex> lock(r.mu);
    state_->owned = false;
    done = retire_if_done(r, state_);
  }
  if (done != nullptr) detail::staging_block_free(done, state_->capacity);
}

bool StagingBlock::contains(const void* p) const {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= state_->base && b < state_->base + state_->capacity;
}

std::size_t StagingBlock::capacity() const {
  return state_->capacity;
}

std::size_t StagingBlock::used() const {
  const std::lock_guard<std::mutex> lock(registry().mu);
  return state_->top;
}

StagingScope::StagingScope(StagingBlock* block) : previous_(t_current) {
  t_current = block ? block->state_.get() : nullptr;
}
StagingScope::~StagingScope() {
  t_current = previous_;
}

namespace {
#ifdef __EMSCRIPTEN__
std::atomic<bool> g_stage_builds{true};
#else
std::atomic<bool> g_stage_builds{false};
#endif
}  // namespace

bool stage_plan_builds() {
  return g_stage_builds.load(std::memory_order_relaxed);
}
void set_stage_plan_builds_for_testing(bool on) {
  g_stage_builds.store(on);
}
int staging_blocks_alive() {
  return registry().count.load(std::memory_order_acquire);
}

StagingCounters staging_counters() {
  const std::lock_guard<std::mutex> lock(registry().mu);
  return registry().counters;
}

namespace detail {

void* staged_alloc(std::size_t rounded) {
  StagingBlock::State* s = t_current;
  if (s == nullptr || rounded == 0) return nullptr;
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  if (s->capacity - s->top < rounded) {
    ++r.counters.overflowed;
    return nullptr;
  }
  void* p = s->base + s->top;
  s->top += rounded;
  ++s->live;
  ++r.counters.staged;
  return p;
}

bool staged_free(void* p) noexcept {
  Registry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0) return false;
  std::shared_ptr<StagingBlock::State> block;
  std::byte* done = nullptr;
  {
    const std::lock_guard<std::mutex> lock(r.mu);
    const auto* b = static_cast<const std::byte*>(p);
    for (const auto& s : r.blocks) {
      if (b < s->base || b >= s->base + s->capacity) continue;
      block = s;
      break;
    }
    if (!block) return false;
    // Room comes back when the block is empty: a layer's copies all go before the next layer's.
    if (--block->live == 0) block->top = 0;
    done = retire_if_done(r, block);
  }
  if (done != nullptr) detail::staging_block_free(done, block->capacity);
  return true;
}

}  // namespace detail

}  // namespace qsmcore::memory
