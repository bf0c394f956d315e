// Reading a streamed operand (activation residency, issue #16) a range of depth planes at a
// time, in increasing order, into its staging block. Kernels whose slabs overlap in their input
// (a strided conv's taps reach k − s planes into the next slab; a deconvolution's sub-lattices
// reach a halo plane on either side) would read those planes twice: the planes the next range
// shares with the staged one are moved to the block's front instead, so the file is read once
// per plane and a run reads exactly the bytes its plan predicted.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/kernel.h"

namespace qsmcore::kernels {

/// One depth-slab call of a convolution-like kernel (strided conv, deconvolution sub-lattice):
/// `count` output planes from input planes [src_first, src_first + src_planes), the planes its
/// taps reach cut at the volume's faces, where pad_l / pad_r zero planes stand in (the whole
/// volume's own pads there, none inside).
struct DepthSlabCall {
  std::int64_t count = 0, src_first = 0, src_planes = 0, pad_l = 0, pad_r = 0;
  /// What makes two calls need different primitives.
  std::array<std::int64_t, 4> key() const { return {count, src_planes, pad_l, pad_r}; }
};
/// The call for `count` output planes whose taps reach input planes reach_lo … reach_hi
/// (either may lie outside 0 … in_depth − 1).
DepthSlabCall depth_slab_call(std::int64_t count, std::int64_t reach_lo, std::int64_t reach_hi, std::int64_t in_depth);

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
