// The spill tier of activation residency (issue #16): one anonymous file that arena buffers
// are written to and read back from, by offset. Created and unlinked at once, so nothing is left
// behind however the process ends; its full size is allocated up front, so a full disk is an
// error before the run starts, not in the middle of it. The bytes a spill frees must not
// reappear as page cache charged to the process's cgroup: where the file system allows it the
// file is opened for direct I/O (O_DIRECT), which bypasses the page cache altogether (on this
// machine's ext4, 2 GB through the page cache cost 5 s of system time, direct 0.3 s; NeXtQSM at
// a quarter of its peak moves 48 GB); elsewhere (tmpfs) every transfer is written back and
// dropped from the page cache at once (a streamed slab: by the next slab at the latest).
#pragma once
#include <cstdint>
#include <string>

namespace qsmcore::residency {

class SpillFile {
 public:
  /// A file of `bytes` in `dir` ("" = $TMPDIR, else /tmp). Throws Error{Io} naming the
  /// directory when it cannot be created or sized. `direct`: use direct I/O where the file
  /// system allows it (false: through the page cache, as where it does not).
  SpillFile(const std::string& dir, std::uint64_t bytes, bool direct = true);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  /// Thread-safe (positioned I/O): the spill worker moves several buffers through one file.
  void write(const void* src, std::uint64_t bytes, std::uint64_t offset) const;
  void read(void* dst, std::uint64_t bytes, std::uint64_t offset) const;

  // A kernel streaming an operand a slab at a time overlaps the file with its compute (one slab
  // of page cache in flight each way, dropped as soon as it is consumed or written back):
  /// Writes and starts the write-back without waiting for it; settle() the range later.
  void write_behind(const void* src, std::uint64_t bytes, std::uint64_t offset) const;
  /// Waits for a write_behind() range to reach the disk, then drops it from the page cache.
  void settle(std::uint64_t bytes, std::uint64_t offset) const;
  /// Asks the kernel to read a range into the page cache now (the next slab); read() takes it
  /// from there and drops it, forget() drops it unread.
  void read_ahead(std::uint64_t bytes, std::uint64_t offset) const;
  void forget(std::uint64_t bytes, std::uint64_t offset) const;
  const std::string& dir() const { return dir_; }
  /// The descriptor, for tests that look at what of the file is in the page cache (mincore).
  int fd() const { return fd_; }

  /// Whether transfers bypass the page cache (O_DIRECT); else they go through it and are dropped.
  bool direct() const { return direct_; }

  /// The directory a spill file goes to for `dir` ("" = $TMPDIR, else /tmp).
  static std::string resolve_dir(const std::string& dir);

 private:
  bool try_direct(std::uint64_t bytes);
  void direct_read(void* dst, std::uint64_t bytes, std::uint64_t offset) const;
  void direct_write(const void* src, std::uint64_t bytes, std::uint64_t offset) const;
  void read_all(void* dst, std::uint64_t bytes, std::uint64_t offset) const;
  void write_all(const void* src, std::uint64_t bytes, std::uint64_t offset) const;

  int fd_ = -1;
  bool direct_ = false;
  std::string dir_;
};

}  // namespace qsmcore::residency
