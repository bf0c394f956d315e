#include "kernels/slab_reader.h"

#include <algorithm>
#include <cstring>

#include "qsmcore/error.h"

namespace qsmcore::kernels {

DepthSlabCall depth_slab_call(std::int64_t count, std::int64_t reach_lo, std::int64_t reach_hi, std::int64_t in_depth) {
  DepthSlabCall c;
  c.count = count;
  c.src_first = std::max<std::int64_t>(0, reach_lo);
  const std::int64_t last = std::min(in_depth - 1, reach_hi);
  c.src_planes = last - c.src_first + 1;
  c.pad_l = c.src_first - reach_lo;
  c.pad_r = reach_hi - last;
  return c;
}

std::byte* SlabReader::stage(std::int64_t first, std::int64_t count) {
  QSM_ASSERT(first >= first_ && (count_ == 0 || first <= first_ + count_), "slabs staged out of order");
  const std::int64_t kept = count_ > 0 ? std::min(first_ + count_, first + count) - first : 0;
  std::byte* block = op_.staging;
  if (kept > 0 && first != first_)
    std::memmove(block, block + static_cast<std::size_t>(first - first_) * plane_,
                 static_cast<std::size_t>(kept) * plane_);
  if (count > kept)
    op_.read(block + static_cast<std::size_t>(kept) * plane_, static_cast<std::size_t>(first + kept) * plane_,
             static_cast<std::size_t>(count - kept) * plane_);
  first_ = first;
  count_ = count;
  return block;
}

}  // namespace qsmcore::kernels
