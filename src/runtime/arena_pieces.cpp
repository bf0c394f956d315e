#include "runtime/arena_pieces.h"

#include <algorithm>

namespace qsmcore {

ArenaPieces::ArenaPieces(std::size_t bytes, std::size_t piece) : piece_(piece < bytes ? piece : 0) {
  if (piece_ == 0) {
    pieces_.emplace_back(bytes, MemCategory::Arena);
    return;
  }
  for (std::size_t at = 0; at < bytes; at += piece_)
    pieces_.emplace_back(std::min(piece_, bytes - at), MemCategory::Arena);
}

}  // namespace qsmcore
