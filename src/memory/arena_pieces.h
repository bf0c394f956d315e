// One run's arena: a single accounted allocation, or, where one allocation is bounded (wasm32:
// below 2 GiB), several of ArenaLayout::piece_bytes each. The layout places no value across two
// pieces, so an offset names bytes in exactly one of them.
#pragma once
#include <cstddef>
#include <vector>

#include "qsmcore/memory.h"

namespace qsmcore {

class ArenaPieces {
 public:
  ArenaPieces() = default;
  /// Allocates `bytes` as pieces of `piece` bytes (0: one piece).
  ArenaPieces(std::size_t bytes, std::size_t piece);
  /// The address of arena offset `offset`.
  std::byte* at(std::size_t offset) const {
    if (piece_ == 0) return pieces_.front().data() + offset;
    return pieces_[offset / piece_].data() + offset % piece_;
  }

 private:
  std::size_t piece_ = 0;
  std::vector<Buffer> pieces_;
};

}  // namespace qsmcore
