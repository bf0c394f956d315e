// Writing a file atomically: readers (and a crash) see either no file / the old file, or the
// whole new one, never a prefix. Bytes go to a temporary beside the final name whose name no
// other writer can share ("<final><suffix>.<pid>.<n>.<random>", created with O_EXCL), which is
// fsynced, renamed over the final name, and the folder fsynced so the rename itself survives a
// power cut. Two processes writing the same target each fill their own temporary; the last
// rename wins and the target always holds one writer's whole file. A temporary that is not
// committed is removed, so none outlives a failure.
//
// A process killed while writing (SIGKILL, the OOM killer, a node lost) cannot remove its
// temporary: the writer holds an flock on it for as long as it lives, and the next writer of
// the same target removes every temporary of that target no one holds (issue #51). flock is
// per open file and released by the kernel when the holder dies, on NFS too (Linux emulates it
// with POSIX locks there), so a temporary another host is still writing is never taken.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace qsmcore::io {

class AtomicFile {
 public:
  /// Creates a new, uniquely named temporary (never an existing file: O_CREAT | O_EXCL), after
  /// removing the temporaries of `final_path` that dead writers left. The parent folder must
  /// exist. A write that fails for a full disk (ENOSPC, EDQUOT) says so, naming the folder and
  /// the bytes still to write.
  explicit AtomicFile(std::filesystem::path final_path, std::string temp_suffix = ".part");
  ~AtomicFile();  // discards unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t size);
  void write(std::span<const std::byte> bytes) { write(bytes.data(), bytes.size()); }
  /// Empties the temporary (a retried download starts again from byte 0).
  void restart();
  std::uint64_t size() const { return size_; }
  /// fsync, rename over the final name, fsync the folder. Error{Io} on failure (the temporary
  /// is then removed).
  void commit();
  /// Removes the temporary; idempotent.
  void discard() noexcept;

  const std::filesystem::path& final_path() const { return final_path_; }
  const std::filesystem::path& temp_path() const { return temp_path_; }

 private:
  bool hold();

  std::filesystem::path final_path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// Writes `bytes` to `path` atomically (see AtomicFile), with the temporary "<path>.tmp.…".
void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes);

/// Removes the temporaries of `final_path` ("<final><suffix>.<pid>.<n>.<random>") that no live
/// writer holds; returns how many. What the constructor does first.
int remove_stale_temporaries(const std::filesystem::path& final_path, const std::string& temp_suffix);

}  // namespace qsmcore::io
