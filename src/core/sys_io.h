// Reads and writes between a file descriptor and memory: natively the system calls themselves.
// In wasm32 under Node (NODERAWFS), emscripten 3.1.6 hands a buffer's heap offset to Node's
// fs.writeSync / fs.readSync as a signed 32-bit number, so a buffer at or above 2 GiB is written
// or read at the wrong place or not at all while the call reports success (a 42 MB output that
// lay above 2 GiB came out as its 128-byte header). There these calls move such buffers through a
// bounce buffer in static storage, which lies at the bottom of the heap. Short counts as the
// system calls return them: callers loop.
#pragma once
#include <sys/types.h>

#include <cstddef>

namespace qsmcore::sysio {

ssize_t write(int fd, const void* data, std::size_t bytes);
ssize_t pwrite(int fd, const void* data, std::size_t bytes, off_t offset);
ssize_t pread(int fd, void* data, std::size_t bytes, off_t offset);

}  // namespace qsmcore::sysio
