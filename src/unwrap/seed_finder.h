// Seeds for the region growing (ROMEO's rule, Dymerska et al. 2021): the unvisited voxel with the
// smallest sum of its three edge bins (ties: the lowest index). Instead of ROMEO's queue of every
// voxel (4+ bytes each), a tree of minima over blocks of 64 voxels (then 64 blocks, and so on up
// to a few dozen entries) is kept as lower bounds and refreshed lazily when a seed is asked for:
// about 0.03 bytes per voxel, and a query costs a few hundred steps plus the blocks it refreshes,
// so masks of thousands of separate pieces stay cheap.
#pragma once
#include <cstdint>
#include <vector>

#include "core/accounted_array.h"

namespace qsmcore::unwrap {

/// One bit per voxel: visited, or never to be visited (outside the mask, non-finite phase).
class VisitedBits {
 public:
  explicit VisitedBits(std::int64_t n) : words_(static_cast<std::size_t>((n + 63) / 64)) {}
  bool test(std::int64_t v) const { return (words_[static_cast<std::size_t>(v >> 6)] >> (v & 63)) & 1u; }
  void set(std::int64_t v) { words_[static_cast<std::size_t>(v >> 6)] |= std::uint64_t{1} << (v & 63); }
  /// The 64 bits of voxels 64·w … 64·w + 63 (to fill them word by word, in parallel).
  std::uint64_t& word(std::int64_t w) { return words_[static_cast<std::size_t>(w)]; }
  std::int64_t words() const { return static_cast<std::int64_t>(words_.size()); }

 private:
  AccountedArray<std::uint64_t> words_;
};

class SeedFinder {
 public:
  /// `bins`: 3 per voxel (romeo_weights.h); `visited` is read at every query, so voxels visited
  /// since the last one are skipped.
  SeedFinder(const std::uint8_t* bins, const VisitedBits& visited, std::int64_t n);
  /// The best unvisited voxel, or −1 when every voxel is visited.
  std::int64_t next();

 private:
  static constexpr int kShift = 6;  // 64 children per node
  static constexpr std::uint16_t kNone = 0xFFFF;
  /// Exact minimum score of block b over its unvisited voxels (kNone if none) and where.
  std::uint16_t scan_block(std::int64_t b, std::int64_t* where) const;
  /// Minimum over node i's children (level l − 1).
  std::uint16_t children_min(std::size_t l, std::int64_t i) const;

  const std::uint8_t* bins_;
  const VisitedBits& visited_;
  std::int64_t n_;
  /// levels_[0]: per block of 64 voxels; levels_[l]: per 64 nodes of level l − 1; the last has
  /// at most 64 entries. Every entry is a lower bound of the true minimum below it.
  std::vector<AccountedArray<std::uint16_t>> levels_;
};

}  // namespace qsmcore::unwrap
