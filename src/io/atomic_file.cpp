// POSIX implementation of AtomicFile: a uniquely named temporary opened with O_EXCL, fsync +
// rename + fsync of the folder on commit, unlink on discard.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/sys_io.h"
#include "qsmcore/error.h"

namespace qsmcore::io {
namespace {

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

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path final_path, std::string temp_suffix) : final_path_(std::move(final_path)) {
  // pid: unique among running processes; counter: among this process's writers; random: against
  // a temporary left by a dead process whose pid came round again. O_EXCL makes the name ours
  // or fails, and a clash is retried with the next counter value.
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint32_t salt = std::random_device{}();
  for (int attempt = 0; fd_ < 0; ++attempt) {
    char tail[64];
    std::snprintf(tail, sizeof tail, ".%ld.%llu.%08x", static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(counter++), salt);
    temp_path_ = final_path_;
    temp_path_ += temp_suffix + tail;
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 16)) throw_io("cannot create", temp_path_);
  }
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) throw Error(ErrorKind::Internal, "write to a closed AtomicFile " + temp_path_.string());
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = sysio::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot write", temp_path_);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
    size_ += static_cast<std::uint64_t>(n);
  }
}

void AtomicFile::restart() {
  if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0) throw_io("cannot truncate", temp_path_);
  size_ = 0;
}

void AtomicFile::commit() {
  if (fd_ < 0) throw Error(ErrorKind::Internal, "commit of a closed AtomicFile " + temp_path_.string());
  if (::fsync(fd_) != 0) {
    const int saved = errno;
    discard();
    errno = saved;
    throw_io("cannot fsync", temp_path_);
  }
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    const int saved = errno;
    discard();
    errno = saved;
    throw_io("cannot rename " + temp_path_.string() + " to", final_path_);
  }
  ::close(fd_);
  fd_ = -1;
  fsync_folder(final_path_);
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
