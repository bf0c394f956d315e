#include "kernels/element_chunks.h"

#include <algorithm>

#include "qsmcore/error.h"

namespace qsmcore::kernels {
namespace {
constexpr std::int64_t kLeastChunk = std::int64_t{64} * 1024;  // elements: 256 KiB of floats per read or write
constexpr std::int64_t kChunks = 64;
constexpr std::int64_t kLane = 64;  // chunks start on 64 elements: 64-byte aligned for any type
std::size_t align64(std::size_t b) {
  return (b + 63) / 64 * 64;
}
}  // namespace

ElementChunks ElementChunks::of(std::int64_t elements) {
  ElementChunks c;
  c.elements = elements;
  std::int64_t per = std::max(kLeastChunk, (elements + kChunks - 1) / kChunks);
  per = (per + kLane - 1) / kLane * kLane;
  if (elements >= 2 * per) c.per = per;
  return c;
}

std::optional<StreamNeed> ElementChunks::need(std::size_t element_bytes, bool output) const {
  if (!streams()) return std::nullopt;
  return StreamNeed{align64(static_cast<std::size_t>(per) * element_bytes), output ? 0u : 1u};
}

void walk_element_chunks(const ElementChunks& c, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                         const std::vector<std::size_t>& in_bytes, const std::vector<bool>& full, std::size_t out_bytes,
                         const ExecContext& ctx, const std::function<void(const ElementChunk&)>& f) {
  QSM_ASSERT(c.streams() || (ctx.streamed_in.empty() && ctx.streamed_out.empty()),
             "an elementwise kernel streamed without chunks");
  const std::int64_t per = c.streams() ? c.per : c.elements;
  ElementChunk ch;
  ch.in.resize(inputs.size());
  for (std::int64_t first = 0; first < c.elements; first += per) {
    ch.first = first;
    ch.count = std::min(per, c.elements - first);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!full[i]) {
        ch.in[i] = inputs[i].raw();
        continue;
      }
      const std::size_t at = static_cast<std::size_t>(first) * in_bytes[i];
      if (const StreamedOperand* s = ctx.in_stream(i)) {
        s->read(s->staging, at, static_cast<std::size_t>(ch.count) * in_bytes[i]);
        ch.in[i] = s->staging;
      } else {
        ch.in[i] = static_cast<const std::byte*>(inputs[i].raw()) + at;
      }
    }
    const std::size_t out_at = static_cast<std::size_t>(first) * out_bytes;
    const StreamedOperand* so = ctx.out_stream(0);
    ch.out = so ? static_cast<void*>(so->staging) : static_cast<std::byte*>(outputs[0].raw()) + out_at;
    f(ch);
    if (so) so->write(so->staging, out_at, static_cast<std::size_t>(ch.count) * out_bytes);
  }
}

}  // namespace qsmcore::kernels
