#include "memory/arena_piece.h"

#include <atomic>
#include <cstdlib>

namespace qsmcore::memory {
namespace {
#ifdef __EMSCRIPTEN__
// 2047 MiB: malloc(2047 MiB) succeeds under Node 20 with a 4 GiB maximum, 2100 MiB does not.
constexpr std::size_t kPlatformPiece = std::size_t{2047} << 20;
#else
constexpr std::size_t kPlatformPiece = 0;
#endif
std::atomic<std::size_t> g_override{0};

std::size_t round_to_offsets(std::size_t bytes) {
  return (bytes + 63) / 64 * 64;
}

// QSM_ARENA_PIECE_BYTES (a plain byte count): the piece of a process that did not set one, so a
// test can run the path of several pieces in a program it cannot call into (the wasm builds under
// Node); no effect when it is unset, empty or not a number.
std::size_t from_environment() {
  static const std::size_t bytes = [] {
    const char* text = std::getenv("QSM_ARENA_PIECE_BYTES");
    if (text == nullptr || *text == '\0') return std::size_t{0};
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    return *end == '\0' ? round_to_offsets(static_cast<std::size_t>(v)) : std::size_t{0};
  }();
  return bytes;
}
}  // namespace

std::size_t arena_piece_bytes() {
  if (const std::size_t o = g_override.load(std::memory_order_relaxed); o != 0) return o;
  if (const std::size_t e = from_environment(); e != 0) return e;
  return kPlatformPiece;
}

void set_arena_piece_bytes_for_testing(std::size_t bytes) {
  g_override.store(round_to_offsets(bytes), std::memory_order_relaxed);
}

}  // namespace qsmcore::memory
