#include "spill/file.h"

#include <fcntl.h>
#include <unistd.h>
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <linux/magic.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "core/sys_io.h"
#include "qsmcore/error.h"

namespace qsmcore::residency {
// A named namespace: unity batches put other files' helpers beside these.
namespace spill_file_detail {

std::string sys_error(int e) {
  return std::strerror(e);
}

// Fault injection (SpillFile::fail_read_after): the countdown of each kind of transfer, and
// every transfer counted, for tests that place a fault in a run.
struct Faults {
  std::atomic<std::int64_t> read_countdown{0}, write_countdown{0};
  std::atomic<int> read_errno{0}, write_errno{0};
  std::atomic<std::int64_t> reads{0}, writes{0};
};
Faults& faults() {
  static Faults f;
  return f;
}

// True (and errno set) when this transfer is the one a test asked to fail.
bool injected(std::atomic<std::int64_t>& countdown, const std::atomic<int>& err, std::atomic<std::int64_t>& count) {
  count.fetch_add(1, std::memory_order_relaxed);
  std::int64_t n = countdown.load();
  while (n > 0 && !countdown.compare_exchange_weak(n, n - 1)) {
  }
  if (n != 1) return false;
  errno = err.load();
  return true;
}

// Bytes free to an unprivileged writer in `dir`, or -1 where unknown.
std::int64_t free_bytes(const std::string& dir) {
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) == 0)
    return static_cast<std::int64_t>(v.f_bavail) * static_cast<std::int64_t>(v.f_frsize);
#else
  (void)dir;
#endif
  return -1;
}

// " (N bytes free there)" for a full disk's message.
std::string free_note(int e, const std::string& dir) {
  if (e != ENOSPC && e != EDQUOT) return "";
  const std::int64_t n = free_bytes(dir);
  return n >= 0 ? " (" + std::to_string(n) + " bytes free there)" : "";
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
void read_all(int fd, void* dst, std::uint64_t bytes, std::uint64_t offset, const std::string& dir,
              const std::string& what) {
  auto fail = [&](ssize_t n) {
    throw Error(ErrorKind::Io, "reading " + what + " back from '" + dir +
                                   "' failed: " + (n == 0 ? std::string("unexpected end of file") : sys_error(errno)));
  };
  Faults& f = faults();
  if (injected(f.read_countdown, f.read_errno, f.reads)) fail(-1);
  auto* p = static_cast<char*>(dst);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = sysio::pread(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n);
    done += static_cast<std::uint64_t>(n);
  }
}

void write_all(int fd, const void* src, std::uint64_t bytes, std::uint64_t offset, const std::string& dir,
               const std::string& what) {
  auto fail = [&] {
    const int e = errno;
    throw Error(ErrorKind::Io, "writing " + std::to_string(bytes) + " bytes of " + what + " to '" + dir +
                                   "' failed: " + sys_error(e) + free_note(e, dir));
  };
  Faults& f = faults();
  if (injected(f.write_countdown, f.write_errno, f.writes)) fail();
  const auto* p = static_cast<const char*>(src);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = sysio::pwrite(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail();
    if (n == 0) {
      errno = ENOSPC;  // a write that makes no progress: the device took nothing more
      fail();
    }
    done += static_cast<std::uint64_t>(n);
  }
}

// The file-system type of a memory-backed folder, else "" (also where it cannot be told).
std::string memory_fs_type(const std::string& dir) {
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
  struct statfs s {};
  if (::statfs(dir.c_str(), &s) != 0) return "";
  if (static_cast<std::uint64_t>(s.f_type) == TMPFS_MAGIC) return "tmpfs";
  if (static_cast<std::uint64_t>(s.f_type) == RAMFS_MAGIC) return "ramfs";
#else
  (void)dir;
#endif
  return "";
}

// The default folder's candidates in order: $TMPDIR (when set), /tmp, /var/tmp.
std::vector<std::string> default_candidates() {
  std::vector<std::string> c;
  const char* tmp = std::getenv("TMPDIR");
  if (tmp && *tmp) c.emplace_back(tmp);
  for (const char* d : {"/tmp", "/var/tmp"})
    if (std::find(c.begin(), c.end(), d) == c.end()) c.emplace_back(d);
  return c;
}

bool usable_folder(const std::string& dir) {
  return ::access(dir.c_str(), W_OK | X_OK) == 0;
}

// The first disk-backed candidate that can be written to; the reasons the ones before it were
// passed over.
std::string choose_default(std::string* why_not_first) {
  const std::vector<std::string> c = default_candidates();
  std::string passed;
  for (const std::string& d : c) {
    if (!usable_folder(d)) {
      passed += (passed.empty() ? "" : ", ") + d + " cannot be written to";
      continue;
    }
    const std::string type = memory_fs_type(d);
    if (type.empty()) {
      if (why_not_first) *why_not_first = passed;
      return d;
    }
    passed += (passed.empty() ? "" : ", ") + d + " is " + type + " (memory-backed)";
  }
  if (why_not_first) *why_not_first = passed;
  return c.front();
}

