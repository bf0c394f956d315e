// Assigns arena offsets to buffers with known lifetimes (measure only; nothing is allocated).
// Two buffers may share bytes iff their [first, last] step intervals do not overlap.
#pragma once
#include <cstddef>
#include <vector>

namespace qsmcore::memory {

struct Lifetime {
  std::size_t bytes = 0;
  int first = 0;  // step that writes it first
  int last = 0;   // step that reads it last (inclusive)
};

struct OffsetPlan {
  std::vector<std::size_t> offsets;  // one per Lifetime, 64-byte aligned
  std::size_t total = 0;             // arena size
};

/// Greedy best-fit under several orders (largest first, largest size × lifetime, longest
/// lifetime, first use): each buffer at the lowest-waste gap among the buffers already placed
/// that overlap it in time; the smallest arena wins. Deterministic.
/// piece > 0: no buffer of at most `piece` bytes straddles a multiple of `piece`, so the arena
/// can be allocated as pieces of that size (memory/arena_piece.h); a larger buffer
/// starts on a multiple and straddles (callers refuse those before planning).
OffsetPlan plan_offsets(const std::vector<Lifetime>& lifetimes, std::size_t piece = 0);

}  // namespace qsmcore::memory
