// The register-blocked core shared by the SIMD128 Conv and ConvTranspose kernels: 4 output
// channels × 8 contiguous outputs (2 f32x4 per channel; or 2 × 16, 1 × 32) held in 8
// accumulators while the input rows and their kernel taps stream through. SIMD128 has no FMA
// (only relaxed-simd has), so each tap is a mul and an add. 8 accumulators + 2 input vectors +
// a splatted weight + the product make 12 live vectors: they fit the 16 XMM registers V8
// allocates from, where 12 accumulators would spill.
//
// The rows are read from compact, zero-padded copies of the pieces a segment of outputs needs.
// Read in place, the C·KD·KH rows of one output row lie 4 KiB multiples apart (the row, plane and
// channel strides of power-of-two volumes), map to the same L1 set and thrash it: the copies made
// the 32→32 3×3×3 conv at 64³ a quarter faster. They also turn padding and stride 2 into plain
// loads.
#pragma once
#include <wasm_simd128.h>

#include <cstdint>

namespace qsmcore::kernels::wasm {

/// The 4×4 transpose of the rows (a0, a1, a2, a3): o[j] = (a0[j], a1[j], a2[j], a3[j]).
inline void transpose4x4(v128_t a0, v128_t a1, v128_t a2, v128_t a3, v128_t* o) {
  const v128_t t0 = wasm_i32x4_shuffle(a0, a1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(a2, a3, 0, 4, 1, 5);
  const v128_t t2 = wasm_i32x4_shuffle(a0, a1, 2, 6, 3, 7), t3 = wasm_i32x4_shuffle(a2, a3, 2, 6, 3, 7);
  o[0] = wasm_i32x4_shuffle(t0, t1, 0, 1, 4, 5);
  o[1] = wasm_i32x4_shuffle(t0, t1, 2, 3, 6, 7);
  o[2] = wasm_i32x4_shuffle(t2, t3, 0, 1, 4, 5);
  o[3] = wasm_i32x4_shuffle(t2, t3, 2, 3, 6, 7);
}

/// One input row feeding a block of outputs: its first float (relative to the base pointer the
/// caller passes) and the first packed weight of its taps (relative to the channel block).
struct RowRef {
  std::int32_t in;
  std::int32_t w;
};

/// One tap of one row: 8/NC input vectors at x times the NC weights at wp, into the 8
/// accumulators a[j·(8/NC) + v] (channel j, vector v).
template <int NC>
inline void tap(const float* x, const float* wp, v128_t* a) {
  constexpr int kNv = 8 / NC;
  if constexpr (NC == 4) {
    // Both input vectors, then one splatted weight at a time: 12 live vectors.
    const v128_t x0 = wasm_v128_load(x), x1 = wasm_v128_load(x + 4);
    for (int j = 0; j < 4; ++j) {
      const v128_t c = wasm_v128_load32_splat(wp + j);
      a[2 * j] = wasm_f32x4_add(a[2 * j], wasm_f32x4_mul(x0, c));
      a[2 * j + 1] = wasm_f32x4_add(a[2 * j + 1], wasm_f32x4_mul(x1, c));
    }
  } else {
    // The NC weights, then one input vector at a time: at most 12 live vectors.
    v128_t c[NC];
    for (int j = 0; j < NC; ++j) c[j] = wasm_v128_load32_splat(wp + j);
    for (int v = 0; v < kNv; ++v) {
      const v128_t xv = wasm_v128_load(x + 4 * v);
      for (int j = 0; j < NC; ++j) a[j * kNv + v] = wasm_f32x4_add(a[j * kNv + v], wasm_f32x4_mul(xv, c[j]));
    }
  }
}

/// acc[j·(8/NC) + v] (vector v of the 32/NC outputs of channel j of the block) += Σ over rows and
/// taps of input × weight. Row r's tap k reads 32/NC consecutive inputs at base + rows[r].in +
/// toff[k] and the NC weights (one per channel) at w + rows[r].w + NC·k. KW > 0 fixes the tap
/// count at compile time; KW == 0 takes it from `taps`. The order of the sum is fixed: rows, then
/// taps. NC = 4 is the main form; 2 and 1 serve convs with fewer output channels, whose lanes
/// would otherwise stay idle.
template <int KW, int NC>
inline void accumulate(const float* base, const RowRef* rows, int nrows, const float* w, int taps, const int* toff,
                       v128_t* acc) {
  v128_t a[8];
  for (int i = 0; i < 8; ++i) a[i] = acc[i];
  const int kw_n = KW > 0 ? KW : taps;
  // No unrolling: LLVM would interleave the unrolled taps per accumulator, keeping every tap's
  // inputs and weights live at once, and V8 would spill them.
#pragma clang loop unroll(disable)
  for (int r = 0; r < nrows; ++r) {
    const float* s = base + rows[r].in;
    const float* wp = w + rows[r].w;
#pragma clang loop unroll(disable)
    for (int k = 0; k < kw_n; ++k, wp += NC) tap<NC>(s + toff[k], wp, a);
  }
  for (int i = 0; i < 8; ++i) acc[i] = a[i];
}

/// Zero-padded copy of row[at, at + 4·chunks) (the row holds `width` floats) to dst. At stride 2
/// it copies row[at, at + 8·chunks) split into its even elements (dst[0, 4·chunks)) and odd ones
/// (dst[4·chunks, 8·chunks)), so that the inputs of a stride-2 tap are contiguous. Pieces with
/// no row end in reach (all but the segments at the ends) are plain vector moves.
template <int S>
inline void copy_row(const float* row, int at, int chunks, int width, float* dst) {
  constexpr int kIn = 4 * S;                    // inputs per output vector
  if (at >= 0 && at + kIn * chunks <= width) {  // the usual case: no end in reach
    for (int c = 0; c < chunks; ++c, at += kIn) {
      if constexpr (S == 1) {
        wasm_v128_store(dst + 4 * c, wasm_v128_load(row + at));
      } else {
        const v128_t v0 = wasm_v128_load(row + at), v1 = wasm_v128_load(row + at + 4);
        wasm_v128_store(dst + 4 * c, wasm_i32x4_shuffle(v0, v1, 0, 2, 4, 6));
        wasm_v128_store(dst + 4 * (chunks + c), wasm_i32x4_shuffle(v0, v1, 1, 3, 5, 7));
      }
    }
    return;
  }
  for (int c = 0; c < chunks; ++c, at += kIn) {
    alignas(16) float t[kIn];
    for (int i = 0; i < kIn; ++i) t[i] = at + i >= 0 && at + i < width ? row[at + i] : 0.0f;
    if constexpr (S == 1) {
      wasm_v128_store(dst + 4 * c, wasm_v128_load(t));
    } else {
      const v128_t v0 = wasm_v128_load(t), v1 = wasm_v128_load(t + 4);
      wasm_v128_store(dst + 4 * c, wasm_i32x4_shuffle(v0, v1, 0, 2, 4, 6));
      wasm_v128_store(dst + 4 * (chunks + c), wasm_i32x4_shuffle(v0, v1, 1, 3, 5, 7));
    }
  }
}

/// A run of consecutive segments whose row pieces are copied together.
struct SegmentRun {
  int lo;          // input x of the first segment's first copied element
  int step;        // input x from one segment to the next (8 · stride)
  int nseg;        // segments in the run
  int chunks;      // vectors per copied row (per parity at stride 2)
  int width;       // the input rows' length
  int row_floats;  // floats per copied row
};

/// Copies of every row's pieces for each segment of the run: segment q's copy of row r at
/// buf + (q · nrows + r) · row_floats. A row's pieces for all segments are copied together, so
/// its cache lines are used up at once (other rows, 4 KiB multiples apart, would evict them).
template <int S>
inline void copy_segments(const float* xb, const RowRef* rows, int nrows, const SegmentRun& run, float* buf) {
  const std::ptrdiff_t seg_floats = static_cast<std::ptrdiff_t>(nrows) * run.row_floats;
  for (int r = 0; r < nrows; ++r) {
    const float* row = xb + rows[r].in;
    float* dst = buf + static_cast<std::ptrdiff_t>(r) * run.row_floats;
    for (int q = 0; q < run.nseg; ++q, dst += seg_floats)
      copy_row<S>(row, run.lo + q * run.step, run.chunks, run.width, dst);
  }
}

}  // namespace qsmcore::kernels::wasm