int make_temp(std::vector<char>& name) {
#if defined(__EMSCRIPTEN__)
  return ::mkstemp(name.data());
#else
  return ::mkostemp(name.data(), O_CLOEXEC);  // a child (qsm batch's tasks) must not hold its blocks
#endif
}

}  // namespace spill_file_detail

std::string SpillFile::resolve_dir(const std::string& dir) {
  if (!dir.empty()) return dir;
  return spill_file_detail::choose_default(nullptr);
}

std::string SpillFile::default_dir_note(const std::string& dir) {
  if (!dir.empty()) return "";
  std::string why;
  const std::string chosen = spill_file_detail::choose_default(&why);
  return why.empty() ? "" : why + ": spilling to " + chosen;
}

void SpillFile::fail_read_after(std::int64_t n, int err) {
  spill_file_detail::faults().read_errno = err;
  spill_file_detail::faults().read_countdown = n;
}

void SpillFile::fail_write_after(std::int64_t n, int err) {
  spill_file_detail::faults().write_errno = err;
  spill_file_detail::faults().write_countdown = n;
}

std::int64_t SpillFile::reads_so_far() {
  return spill_file_detail::faults().reads.load();
}

std::int64_t SpillFile::writes_so_far() {
  return spill_file_detail::faults().writes.load();
}

SpillFile::SpillFile(const std::string& dir, std::uint64_t bytes, const std::string& what)
    : dir_(resolve_dir(dir)), what_(what), bytes_(bytes) {
  // Memory-backed: what it holds stays in RAM, charged to the budget it was meant to relieve.
  if (const std::string type = spill_file_detail::memory_fs_type(dir_); !type.empty()) {
    std::string why;
    if (dir.empty()) spill_file_detail::choose_default(&why);
    throw Error(ErrorKind::Io, "cannot put " + std::to_string(bytes) + " bytes of " + what_ + " in '" + dir_ +
                                   "': it is " + type +
                                   " (memory-backed), so they would stay in memory and count against the budget "
                                   "they were written out to free" +
                                   (why.empty() ? "" : " (" + why + ")") +
                                   "; give --spill-dir a folder on a disk, or raise --mem-budget");
  }
  std::string pattern = dir_ + "/qsmcore-spill-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_ = spill_file_detail::make_temp(name);
  if (fd_ < 0)
    throw Error(ErrorKind::Io, "cannot create a file for " + what_ + " in '" + dir_ +
                                   "': " + spill_file_detail::sys_error(errno) +
                                   " (set --spill-dir or TMPDIR to a writable folder on a disk)");
#if defined(O_DIRECT) && !defined(__EMSCRIPTEN__)
  direct_fd_ = ::open(name.data(), O_RDWR | O_DIRECT | O_CLOEXEC);
#endif
  ::unlink(name.data());
  const int e = bytes > 0 ? ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes)) : 0;
  if (e != 0) {
    ::close(fd_);
    if (direct_fd_ >= 0) ::close(direct_fd_);
    fd_ = direct_fd_ = -1;
    throw Error(ErrorKind::Io, "cannot reserve " + std::to_string(bytes) + " bytes for " + what_ + " in '" + dir_ +
                                   "': " + spill_file_detail::sys_error(e) + spill_file_detail::free_note(e, dir_) +
                                   "; give --spill-dir a folder with " + std::to_string(bytes) + " bytes free");
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
  auto close_both = [fds] {
    for (const int fd : fds)
      if (fd >= 0) ::close(fd);
  };
  // Detached: it holds two descriptors and touches no memory of the process's. Called from
  // destructors (a run unwinding), so a thread that cannot start closes them here instead.
  try {
    std::thread(close_both).detach();
  } catch (const std::system_error&) {
    close_both();
  }
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
  spill_file_detail::read_all(direct_fd_, dst, bytes, offset, dir_, what_);
}

void SpillFile::write_direct(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  spill_file_detail::write_all(direct_fd_, src, bytes, offset, dir_, what_);
}

void SpillFile::write(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  write_behind(src, bytes, offset);
  settle(bytes, offset);
}

void SpillFile::read(void* dst, std::uint64_t bytes, std::uint64_t offset) const {
  spill_file_detail::read_all(fd_, dst, bytes, offset, dir_, what_);
  spill_file_detail::drop_cached(fd_, offset, bytes, false);
}

void SpillFile::write_behind(const void* src, std::uint64_t bytes, std::uint64_t offset) const {
  spill_file_detail::write_all(fd_, src, bytes, offset, dir_, what_);
#ifdef __linux__
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), SYNC_FILE_RANGE_WRITE);
#endif
}

void SpillFile::settle(std::uint64_t bytes, std::uint64_t offset) const {
  spill_file_detail::drop_cached(fd_, offset, bytes, true);
}

void SpillFile::read_ahead(std::uint64_t bytes, std::uint64_t offset) const {
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
}

void SpillFile::forget(std::uint64_t bytes, std::uint64_t offset) const {
  spill_file_detail::drop_cached(fd_, offset, bytes, false);
}

}  // namespace qsmcore::residency
