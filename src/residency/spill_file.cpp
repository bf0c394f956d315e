#include "residency/spill_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/sys_io.h"
#include "qsmcore/error.h"

namespace qsmcore::residency {
namespace {

std::string sys_error(int e) {
  return std::strerror(e);
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

// Every byte of a positioned transfer, continuing after a short one (a signal); the direct
// descriptor and the page-cache one alike.
void read_all(int fd, void* dst, std::uint64_t bytes, std::uint64_t offset, const std::string& dir) {
  auto* p = static_cast<char*>(dst);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = sysio::pread(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(ErrorKind::Io, "reading spilled activations back from '" + dir + "' failed: " +
                                     (n == 0 ? std::string("unexpected end of file") : sys_error(errno)));
    done += static_cast<std::uint64_t>(n);
  }
}

void write_all(int fd, const void* src, std::uint64_t bytes, std::uint64_t offset, const std::string& dir) {
  const auto* p = static_cast<const char*>(src);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = sysio::pwrite(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(ErrorKind::Io, "writing spilled activations to '" + dir + "' failed: " + sys_error(errno));
    done += static_cast<std::uint64_t>(n);
  }
}

}  // namespace

std::string SpillFile::resolve_dir(const std::string& dir) {
  if (!dir.empty()) return dir;
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? std::string(tmp) : std::string("/tmp");
}

SpillFile::SpillFile(const std::string& dir, std::uint64_t bytes) : dir_(resolve_dir(dir)), bytes_(bytes) {
  std::string pattern = dir_ + "/qsmcore-spill-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0)
    throw Error(ErrorKind::Io, "cannot create an activation spill file in '" + dir_ + "': " + sys_error(errno) +
                                   " (set --spill-dir or TMPDIR to a writable directory)");
#if defined(O_DIRECT) && !defined(__EMSCRIPTEN__)
  direct_fd_ = ::open(name.data(), O_RDWR | O_DIRECT | O_CLOEXEC);
#endif
  ::unlink(name.data());
  const int e = bytes > 0 ? ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes)) : 0;
  if (e != 0) {
    ::close(fd_);
    if (direct_fd_ >= 0) ::close(direct_fd_);
    fd_ = direct_fd_ = -1;
    throw Error(ErrorKind::Io, "cannot reserve " + std::to_string(bytes) + " bytes for spilled activations in '" +
                                   dir_ + "': " + sys_error(e));
  }
  probe_direct();
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

void SpillFile::free_in_background(std::unique_ptr<SpillFile> file) {
#if defined(__EMSCRIPTEN__)
  file.reset();
#else
  if (!file) return;
  const int fds[2] = {file->fd_, file->direct_fd_};
  file->fd_ = file->direct_fd_ = -1;
  file.reset();
  // Detached: it holds two descriptors and touches no memory of the process's.
  std::thread([fds] {
    for (const int fd : fds)
      if (fd >= 0) ::close(fd);
  }).detach();
#endif
}

// Some file systems open O_DIRECT and refuse the I/O itself (EINVAL): one block is read to
// find out, and the page-cache path stays where it fails.
void SpillFile::probe_direct() {
  if (direct_fd_ < 0) return;
  void* block = std::aligned_alloc(kBlock, kBlock);
  const bool ok = block && ::pread(direct_fd_, block, kBlock, 0) >= 0;
  std::free(block);
  if (!ok) {
    ::close(direct_fd_);
    direct_fd_ = -1;
  }
}

std::size_t SpillFile::stream_io_bytes(std::size_t staging) {
#ifdef __EMSCRIPTEN__
  (void)staging;
  return 0;
#else
  return static_cast<std::size_t>((staging + kBlock - 1) / kBlock * kBlock + 2 * kBlock);
#endif
}

// Whole blocks to and from the O_DIRECT descriptor. Reading past the end of the file is an
// error: the file's regions are whole blocks.
void SpillFile::read_direct(void* dst, std::uint64_t bytes, std::uint64_t offset) const {
  read_all(direct_fd_, dst, bytes, offset, dir_);
}

void SpillFile::write_direct(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  write_all(direct_fd_, src, bytes, offset, dir_);
}

void SpillFile::write(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  write_behind(src, bytes, offset);
  settle(bytes, offset);
}

void SpillFile::read(void* dst, std::uint64_t bytes, std::uint64_t offset) const {
  read_all(fd_, dst, bytes, offset, dir_);
  drop_cached(fd_, offset, bytes, false);
}

void SpillFile::write_behind(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  write_all(fd_, src, bytes, offset, dir_);
#ifdef __linux__
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), SYNC_FILE_RANGE_WRITE);
#endif
}

void SpillFile::settle(std::uint64_t bytes, std::uint64_t offset) const {
  drop_cached(fd_, offset, bytes, true);
}

void SpillFile::read_ahead(std::uint64_t bytes, std::uint64_t offset) const {
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
}

void SpillFile::forget(std::uint64_t bytes, std::uint64_t offset) const {
  drop_cached(fd_, offset, bytes, false);
}

}  // namespace qsmcore::residency
