#include "memory/arena_pieces.h"

#include <algorithm>

namespace qsmcore {

ArenaPieces::ArenaPieces(std::size_t bytes, std::size_t piece) : piece_(piece < bytes ? piece : 0) {
  if (piece_ == 0) {
    pieces_.emplace_back(bytes, MemCategory::Arena);
    return;
  }
  // Step by what each piece takes, so `at` ends at `bytes`: stepping by whole pieces wrapped past
  // the last one in wasm32 (3 GiB + 1 GiB is 0 in a 32-bit size_t) and allocated the arena again.
  for (std::size_t at = 0; at < bytes;) {
    const std::size_t n = std::min(piece_, bytes - at);
    pieces_.emplace_back(n, MemCategory::Arena);
    at += n;
  }
}

}  // namespace qsmcore
