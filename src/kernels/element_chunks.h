// Streaming of elementwise kernels (activation residency, issue #16). An op whose every output
// element depends only on its inputs' elements at the same offset (Relu, Where, Greater, a
// same-shape Add) is the same function of any range of its buffers, in any layout they share.
// Streamed, it walks its full-size operands a chunk of elements at a time: a streamed input's
// chunk is read from the spill file into its staging block, a streamed output's chunk is made in
// its staging block and written back. NeXtQSM's VJP applies Relu, Greater and Where to
// 648 MiB full-resolution tensors: held whole, they set the least any budget could run in.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "kernels/kernel.h"
#include "qsmcore/tensor.h"

namespace qsmcore::kernels {

struct ElementChunks {
  std::int64_t elements = 0;  // per full-size buffer (physical: padding lanes included)
  std::int64_t per = 0;       // elements per chunk; 0: too small to be worth streaming
  /// Chunks of a sixty-fourth of the buffer, at least 64 Ki elements, a multiple of 64; none
  /// when the buffer is under two chunks (its staging would hold about as much as it).
  static ElementChunks of(std::int64_t elements);
  bool streams() const { return per > 0; }
  /// The staging block one operand of `element_bytes` per element takes (nullopt: none streams).
  std::optional<StreamNeed> need(std::size_t element_bytes, bool output) const;
};

/// One chunk: elements [first, first + count) of every full-size operand.
struct ElementChunk {
  std::int64_t first = 0, count = 0;
  std::vector<const void*> in;  // per input: the chunk's first element (a single value: itself)
  void* out = nullptr;          // output 0's chunk
};

/// Walks the chunks of a kernel's run: for each, points every input at its chunk (read from the
/// file into staging where streamed), calls `f`, and writes a streamed output's chunk back.
/// `in_bytes[i]`: input i's element size; `full[i]`: input i is full-size (else one value, read
/// in place). Streaming applies to full-size operands only.
void walk_element_chunks(const ElementChunks& c, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                         const std::vector<std::size_t>& in_bytes, const std::vector<bool>& full, std::size_t out_bytes,
                         const ExecContext& ctx, const std::function<void(const ElementChunk&)>& f);

}  // namespace qsmcore::kernels
