// Writing a file atomically: readers (and a crash) see either no file / the old file, or the
// whole new one, never a prefix. Bytes go to "<final><suffix>" beside the final name, which is
// fsynced, renamed over the final name, and the folder fsynced so the rename itself survives a
// power cut. A temporary that is not committed is removed, so no ".part" outlives a failure.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace qsmcore::io {

class AtomicFile {
 public:
  /// Creates or takes over the temporary, under an exclusive lock: a second process writing the
  /// same file gets Error{Io} instead of interleaving bytes with the first. The parent folder
  /// must exist.
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
  std::filesystem::path final_path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// Writes `bytes` to `path` atomically (see AtomicFile), with the temporary "<path>.tmp".
void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace qsmcore::io
