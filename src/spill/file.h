// The spill tier of activation residency (issue #16): one anonymous file that arena buffers
// are written to and read back from, by offset. Created and unlinked at once (and closed on
// exec, so no child process keeps its blocks), nothing is left behind however the process ends;
// its full size is allocated up front, so a full disk is an error before the run starts, not in
// the middle of it. Every transfer is written back and dropped from the page cache at once (a
// streamed slab: by the next slab at the latest): the bytes a spill frees must not reappear as
// page cache charged to the process's cgroup.
//
// The folder must be disk-backed (issue #51). A file on tmpfs or ramfs is memory: the bytes it
// "spills" stay resident and are charged to the same cgroup as the process, so a run sized for
// disk is OOM-killed instead of staying within its budget. So the default folder is the first
// disk-backed one of $TMPDIR, /tmp and /var/tmp (Debian 13 and Fedora mount /tmp as tmpfs;
// /var/tmp is disk-backed on every FHS system, and the file-hierarchy convention names it the
// place for large temporary files; the file is unlinked at once, so /var/tmp's persistence
// across reboots never matters). A folder that is memory-backed all the same (--spill-dir on
// tmpfs, or no disk-backed default) is refused with that reason: its bytes would count against
// the very budget they were spilled to free, and spilling or parking only ever happens because
// the run does not fit that budget otherwise.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace qsmcore::residency {

class SpillFile {
 public:
  /// A file of `bytes` in `dir` ("" = the default folder, resolve_dir). Throws Error{Io} naming
  /// the folder, and the bytes it needed, when it cannot be created or sized (a full disk:
  /// ENOSPC), or when the folder is memory-backed (tmpfs, ramfs). `what` names its contents in
  /// those messages ("spilled activations", "parked buffers").
  SpillFile(const std::string& dir, std::uint64_t bytes, const std::string& what = "spilled activations");
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
  /// The bytes allocated for it (a run may use fewer: spill files are reused, runtime/plan.h).
  std::uint64_t bytes() const { return bytes_; }

  // Direct I/O (O_DIRECT): the bytes go between the caller's memory and the disk without the
  // page cache, so a streamed slab costs no system time copying it there and dropping it
  // again (2 GB on this machine's ext4: 5 s of system time through the page cache, 0.3 s
  // direct). Blocks only: memory, length and offset are multiples of kBlock.
  static constexpr std::uint64_t kBlock = 4096;
  /// Whether the file takes direct I/O; false where the file system refuses it (and in wasm).
  bool direct() const { return direct_fd_ >= 0; }
  void read_direct(void* dst, std::uint64_t bytes, std::uint64_t offset) const;
  void write_direct(const void* src, std::uint64_t bytes, std::uint64_t offset) const;
  /// The io block a streamed operand with `staging` bytes of staging moves its direct I/O
  /// through (spill/direct_operand.h): the staging's blocks, one block more for a
  /// slab starting inside one, and one to align it. 0 where there is no direct I/O (wasm32).
  static std::size_t stream_io_bytes(std::size_t staging);
  /// The descriptor, for tests that look at what of the file is in the page cache (mincore).
  int fd() const { return fd_; }

  /// Frees `file` on a thread of its own, which the caller does not wait for: closing its last
  /// descriptor frees its blocks, which a file system mounted with `discard` trims there and
  /// then. The process's exit waits for it, if still going. Without threads (wasm), now.
  static void free_in_background(std::unique_ptr<SpillFile> file);

  /// The directory a spill file goes to for `dir`: `dir` itself when given; for "" the first
  /// disk-backed one of $TMPDIR, /tmp and /var/tmp (else the first of them, which the
  /// constructor then refuses with the reason).
  static std::string resolve_dir(const std::string& dir);
  /// Why the default folder is not $TMPDIR (else /tmp): "/tmp is tmpfs (memory-backed)"; ""
  /// when it is, or when `dir` was given.
  static std::string default_dir_note(const std::string& dir);

  // Fault injection for tests (the fault suite): the n-th read (or write) of any spill file
  // from now, 1-based, fails with errno `err` as a system call would. 0 disables. Reads and
  // writes counted since the process started, for tests that place a fault in a run.
  static void fail_read_after(std::int64_t n, int err);
  static void fail_write_after(std::int64_t n, int err);
  static std::int64_t reads_so_far();
  static std::int64_t writes_so_far();

 private:
  void probe_direct();

  int fd_ = -1;
  int direct_fd_ = -1;  // the same file opened O_DIRECT, or -1
  std::string dir_;
  std::string what_;
  std::uint64_t bytes_ = 0;
};

}  // namespace qsmcore::residency
