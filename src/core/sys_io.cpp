#include "core/sys_io.h"

#include <unistd.h>

#ifdef __EMSCRIPTEN__
#include <cstdint>
#include <cstring>
#include <mutex>
#endif

namespace qsmcore::sysio {

#ifdef __EMSCRIPTEN__
namespace {
constexpr std::size_t kBounce = std::size_t{1} << 20;
alignas(64) std::byte g_bounce[kBounce];  // static storage: below 2 GiB, whatever the heap's size
std::mutex g_bounce_mu;

// Whether [data, data + bytes) reaches 2 GiB, where NODERAWFS would misread the offset.
bool reaches_2gib(const void* data, std::size_t bytes) {
  const auto at = reinterpret_cast<std::uintptr_t>(data);
  return at + bytes > (std::uintptr_t{1} << 31);
}
}  // namespace

ssize_t write(int fd, const void* data, std::size_t bytes) {
  if (!reaches_2gib(data, bytes)) return ::write(fd, data, bytes);
  const std::lock_guard<std::mutex> lock(g_bounce_mu);
  const std::size_t n = bytes < kBounce ? bytes : kBounce;
  std::memcpy(g_bounce, data, n);
  return ::write(fd, g_bounce, n);
}

ssize_t pwrite(int fd, const void* data, std::size_t bytes, off_t offset) {
  if (!reaches_2gib(data, bytes)) return ::pwrite(fd, data, bytes, offset);
  const std::lock_guard<std::mutex> lock(g_bounce_mu);
  const std::size_t n = bytes < kBounce ? bytes : kBounce;
  std::memcpy(g_bounce, data, n);
  return ::pwrite(fd, g_bounce, n, offset);
}

ssize_t pread(int fd, void* data, std::size_t bytes, off_t offset) {
  if (!reaches_2gib(data, bytes)) return ::pread(fd, data, bytes, offset);
  const std::lock_guard<std::mutex> lock(g_bounce_mu);
  const ssize_t got = ::pread(fd, g_bounce, bytes < kBounce ? bytes : kBounce, offset);
  if (got > 0) std::memcpy(data, g_bounce, static_cast<std::size_t>(got));
  return got;
}
#else
ssize_t write(int fd, const void* data, std::size_t bytes) {
  return ::write(fd, data, bytes);
}
ssize_t pwrite(int fd, const void* data, std::size_t bytes, off_t offset) {
  return ::pwrite(fd, data, bytes, offset);
}
ssize_t pread(int fd, void* data, std::size_t bytes, off_t offset) {
  return ::pread(fd, data, bytes, offset);
}
#endif

}  // namespace qsmcore::sysio
