// Reading a streamed operand (activation residency, issue #16) a range of depth planes at a
// time, in increasing order, into its staging block. Kernels whose slabs overlap in their input
// (a strided conv's taps reach k − s planes into the next slab; a deconvolution's sub-lattices
// reach a halo plane on either side) would read those planes twice: the planes the next range
// shares with the staged one are moved to the block's front instead, so the file is read once
// per plane and a run reads exactly the bytes its plan predicted.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/kernel.h"

namespace qsmcore::kernels {

class SlabReader {
 public:
  SlabReader(const StreamedOperand& op, std::size_t plane_bytes) : op_(op), plane_(plane_bytes) {}
  /// Stages planes [first, first + count) at the start of the staging block; returns it. `first`
  /// may not go below the previous range's, nor leave a gap after its end.
  std::byte* stage(std::int64_t first, std::int64_t count);

 private:
  const StreamedOperand& op_;
  std::size_t plane_;
  std::int64_t first_ = 0, count_ = 0;  // what the block holds now
};

}  // namespace qsmcore::kernels
