#include "memory/arena_piece.h"

#include <atomic>

namespace qsmcore::memory {
namespace {
#ifdef __EMSCRIPTEN__
// 2047 MiB: malloc(2047 MiB) succeeds under Node 20 with a 4 GiB maximum, 2100 MiB does not.
constexpr std::size_t kPlatformPiece = std::size_t{2047} << 20;
#else
constexpr std::size_t kPlatformPiece = 0;
#endif
std::atomic<std::size_t> g_override{0};
}  // namespace

std::size_t arena_piece_bytes() {
  const std::size_t o = g_override.load(std::memory_order_relaxed);
  return o != 0 ? o : kPlatformPiece;
}

void set_arena_piece_bytes_for_testing(std::size_t bytes) {
  g_override.store((bytes + 63) / 64 * 64, std::memory_order_relaxed);
}

}  // namespace qsmcore::memory
