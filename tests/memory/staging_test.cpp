// Staging blocks (memory/staging.h): inside a scope, accounted allocations are carved from the
// block in order and not counted again; the room comes back when the block is empty; what does
// not fit goes to the heap; a copy that outlives the block keeps it until freed; other threads
// and a null scope are not staged.
#include "memory/staging.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "qsmcore/memory.h"

namespace {

using qsmcore::accounted_alloc;
using qsmcore::accounted_free;
using qsmcore::MemCategory;
using qsmcore::memory_current;
using qsmcore::memory::StagingBlock;
using qsmcore::memory::StagingScope;

constexpr std::size_t kBlock = 1 << 20;

TEST(StagingBlock, CopiesAreCarvedInOrderAndCountedOnceWithTheBlock) {
  const std::int64_t before = memory_current();
  const int alive = qsmcore::memory::staging_blocks_alive();
  {
    StagingBlock block(kBlock);
    EXPECT_EQ(memory_current() - before, static_cast<std::int64_t>(kBlock)) << "the block is accounted";
    EXPECT_EQ(qsmcore::memory::staging_blocks_alive(), alive + 1);
    const StagingScope scope(&block);
    void* a = accounted_alloc(1000, MemCategory::Weights);  // rounded to 1024
    void* b = accounted_alloc(4096, MemCategory::Weights);
    EXPECT_TRUE(block.contains(a));
    EXPECT_TRUE(block.contains(b));
    EXPECT_EQ(static_cast<std::byte*>(b) - static_cast<std::byte*>(a), 1024);
    EXPECT_EQ(block.used(), 1024u + 4096u);
    EXPECT_EQ(memory_current() - before, static_cast<std::int64_t>(kBlock)) << "staged copies are not counted again";
    accounted_free(a, 1000, MemCategory::Weights);
    EXPECT_EQ(block.used(), 1024u + 4096u) << "room comes back only when the block is empty";
    accounted_free(b, 4096, MemCategory::Weights);
    EXPECT_EQ(block.used(), 0u);
    void* c = accounted_alloc(64, MemCategory::Weights);
    EXPECT_EQ(c, a) << "an empty block starts again at its base";
    accounted_free(c, 64, MemCategory::Weights);
  }
  EXPECT_EQ(memory_current(), before) << "the block is freed with its owner";
  EXPECT_EQ(qsmcore::memory::staging_blocks_alive(), alive);
}

TEST(StagingBlock, WhatDoesNotFitGoesToTheHeapAndIsCounted) {
  StagingBlock block(4096);
  const std::int64_t before = memory_current();
  const auto overflowed = qsmcore::memory::staging_counters().overflowed;
  const StagingScope scope(&block);
  void* big = accounted_alloc(8192, MemCategory::Weights);
  EXPECT_FALSE(block.contains(big));
  EXPECT_EQ(memory_current() - before, 8192);
  EXPECT_EQ(qsmcore::memory::staging_counters().overflowed, overflowed + 1);
  accounted_free(big, 8192, MemCategory::Weights);
  EXPECT_EQ(memory_current(), before);
}

TEST(StagingBlock, ACopyThatOutlivesItsBlockKeepsItUntilFreed) {
  const std::int64_t before = memory_current();
  const int alive = qsmcore::memory::staging_blocks_alive();
  void* kept = nullptr;
  {
    StagingBlock block(kBlock);
    const StagingScope scope(&block);
    kept = accounted_alloc(512, MemCategory::Weights);
    ASSERT_TRUE(block.contains(kept));
  }
  EXPECT_EQ(qsmcore::memory::staging_blocks_alive(), alive + 1);
  EXPECT_EQ(memory_current() - before, static_cast<std::int64_t>(kBlock));
  static_cast<volatile std::byte*>(kept)[511] = std::byte{1};  // still valid memory
  accounted_free(kept, 512, MemCategory::Weights);
  EXPECT_EQ(qsmcore::memory::staging_blocks_alive(), alive);
  EXPECT_EQ(memory_current(), before);
}

TEST(StagingBlock, OnlyThisThreadInsideAScopeIsStaged) {
  StagingBlock block(kBlock);
  const StagingScope scope(&block);
  void* other = nullptr;
  std::thread([&] { other = accounted_alloc(256, MemCategory::Weights); }).join();
  EXPECT_FALSE(block.contains(other));
  accounted_free(other, 256, MemCategory::Weights);  // freed here, on another thread than it was made
  {
    const StagingScope none(nullptr);
    void* heap = accounted_alloc(256, MemCategory::Weights);
    EXPECT_FALSE(block.contains(heap));
    accounted_free(heap, 256, MemCategory::Weights);
  }
  void* staged = accounted_alloc(256, MemCategory::Weights);
  EXPECT_TRUE(block.contains(staged)) << "the outer scope is back after the inner one";
  std::thread([&] { accounted_free(staged, 256, MemCategory::Weights); }).join();
  EXPECT_EQ(block.used(), 0u) << "a staged copy freed on another thread goes back to its block";
}

}  // namespace
