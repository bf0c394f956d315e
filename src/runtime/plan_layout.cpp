// Arena layouts of a Plan: offsets by liveness for the whole-life layout, and the spilled
// layouts of activation residency (spill/planner.h) for arenas under a limit.
#include <algorithm>
#include <limits>

#include "memory/arena_piece.h"
#include "qsmcore/error.h"
#include "runtime/plan.h"
#include "spill/spill.h"

namespace qsmcore {
namespace {
// Arena blocks start on 64 bytes (memory/offset_planner.h): a staging block takes its size so.
std::size_t aligned64(std::size_t b) {
  return (b + 63) / 64 * 64;
}
// The io block direct streaming of one operand holds after its staging block.
std::size_t io_block(std::size_t staging) {
  return aligned64(residency::SpillFile::stream_io_bytes(staging));
}
}  // namespace

// Lays the arena out: values aliased in place, one buffer per group with the steps that write
// or read it, the kernels' scratchpads, then offsets by liveness (no spilling), and the plan's
// memory figures from them.
void Plan::assign_offsets() {
  alias_in_place();
  collect_buffer_events();
  collect_scratch();
  const memory::SpillLayout own = unspilled_layout();
  layout_ = build_layout(own, Streams::Lean);  // streams nothing
  memory_.arena_bytes = static_cast<std::int64_t>(layout_->arena_bytes);
  // Unspilled, each buffer is one segment: Value::offset is where its value lives (tools and
  // tests read it; runs take the layout's per-step offsets).
  for (std::size_t v = 0; v < values_.size(); ++v)
    if (buffer_of_[v] >= 0) values_[v].offset = own.segments[static_cast<std::size_t>(buffer_of_[v])].offset;
  for (const auto& st : steps_) {
    memory_.scratch_bytes = std::max<std::int64_t>(
        memory_.scratch_bytes, static_cast<std::int64_t>(st.kernel ? st.kernel->scratch_bytes() : st.scratch));
    memory_.packed_weight_bytes += st.kernel ? st.kernel->packed_bytes() : st.packed;
  }
  for (int v : outputs_) memory_.io_bytes += static_cast<std::int64_t>(values_[static_cast<std::size_t>(v)].bytes);
  memory_.table_bytes = static_cast<std::int64_t>(steps_.size() * 512 + values_.size() * 256);
}

// In place: output 0 takes the bytes of the input the kernel allows when nothing reads that
// input later. Each group of aliased values is one buffer, written and read at its members'
// steps (collect_buffer_events); the kernels' scratchpads are buffers live during their step
// only (collect_scratch).
// The root of v's group of values aliased in place (v itself when it has none).
int Plan::alias_root(int v) const {
  while (alias_[static_cast<std::size_t>(v)] >= 0) v = alias_[static_cast<std::size_t>(v)];
  return v;
}

void Plan::alias_in_place() {
  const int n_steps = static_cast<int>(steps_.size());
  std::vector<int> def(values_.size(), -1), last(values_.size(), -1);
  for (int s = 0; s < n_steps; ++s) {
    for (int v : steps_[static_cast<std::size_t>(s)].out)
      if (v >= 0 && def[static_cast<std::size_t>(v)] < 0) def[static_cast<std::size_t>(v)] = s;
    for (int v : steps_[static_cast<std::size_t>(s)].in)
      if (v >= 0) last[static_cast<std::size_t>(v)] = s;
  }
  alias_.assign(values_.size(), -1);
  std::vector<int> group_last(values_.size());
  for (std::size_t v = 0; v < values_.size(); ++v) group_last[v] = std::max(last[v], def[v]);
  for (int s = 0; s < n_steps; ++s) {
    const Step& st = steps_[static_cast<std::size_t>(s)];
    const int k = st.kernel ? st.kernel->inplace_input() : st.inplace;
    if (k < 0 || st.out.empty() || st.out[0] < 0 || static_cast<std::size_t>(k) >= st.in.size() ||
        st.in[static_cast<std::size_t>(k)] < 0)
      continue;
    const int out = st.out[0];
    const int r = alias_root(st.in[static_cast<std::size_t>(k)]);
    const Value& rv = values_[static_cast<std::size_t>(r)];
    const Value& ov = values_[static_cast<std::size_t>(out)];
    if (rv.storage != Storage::Arena || ov.storage != Storage::Arena) continue;
    if (group_last[static_cast<std::size_t>(r)] != s || rv.bytes != ov.bytes || rv.dtype != ov.dtype) continue;
    if (rv.layout.plain() != ov.layout.plain()) continue;
    alias_[static_cast<std::size_t>(out)] = r;
    group_last[static_cast<std::size_t>(r)] =
        std::max(group_last[static_cast<std::size_t>(r)], group_last[static_cast<std::size_t>(out)]);
  }
}

// One buffer per group root; its events are every step that writes or reads a member.
void Plan::collect_buffer_events() {
  const int n_steps = static_cast<int>(steps_.size());
  buffer_of_.assign(values_.size(), -1);
  for (std::size_t v = 0; v < values_.size(); ++v) {
    if (values_[v].storage != Storage::Arena || alias_[v] >= 0) continue;
    buffer_of_[v] = static_cast<int>(buffers_.size());
    buffers_.push_back({values_[v].bytes, {}, {}, {}, {}});
  }
  for (std::size_t v = 0; v < values_.size(); ++v)
    if (values_[v].storage == Storage::Arena)
      buffer_of_[v] = buffer_of_[static_cast<std::size_t>(alias_root(static_cast<int>(v)))];
  // An event can stream when the step can stream every slot of the buffer it has: its staging
  // is then the sum of theirs (kernels/kernel.h stream_bytes).
  // Direct streaming holds an io block beside each staging block (direct_buffers_: the same
  // buffers, with these per-event stream bytes).
  std::vector<std::vector<std::size_t>> direct_stream_bytes(buffers_.size());
  for (int s = 0; s < n_steps; ++s) {
    const Step& st = steps_[static_cast<std::size_t>(s)];
    auto note = [&](int v, bool write, const std::optional<kernels::StreamNeed>& stream) {
      if (v < 0 || buffer_of_[static_cast<std::size_t>(v)] < 0) return;
      const auto bi = static_cast<std::size_t>(buffer_of_[static_cast<std::size_t>(v)]);
      auto& b = buffers_[bi];
      auto& direct = direct_stream_bytes[bi];
      if (b.events.empty() || b.events.back() != s) {
        b.events.push_back(s);
        b.writes.push_back(false);
        b.reads.push_back(0);
        b.stream_bytes.push_back(0);
        direct.push_back(0);
      }
      if (write) b.writes.back() = true;
      std::size_t& sb = b.stream_bytes.back();
      std::size_t& db = direct.back();
      if (!stream || sb == memory::SpillBuffer::kNoStream) {
        sb = db = memory::SpillBuffer::kNoStream;
        return;
      }
      sb += aligned64(stream->staging);
      db += aligned64(stream->staging) + io_block(stream->staging);
      b.reads.back() += stream->reads;
    };
    for (std::size_t i = 0; i < st.in.size(); ++i) note(st.in[i], false, stream_slot(st, false, i));
    for (std::size_t i = 0; i < st.out.size(); ++i) note(st.out[i], true, stream_slot(st, true, i));
  }
  direct_buffers_ = buffers_;
  for (std::size_t b = 0; b < buffers_.size(); ++b) direct_buffers_[b].stream_bytes = std::move(direct_stream_bytes[b]);
}

// A kernel's scratchpad is one more arena buffer, live during its step only: the run's peak
// is the largest live set plus the scratch of the step where it occurs, not the largest live
// set plus the largest scratch of any step (xQSM twin at 64³: a 64 MiB deconvolution
// scratchpad sits at a step where only half the arena is in use).
void Plan::collect_scratch() {
  const int n_steps = static_cast<int>(steps_.size());
  for (int s = 0; s < n_steps; ++s) {
    const Step& st = steps_[static_cast<std::size_t>(s)];
    const std::size_t b = st.kernel ? st.kernel->scratch_bytes() : st.scratch;
    if (b == 0) continue;
    scratch_.push_back({b, s, s});
    scratch_step_.push_back(s);
  }
  live_bytes_.assign(steps_.size(), 0);
  for (const auto& b : buffers_)
    for (int s = b.events.front(); s <= b.events.back() && s < n_steps; ++s)
      live_bytes_[static_cast<std::size_t>(s)] += b.bytes;
  for (const auto& l : scratch_) live_bytes_[static_cast<std::size_t>(l.first)] += l.bytes;
  for (const auto& b : buffers_)
    memory_.largest_block_bytes =
        std::max<std::int64_t>(memory_.largest_block_bytes, static_cast<std::int64_t>(b.bytes));
  for (const auto& l : scratch_)
    memory_.largest_block_bytes =
        std::max<std::int64_t>(memory_.largest_block_bytes, static_cast<std::int64_t>(l.bytes));
}

// The whole-life layout (nothing spilled), in pieces where one allocation is bounded.
memory::SpillLayout Plan::unspilled_layout() {
  check_pieces();
  memory::SpillLayout own = memory::plan_spills(buffers_, scratch_, 0, piece_);
  // In pieces, the tail of a piece that no buffer fits in is lost: three 1 GiB activations live
  // at once (qsmcore-invnet at 256³) take a 2047 MiB piece each, 5118 MiB, more than wasm32's
  // 4 GiB, where pieces of exactly 1 GiB take 3072 MiB. So a multi-piece arena also tries pieces
  // of k times the largest block (k ≤ 8, below the platform's piece) and keeps the smallest.
  if (piece_ != 0 && own.arena > piece_) {
    const std::size_t largest = aligned64(static_cast<std::size_t>(memory_.largest_block_bytes));
    for (std::size_t k = 1; largest > 0 && k <= 8 && k * largest < piece_; ++k) {
      memory::SpillLayout l = memory::plan_spills(buffers_, scratch_, 0, k * largest);
      if (l.arena < own.arena) own = std::move(l), piece_ = k * largest;
    }
  }
  if (own.arena == std::numeric_limits<std::size_t>::max())
    throw Error(ErrorKind::OutOfBudget, "the arena's layout needs more bytes than this platform can address");
  return own;
}

// Where one allocation is bounded (wasm32: below 2 GiB), the arena is planned in pieces; a value
// or scratchpad larger than a piece cannot be placed at all, and is refused here, before anything
// is allocated, rather than by the allocator at run time.
void Plan::check_pieces() {
  piece_ = memory::arena_piece_bytes();
  if (piece_ == 0) return;
  auto refuse = [&](std::size_t bytes, const std::string& what) {
    throw Error(ErrorKind::OutOfBudget, what + " needs " + std::to_string(bytes) +
                                            " bytes in one piece; arenas here are allocated in pieces of at most " +
                                            std::to_string(piece_) +
                                            " bytes (wasm32: one allocation stays below 2 GiB)");
  };
  for (std::size_t v = 0; v < values_.size(); ++v)
    if (buffer_of_[v] >= 0 && alias_[v] < 0 && values_[v].bytes > piece_)
      refuse(values_[v].bytes, "value '" + values_[v].name + "'");
  for (const auto& l : scratch_)
    if (l.bytes > piece_) refuse(l.bytes, "the scratchpad of step " + std::to_string(l.first));
}

std::shared_ptr<const ArenaLayout> Plan::build_layout(const memory::SpillLayout& sl, Streams streams) const {
  auto l = std::make_shared<ArenaLayout>();
  l->arena_bytes = sl.arena;
  l->piece_bytes = piece_;
  l->file_bytes = sl.file_bytes;
  l->write_bytes = sl.write_bytes;
  l->read_bytes = sl.read_bytes;
  l->streamed_bytes = sl.streamed_bytes;
  l->direct_streams = streams == Streams::Direct && residency::SpillFile::stream_io_bytes(1) > 0;
  l->fits = sl.fits;
  const std::size_t n = steps_.size();
  l->scratch_offset.assign(n, 0);
  l->scratch_slot.assign(n, 0);
  for (std::size_t i = 0; i < scratch_.size(); ++i) {
    l->scratch_offset[static_cast<std::size_t>(scratch_step_[i])] = sl.fixed_offsets[i];
    l->scratch_slot[static_cast<std::size_t>(scratch_step_[i])] = scratch_[i].bytes;
  }
  // Segments by buffer, in step order: the one covering a step is where the buffer is then.
  std::vector<std::vector<const memory::Segment*>> by_buffer(buffers_.size());
  for (const auto& seg : sl.segments) by_buffer[static_cast<std::size_t>(seg.buffer)].push_back(&seg);
  auto offset_at = [&](int v, int s) {
    if (v < 0 || buffer_of_[static_cast<std::size_t>(v)] < 0) return ArenaLayout::npos;
    for (const auto* seg : by_buffer[static_cast<std::size_t>(buffer_of_[static_cast<std::size_t>(v)])])
      if (seg->first <= s && s <= seg->last) return seg->offset;
    return ArenaLayout::npos;  // unreachable: every event of a buffer lies in one of its segments
  };
  l->in_offset.resize(n);
  l->out_offset.resize(n);
  for (std::size_t s = 0; s < n; ++s) {
    for (int v : steps_[s].in) l->in_offset[s].push_back(offset_at(v, static_cast<int>(s)));
    for (int v : steps_[s].out) l->out_offset[s].push_back(offset_at(v, static_cast<int>(s)));
  }
  l->streamed.resize(n);
  for (const auto& str : sl.streams) {
    const auto s = static_cast<std::size_t>(str.step);
    std::size_t at = str.offset;
    auto add = [&](bool output, const std::vector<int>& vals) {
      for (std::size_t i = 0; i < vals.size(); ++i) {
        if (vals[i] < 0 || buffer_of_[static_cast<std::size_t>(vals[i])] != str.buffer) continue;
        const std::size_t staging = stream_slot(steps_[s], output, i)->staging;
        const std::size_t bytes = aligned64(staging);
        const std::size_t io = streams == Streams::Direct ? io_block(staging) : 0;
        l->streamed[s].push_back({output, i, sl.file_offset[static_cast<std::size_t>(str.buffer)], at, bytes,
                                  buffers_[static_cast<std::size_t>(str.buffer)].bytes, at + bytes, io});
        at += bytes + io;
      }
    };
    add(false, steps_[s].in);
    add(true, steps_[s].out);
  }
  std::vector<int> root_value(buffers_.size(), -1);
  for (std::size_t v = values_.size(); v-- > 0;)
    if (buffer_of_[v] >= 0 && alias_[v] < 0) root_value[static_cast<std::size_t>(buffer_of_[v])] = static_cast<int>(v);
  for (const auto& seg : sl.segments)
    l->residents.push_back({root_value[static_cast<std::size_t>(seg.buffer)], seg.first, seg.last});
  l->transfers.resize(n);
  for (const auto& seg : sl.segments) {
    const auto b = static_cast<std::size_t>(seg.buffer);
    using When = ArenaLayout::When;
    if (seg.reload)
      l->transfers[static_cast<std::size_t>(seg.first)].push_back(
          {seg.read_sync ? When::Before : When::During, false, seg.offset, sl.file_offset[b], buffers_[b].bytes});
    if (seg.write_out)
      l->transfers[static_cast<std::size_t>(seg.last)].push_back(
          {seg.write_sync ? When::After : When::During, true, seg.offset, sl.file_offset[b], buffers_[b].bytes});
  }
  return l;
}

std::optional<kernels::StreamNeed> Plan::stream_slot(const Step& st, bool output, std::size_t slot) {
  const auto& v = output ? st.stream_out : st.stream_in;
  return slot < v.size() ? v[slot] : std::nullopt;
}

std::shared_ptr<const ArenaLayout> Plan::layout_within(std::size_t arena_limit, Streams streams) const {
  if (arena_limit == 0 || layout_->arena_bytes <= arena_limit) return layout_;
  std::lock_guard<std::mutex> lock(layout_mu_);
  for (const auto& k : spilled_layouts_)
    if (k.limit == arena_limit && k.streams == streams) return k.layout;
  const auto& buffers = streams == Streams::Direct ? direct_buffers_ : buffers_;
  auto l = build_layout(memory::plan_spills(buffers, scratch_, arena_limit, piece_), streams);
  // A few limits are kept: a wrapper asks for the same one at planning and at run time.
  constexpr std::size_t kKept = 4;
  if (spilled_layouts_.size() >= kKept) spilled_layouts_.erase(spilled_layouts_.begin());
  spilled_layouts_.push_back({arena_limit, streams, l});
  return l;
}

std::size_t Plan::min_arena_bytes(Streams streams) const {
  return least_layout(streams)->arena_bytes;
}

std::shared_ptr<const ArenaLayout> Plan::least_layout(Streams streams) const {
  std::lock_guard<std::mutex> lock(layout_mu_);
  auto& least = streams == Streams::Direct ? least_direct_ : least_;
  if (!least)
    least = build_layout(
        memory::plan_all_spilled(streams == Streams::Direct ? direct_buffers_ : buffers_, scratch_, piece_), streams);
  return least;
}

std::vector<std::size_t> Plan::held_bytes(const ArenaLayout& l) const {
  std::vector<std::size_t> held(steps_.size(), 0);
  for (const auto& r : l.residents)
    for (int s = r.first; s <= r.last; ++s)
      held[static_cast<std::size_t>(s)] += aligned64(values_[static_cast<std::size_t>(r.value)].bytes);
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    for (const auto& st : l.streamed[s]) held[s] += st.staging_bytes + st.io_bytes;
    held[s] += aligned64(l.scratch_slot[s]);
  }
  return held;
}

}  // namespace qsmcore
