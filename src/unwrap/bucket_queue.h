// The region growing's priority queue (ROMEO, Dymerska et al. 2021): 256 stacks of edge ids, one
// per weight bin, popped from the lowest non-empty bin (best quality first), last in first out
// within a bin. Every edge is pushed at most once, so each bin's stack is sized by how many valid
// edges that bin holds and all stacks share one preallocated, accounted block: no reallocation,
// at most 4 bytes per valid edge. The block is not zero-filled: a stack's pages are first touched
// when it grows into them, and the queue's front rarely reaches most of them.
#pragma once
#include <array>
#include <cstdint>

#include "qsmcore/error.h"
#include "qsmcore/memory.h"

namespace qsmcore::unwrap {

template <int Bins>
class BucketQueue {
 public:
  /// `capacity[b]`: the most entries bin b will ever receive.
  explicit BucketQueue(const std::array<std::int64_t, Bins>& capacity) {
    std::int64_t total = 0;
    for (int b = 0; b < Bins; ++b) {
      start_[b] = total;
      top_[b] = total;
      total += capacity[static_cast<std::size_t>(b)];
      end_[b] = total;
    }
    store_ = Buffer(static_cast<std::size_t>(total) * sizeof(std::uint32_t), MemCategory::Other);
    ids_ = reinterpret_cast<std::uint32_t*>(store_.data());
  }

  bool empty() const { return size_ == 0; }
  std::int64_t size() const { return size_; }
  /// The lowest non-empty bin (Bins when empty).
  int min_bin() {
    while (min_ < Bins && top_[min_] == start_[min_]) ++min_;
    return min_;
  }

  void push(std::uint32_t id, int bin) {
    QSM_ASSERT(top_[bin] < end_[bin], "bucket queue: bin over its capacity");
    ids_[top_[bin]++] = id;
    ++size_;
    if (bin < min_) min_ = bin;
  }

  /// Removes and returns the newest entry of the lowest non-empty bin (the queue must not be empty).
  std::uint32_t pop() {
    const int b = min_bin();
    --size_;
    return ids_[--top_[b]];
  }

  /// Gives the storage back now.
  void release() {
    store_.reset();
    ids_ = nullptr;
  }

 private:
  std::array<std::int64_t, Bins> start_{}, top_{}, end_{};
  Buffer store_;
  std::uint32_t* ids_ = nullptr;
  std::int64_t size_ = 0;
  int min_ = Bins;
};

}  // namespace qsmcore::unwrap
