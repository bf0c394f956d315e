// The shared pieces of the SIMD128 kernels (common.h).
#include "kernels/wasm/common.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/pack_cache.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::wasm {

const graph::TValue& value_of(const graph::TypedGraph& g, int v) {
  return g.values.at(static_cast<std::size_t>(v));
}

bool all_f32(const graph::TypedGraph& g, const graph::TNode& n) {
  for (int v : n.in)
    if (v >= 0 && value_of(g, v).dtype != DType::F32) return false;
  for (int v : n.out)
    if (v >= 0 && value_of(g, v).dtype != DType::F32) return false;
  return true;
}

bool all_finite(const float* p, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

float* PackedConstants::allocate(std::size_t floats) {
  const std::size_t bytes = floats * sizeof(float);
  bytes_ += static_cast<std::int64_t>(bytes);
  PackCache* cache = active_pack_cache();
  if (cache != nullptr && cache->dry) {
    // Nothing is shared between plans on this backend: every packed byte is new.
    cache->dry_new_bytes += static_cast<std::int64_t>(bytes);
    return nullptr;
  }
  Buffer& part = parts_.emplace_back(bytes, MemCategory::Weights);
  std::memset(part.data(), 0, bytes);
  return reinterpret_cast<float*>(part.data());
}

void PackedConstants::relocate() {
  for (Buffer& part : parts_) relocate(part);
}

void PackedConstants::relocate(Buffer& part) {
  if (part.data() == nullptr) return;
  Buffer fresh(part.size(), MemCategory::Weights);
  const auto old_at = reinterpret_cast<std::uintptr_t>(part.data());
  if (reinterpret_cast<std::uintptr_t>(fresh.data()) >= old_at) return;  // no lower hole: stay
  std::memcpy(fresh.data(), part.data(), part.size());
  const auto* old_floats = reinterpret_cast<const float*>(part.data());
  const auto* new_floats = reinterpret_cast<const float*>(fresh.data());
  for (const float** slot : slots_) {
    const auto at = reinterpret_cast<std::uintptr_t>(*slot);
    if (at >= old_at && at < old_at + part.size()) *slot = new_floats + (*slot - old_floats);
  }
  // NaNs where the weights were: a pointer the kernel did not track would read them, and every
  // wasm test comparing with the native engine fails on a non-finite value.
  std::memset(part.data(), 0xff, part.size());
  part = std::move(fresh);
}

PostChain::PostChain(const std::vector<PostOp>& post) : post_(post) {
  for (const auto& p : post_)
    if (p.kind == PostOp::Kind::Sum) sum_input_ = p.sum_input;
}

void PostChain::apply(v128_t* v, int nv, const float* add, int n) const {
  const v128_t zero = wasm_f32x4_splat(0.0f);
  for (const auto& p : post_) {
    using K = PostOp::Kind;
    if (p.kind == K::Sum) {
      alignas(16) float a[32] = {};
      const float* src = add;
      if (n < 4 * nv) std::memcpy(a, add, static_cast<std::size_t>(n) * sizeof(float)), src = a;
      for (int i = 0; i < nv; ++i) v[i] = wasm_f32x4_add(v[i], wasm_v128_load(src + 4 * i));
    } else if (p.kind == K::Relu) {
      // x > 0 ? x : 0, so NaN becomes 0 as in the reference (f32x4.max would keep it).
      for (int i = 0; i < nv; ++i) v[i] = wasm_v128_and(v[i], wasm_f32x4_gt(v[i], zero));
    } else if (p.kind == K::LeakyRelu) {
      const v128_t a = wasm_f32x4_splat(p.alpha);
      for (int i = 0; i < nv; ++i) v[i] = wasm_v128_bitselect(v[i], wasm_f32x4_mul(v[i], a), wasm_f32x4_ge(v[i], zero));
    } else if (p.kind == K::Clip) {
      // pmax/pmin are std::max/std::min lane by lane (NaN passes through, as in the reference).
      const v128_t lo = wasm_f32x4_splat(p.alpha), hi = wasm_f32x4_splat(p.beta);
      for (int i = 0; i < nv; ++i) v[i] = wasm_f32x4_pmin(wasm_f32x4_pmax(v[i], lo), hi);
    } else {
      // Elu, Sigmoid, Tanh: the reference's own scalar function, so both agree to the bit.
      alignas(16) float t[32];
      for (int i = 0; i < nv; ++i) wasm_v128_store(t + 4 * i, v[i]);
      for (int i = 0; i < 4 * nv; ++i) t[i] = apply_activation(p, t[i]);
      for (int i = 0; i < nv; ++i) v[i] = wasm_v128_load(t + 4 * i);
    }
  }
}

void PostChain::store_partial(const v128_t* v, int nv, float* dst, int n) {
  alignas(16) float t[32];
  for (int i = 0; i < nv; ++i) wasm_v128_store(t + 4 * i, v[i]);
  std::memcpy(dst, t, static_cast<std::size_t>(n) * sizeof(float));
}

int worker_count(std::int64_t jobs, std::size_t scratch_per_worker, const ExecContext& ctx) {
  QSM_ASSERT(ctx.scratch_bytes >= scratch_per_worker, "scratch block smaller than one worker's slice");
  std::int64_t workers = std::min<std::int64_t>(max_threads(), jobs);
  if (scratch_per_worker > 0)
    workers = std::min<std::int64_t>(workers, static_cast<std::int64_t>(ctx.scratch_bytes / scratch_per_worker));
  return static_cast<int>(std::max<std::int64_t>(workers, 1));
}

int blocks_per_group(int blocks, std::int64_t block_bytes, std::int64_t planes) {
  constexpr std::int64_t kGroupWeightBytes = 256 * 1024;
  const int threads = max_threads();
  std::int64_t groups = (blocks * block_bytes + kGroupWeightBytes - 1) / kGroupWeightBytes;
  if (threads > 1)
    groups = std::max<std::int64_t>(groups, (4 * threads + planes - 1) / std::max<std::int64_t>(planes, 1));
  groups = std::clamp<std::int64_t>(groups, 1, std::max(blocks, 1));
  return std::max(1, static_cast<int>((blocks + groups - 1) / groups));
}

int segments_per_copy(std::int64_t floats_per_segment, int segments_in_row) {
  constexpr std::int64_t kCopyBytes = 64 * 1024;
  const std::int64_t fit = kCopyBytes / std::max<std::int64_t>(1, floats_per_segment * 4);
  return static_cast<int>(std::clamp<std::int64_t>(fit, 1, std::clamp(segments_in_row, 1, 16)));
}

std::size_t scratch_for_workers(std::size_t per_worker) {
  return round64(per_worker) * static_cast<std::size_t>(std::max(1, max_threads()));
}

}  // namespace qsmcore::kernels::wasm
