#include "residency/spill_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "core/sys_io.h"
#include "qsmcore/error.h"

namespace qsmcore::residency {
namespace {

std::string sys_error(int e) {
  return std::strerror(e);
}

// Direct I/O moves whole blocks between block-aligned memory and block-aligned file offsets
// (4096 covers every logical block size). Transfers are neither: arena buffers sit on 64 bytes
// and slabs end anywhere, so they pass through a block-aligned bounce buffer, a chunk at a
// time. One per I/O thread, made once: like the thread's stack it is fixed, small and part of
// what a budget leaves to the process outside the engine, not an engine allocation.
constexpr std::uint64_t kBlock = 4096;
constexpr std::uint64_t kBounce = std::uint64_t{1} << 20;

std::uint64_t round_up(std::uint64_t n) {
  return (n + kBlock - 1) / kBlock * kBlock;
}

char* bounce() {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<char, Free> buffer(static_cast<char*>(std::aligned_alloc(kBlock, kBounce)));
  if (!buffer) throw std::bad_alloc();
  return buffer.get();
}

// Written-back pages are clean and can be dropped; dirty ones would stay charged until the
// kernel's writeback got to them, so write back first.
void drop_cached(int fd, std::uint64_t offset, std::uint64_t bytes, bool written) {
#ifdef __linux__
  if (written)
    ::sync_file_range(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes),
                      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
#else
  (void)written;
#endif
  ::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
}

}  // namespace

std::string SpillFile::resolve_dir(const std::string& dir) {
  if (!dir.empty()) return dir;
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? std::string(tmp) : std::string("/tmp");
}

SpillFile::SpillFile(const std::string& dir, std::uint64_t bytes, bool direct) : dir_(resolve_dir(dir)) {
  std::string pattern = dir_ + "/qsmcore-spill-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0)
    throw Error(ErrorKind::Io, "cannot create an activation spill file in '" + dir_ + "': " + sys_error(errno) +
                                   " (set --spill-dir or TMPDIR to a writable directory)");
  ::unlink(name.data());
  // Whole blocks, so a direct transfer's last block lies inside the file.
  const int e = bytes > 0 ? ::posix_fallocate(fd_, 0, static_cast<off_t>(round_up(bytes))) : 0;
  if (e != 0) {
    ::close(fd_);
    fd_ = -1;
    throw Error(ErrorKind::Io, "cannot reserve " + std::to_string(bytes) + " bytes for spilled activations in '" +
                                   dir_ + "': " + sys_error(e));
  }
  direct_ = direct && try_direct(bytes);
}

bool SpillFile::try_direct(std::uint64_t bytes) {
#if defined(__linux__) && !defined(__EMSCRIPTEN__) && defined(O_DIRECT)
  if (bytes == 0) return false;
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags | O_DIRECT) != 0) return false;
  // A file system may take the flag and refuse the I/O: one block written and read back decides.
  char* b = bounce();
  std::memset(b, 0, kBlock);
  const auto block = static_cast<ssize_t>(kBlock);
  if (::pwrite(fd_, b, kBlock, 0) == block && ::pread(fd_, b, kBlock, 0) == block) return true;
  ::fcntl(fd_, F_SETFL, flags);
  return false;
#else
  (void)bytes;
  return false;
#endif
}

void SpillFile::read_all(void* dst, std::uint64_t bytes, std::uint64_t offset) const {
  auto* p = static_cast<char*>(dst);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = sysio::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(ErrorKind::Io, "reading spilled activations back from '" + dir_ + "' failed: " +
                                     (n == 0 ? std::string("unexpected end of file") : sys_error(errno)));
    done += static_cast<std::uint64_t>(n);
  }
}

void SpillFile::write_all(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  const auto* p = static_cast<const char*>(src);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = sysio::pwrite(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(ErrorKind::Io, "writing spilled activations to '" + dir_ + "' failed: " + sys_error(errno));
    done += static_cast<std::uint64_t>(n);
  }
}

// Each chunk: the blocks that cover the next part of the range (at most the bounce buffer's
// worth), read whole, the part copied out.
void SpillFile::direct_read(void* dst, std::uint64_t bytes, std::uint64_t offset) const {
  char* b = bounce();
  auto* out = static_cast<char*>(dst);
  const std::uint64_t end = offset + bytes;
  for (std::uint64_t at = offset; at < end;) {
    const std::uint64_t a0 = at / kBlock * kBlock;
    const std::uint64_t a1 = std::min(round_up(end), a0 + kBounce);
    read_all(b, a1 - a0, a0);
    const std::uint64_t to = std::min(end, a1);
    std::memcpy(out + (at - offset), b + (at - a0), to - at);
    at = to;
  }
}

// Each chunk: a block only partly covered by the range keeps the bytes around it, read first
// (the file's regions start on blocks, so those bytes are the same buffer's, written by this
// same writer: a buffer's transfers do not run concurrently); then the blocks are written whole.
void SpillFile::direct_write(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  char* b = bounce();
  const auto* in = static_cast<const char*>(src);
  const std::uint64_t end = offset + bytes;
  for (std::uint64_t at = offset; at < end;) {
    const std::uint64_t a0 = at / kBlock * kBlock;
    const std::uint64_t a1 = std::min(round_up(end), a0 + kBounce);
    const std::uint64_t to = std::min(end, a1);
    if (at > a0) read_all(b, kBlock, a0);
    if (to < a1) read_all(b + (a1 - kBlock - a0), kBlock, a1 - kBlock);
    std::memcpy(b + (at - a0), in + (at - offset), to - at);
    write_all(b, a1 - a0, a0);
    at = to;
  }
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
}

void SpillFile::write(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  if (direct_) return direct_write(src, bytes, offset);
  write_behind(src, bytes, offset);
  settle(bytes, offset);
}

void SpillFile::read(void* dst, std::uint64_t bytes, std::uint64_t offset) const {
  if (direct_) return direct_read(dst, bytes, offset);
  read_all(dst, bytes, offset);
  drop_cached(fd_, offset, bytes, false);
}

// Direct: written through at once (no page cache to overlap through).
void SpillFile::write_behind(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  if (direct_) return direct_write(src, bytes, offset);
  write_all(src, bytes, offset);
#ifdef __linux__
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), SYNC_FILE_RANGE_WRITE);
#endif
}

void SpillFile::settle(std::uint64_t bytes, std::uint64_t offset) const {
  if (!direct_) drop_cached(fd_, offset, bytes, true);
}

void SpillFile::read_ahead(std::uint64_t bytes, std::uint64_t offset) const {
  if (!direct_) ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
}

void SpillFile::forget(std::uint64_t bytes, std::uint64_t offset) const {
  if (!direct_) drop_cached(fd_, offset, bytes, false);
}

}  // namespace qsmcore::residency
