// A streamed operand moved by direct I/O (issue #16). Through the page cache every slab was
// copied into it, written back and dropped again: NeXtQSM at a quarter of its peak moves 48 GB
// of slabs and spent 80 s of system time on that on this machine's two cores. Direct I/O moves
// whole blocks between block-aligned memory and the file, and a slab is neither aligned nor
// whole blocks, so it passes through the operand's io block in the arena (counted by the plan
// beside its staging; residency::SpillFile::stream_io_bytes):
// - reads: while the kernel computes on one slab, the stream worker reads the next one into
//   the io block (the next slab continues where this one ended, or lies as far on as this one
//   lay past the last: a halo's overlap). A read the io block holds is copied from there; any
//   other waits for a direct read (or, when larger than the io block, reads through the page
//   cache and drops it).
// - writes: a slab is copied into the io block and written behind by the worker while the
//   kernel computes the next; the partial block at its end stays in the io block and goes out
//   in front of the next slab (kernels write in order), or, at the end of the step, alone
//   (read, completed and written back). Regions of the file start on blocks and end on them
//   (spill/planner.cpp), so the padding after an operand's last byte is its own.
// What the runner waits for counts as I/O and as a wait; what the worker does beside the
// kernel as I/O only.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>

#include "spill/transfers.h"

namespace qsmcore {

class SpillTransfers::DirectOperand final : public kernels::StreamedOperand {
 public:
  DirectOperand(const SpillTransfers& io, std::uint64_t base, std::size_t size, std::byte* io_block,
                std::size_t io_bytes);
  /// Waits for the worker (a failure here is reported by settle(), which the runner calls).
  ~DirectOperand() override;
  void read(void* dst, std::size_t offset, std::size_t bytes) const override;
  void write(const void* src, std::size_t offset, std::size_t bytes) const override;
  /// Puts every byte written into the file and waits for what is in flight: after it, the
  /// io block is free and the file holds the operand. Rethrows an I/O error.
  void settle() const;

 private:
  void wait_pending() const;
  void submit(bool write, std::uint64_t block, std::size_t bytes) const;
  // Waits for the bytes from the file: direct (true), or, larger than the io block, through
  // the page cache (false).
  bool read_now(void* dst, std::size_t offset, std::size_t bytes) const;
  void read_ahead_after(std::size_t offset, std::size_t bytes) const;
  void flush_carry() const;
  void rmw_block(std::size_t block) const;

  const SpillTransfers& io_;
  std::uint64_t base_;  // the operand's region of the file
  std::size_t size_;
  std::byte* buf_;   // the io block's first aligned byte
  std::size_t cap_;  // its whole blocks from there
  mutable std::mutex mu_;
  mutable std::string pending_;                       // the worker's key for the transfer in flight, or ""
  mutable std::size_t ahead_at_ = 0, ahead_ = 0;      // the blocks read ahead into buf_ (operand offsets)
  mutable std::size_t last_read_ = 0, last_end_ = 0;  // the last read's range
  mutable bool read_before_ = false;
  mutable std::size_t carry_block_ = 0, carry_at_ = 0, carry_ = 0;  // the written partial block in buf_
};

}  // namespace qsmcore
