// The largest block the platform's allocator grants in one piece, which bounds one piece of a
// plan's arena. Natively there is no such bound. In wasm32, dlmalloc grows the heap with sbrk,
// whose increment is a signed 32-bit number: a malloc above 2 GiB returns NULL even in a fresh
// 4 GiB heap (docs/wasm.md), so an arena above 2 GiB is planned as pieces of at most this size
// and no value straddles two pieces. Plans read it when they are made.
#pragma once
#include <cstddef>

namespace qsmcore::memory {

/// Bytes of one arena piece; 0: one piece of any size. QSM_ARENA_PIECE_BYTES overrides the
/// platform's value (tests of programs they cannot call into: the wasm builds).
std::size_t arena_piece_bytes();

/// Tests: plans made after this call split their arenas every `bytes` (0: the platform's value),
/// so the path of several pieces runs natively. Rounded up to the 64-byte alignment of offsets.
void set_arena_piece_bytes_for_testing(std::size_t bytes);

}  // namespace qsmcore::memory
