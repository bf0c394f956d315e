// POSIX implementation of AtomicFile: a uniquely named temporary opened with O_EXCL and held
// with flock, fsync + rename + fsync of the folder on commit, unlink on discard; temporaries no
// live writer holds removed before a new one is made.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string_view>
#include <system_error>

#include "core/sys_io.h"
#include "qsmcore/error.h"

namespace qsmcore::io {
// A named namespace: unity batches put other files' helpers beside these.
namespace atomic_file_detail {

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path) {
  throw Error(ErrorKind::Io, what + " " + path.string() + ": " + std::strerror(errno));
}

// Makes a rename durable: without this the directory entry may still point at the old file
// after a crash, even though the new file's bytes were synced.
void fsync_folder(const std::filesystem::path& file) {
  std::filesystem::path folder = file.parent_path();
  if (folder.empty()) folder = ".";
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_io("cannot open folder", folder);
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  // Some file systems cannot sync a folder (EINVAL); the rename has still happened.
  if (rc != 0 && saved != EINVAL) {
    errno = saved;
    throw_io("cannot fsync folder", folder);
  }
}

// "<pid>.<n>.<8 hex digits>": the tail the constructor gives a temporary's name.
bool temp_tail(std::string_view t) {
  auto all = [](std::string_view part, bool hex) {
    return !part.empty() && std::all_of(part.begin(), part.end(), [hex](char c) {
      const auto u = static_cast<unsigned char>(c);
      return hex ? std::isxdigit(u) != 0 : std::isdigit(u) != 0;
    });
  };
  const std::size_t d1 = t.find('.');
  const std::size_t d2 = d1 == std::string_view::npos ? d1 : t.find('.', d1 + 1);
  if (d2 == std::string_view::npos) return false;
  return all(t.substr(0, d1), false) && all(t.substr(d1 + 1, d2 - d1 - 1), false) && t.size() - d2 - 1 == 8 &&
         all(t.substr(d2 + 1), true);
}

// Removes `path` when no process holds its lock (a writer that died: the kernel released it),
// making sure the name still is the file that was locked.
bool remove_if_unheld(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  bool removed = false;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    struct stat held {};
    struct stat named {};
    if (::fstat(fd, &held) == 0 && ::lstat(path.c_str(), &named) == 0 && S_ISREG(held.st_mode) &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino)
      removed = ::unlink(path.c_str()) == 0;
  }
  ::close(fd);
  return removed;
}

// " (N bytes free there)" where the folder's free space is known.
std::string free_space_note(const std::filesystem::path& folder) {
  struct statvfs v {};
  if (::statvfs(folder.empty() ? "." : folder.c_str(), &v) != 0) return "";
  return " (" + std::to_string(static_cast<unsigned long long>(v.f_bavail) * v.f_frsize) + " bytes free there)";
}

bool disk_full(int e) {
  return e == ENOSPC || e == EDQUOT;
}

// The name a user knows a file by, for a full disk's message: a command's staged temporary
// (".NAME.qsm-PID-N-HOST.tmp.EXT", cli/staged_outputs.h) is the output NAME it stands for.
std::string shown_path(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  const std::size_t at = name.find(".qsm-");
  if (name.size() < 2 || name[0] != '.' || at == std::string::npos || at < 2 ||
      name.find(".tmp", at) == std::string::npos)
    return p.string();
  return (p.parent_path() / name.substr(1, at - 1)).string();
}

}  // namespace atomic_file_detail

int remove_stale_temporaries(const std::filesystem::path& final_path, const std::string& temp_suffix) {
  std::filesystem::path folder = final_path.parent_path();
  if (folder.empty()) folder = ".";
  const std::string prefix = final_path.filename().string() + temp_suffix + ".";
  int removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
        atomic_file_detail::temp_tail(std::string_view(name).substr(prefix.size())) &&
        atomic_file_detail::remove_if_unheld(it->path()))
      ++removed;
  }
  return removed;
}

AtomicFile::AtomicFile(std::filesystem::path final_path, std::string temp_suffix) : final_path_(std::move(final_path)) {
  // pid: unique among running processes; counter: among this process's writers; random: against
  // a temporary left by a dead process whose pid came round again. O_EXCL makes the name ours
  // or fails, and a clash is retried with the next counter value.
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint32_t salt = std::random_device{}();
  remove_stale_temporaries(final_path_, temp_suffix);
  for (int attempt = 0; fd_ < 0; ++attempt) {
    char tail[64];
    std::snprintf(tail, sizeof tail, ".%ld.%llu.%08x", static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(counter++), salt);
    temp_path_ = final_path_;
    temp_path_ += temp_suffix + tail;
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 16)) atomic_file_detail::throw_io("cannot create", temp_path_);
    if (fd_ >= 0 && !hold()) {  // another writer's clean-up took it between open and flock: again
      ::close(fd_);
      fd_ = -1;
      if (attempt >= 16) atomic_file_detail::throw_io("cannot hold", temp_path_);
    }
  }
}

// Holds the temporary's lock while this writer lives (what tells a dead writer's temporary from
// a live one's). False when the name no longer is the file opened: a clean-up that ran between
// the open and the lock removed it. A file system without locks: held as it is.
bool AtomicFile::hold() {
  if (::flock(fd_, LOCK_EX) != 0) return true;
  struct stat held {};
  struct stat named {};
  return ::fstat(fd_, &held) == 0 && ::stat(temp_path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}

AtomicFile::~AtomicFile() {
  discard();
}

void AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) throw Error(ErrorKind::Internal, "write to a closed AtomicFile " + temp_path_.string());
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = sysio::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (atomic_file_detail::disk_full(errno)) {
        const std::string why = std::strerror(errno);
        throw Error(ErrorKind::Io, "cannot write " + atomic_file_detail::shown_path(final_path_) + ": " + why + " in " +
                                       final_path_.parent_path().string() + ", with " + std::to_string(size_) +
                                       " bytes written and at least " + std::to_string(size) + " more to write" +
                                       atomic_file_detail::free_space_note(final_path_.parent_path()));
      }
      atomic_file_detail::throw_io("cannot write", temp_path_);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
    size_ += static_cast<std::uint64_t>(n);
  }
}

void AtomicFile::restart() {
  if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0)
    atomic_file_detail::throw_io("cannot truncate", temp_path_);
  size_ = 0;
}

void AtomicFile::commit() {
  if (fd_ < 0) throw Error(ErrorKind::Internal, "commit of a closed AtomicFile " + temp_path_.string());
  if (::fsync(fd_) != 0) {
    const int saved = errno;
    discard();
    if (atomic_file_detail::disk_full(saved))
      throw Error(ErrorKind::Io, "cannot write " + atomic_file_detail::shown_path(final_path_) + ": " +
                                     std::strerror(saved) + " in " + final_path_.parent_path().string() + " for its " +
                                     std::to_string(size_) + " bytes" +
                                     atomic_file_detail::free_space_note(final_path_.parent_path()));
    errno = saved;
    atomic_file_detail::throw_io("cannot fsync", temp_path_);
  }
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    const int saved = errno;
    discard();
    errno = saved;
    atomic_file_detail::throw_io("cannot rename " + temp_path_.string() + " to", final_path_);
  }
  ::close(fd_);
  fd_ = -1;
  atomic_file_detail::fsync_folder(final_path_);
}

void AtomicFile::discard() noexcept {
  if (fd_ < 0) return;
  ::unlink(temp_path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  AtomicFile file(path, ".tmp");
  file.write(bytes);
  file.commit();
}

}  // namespace qsmcore::io
