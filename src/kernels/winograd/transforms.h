// The input and output transforms of F(2×2×2, 3×3×3) (Lavin & Gray, 2016, nested along the
// three axes as in Jia et al., PPoPP'18), one block of tiles at a time, in a build per x86 ISA
// chosen at run time (transforms.cpp): the build itself assumes no ISA beyond the baseline.
#pragma once
#include <cstdint>
#include <span>

#include "graph/post_op.h"

namespace qsmcore::kernels::winograd {

constexpr int kPoints = 64;  // 4×4×4 transform points per tile
constexpr int kChunk = 16;   // channels a transform works on at once (one AVX-512 vector)

/// A volume's tiles: 2×2×2 outputs each, td × th × tw of them, x fastest. d is the output's
/// depth; the input has di planes, output plane z reading input planes z − pz … z − pz + 2 (those
/// outside [0, di) are zeros): di = d, pz = 1 for a whole volume; a depth window of a conv chain
/// (kernels/onednn/conv_chain.cpp) passes its own, with pz 0 or 1 and the planes around it.
struct TileGrid {
  int c = 0, m = 0;  // input, output channels
  int d = 0, h = 0, w = 0;
  int td = 0, th = 0, tw = 0;
  int di = 0, pz = 1;
  std::int64_t tiles() const { return static_cast<std::int64_t>(td) * th * tw; }
};

/// One block of tiles [t0, t0 + count) of one batch item; rows [count, tb) of V are zeros.
/// vrow: V's row stride in floats (0: g->c); wider where several inputs (a conv chain's parts
/// over a split concat) fill one V side by side, each from its own column (v passed offset).
struct BlockArgs {
  const TileGrid* g = nullptr;
  std::int64_t t0 = 0;
  int count = 0, tb = 0;
  int vrow = 0;
};

/// The output side of a block: bias (padded with zeros to a whole chunk), the post-ops in order,
/// the Sum addend (or null) and the output, both [d][h][w][m] of this batch item.
struct OutputArgs {
  const float* bias = nullptr;
  std::span<const graph::PostOp> post;
  const float* add = nullptr;
  float* y = nullptr;
};

/// V[p][i][ic] = (Bᵀ d B) of tile t0 + i (zero padded at the faces), for the 64 points p.
using InputFn = void (*)(const BlockArgs& b, const float* x, float* v);
/// y of tile t0 + i = Aᵀ M[·][i] A + bias, then the post-ops, stored where inside the volume.
using OutputFn = void (*)(const BlockArgs& b, const float* mres, const OutputArgs& o);

struct TransformFns {
  InputFn input;
  OutputFn output;
  const char* isa;  // "avx512", "avx2" or "baseline"
};

/// The transforms built for the best ISA this CPU has, at most AVX2 where `avx512` is false (the
/// caller passes oneDNN's effective ISA, so ONEDNN_MAX_CPU_ISA=AVX2 caps both alike).
TransformFns transforms_for_cpu(bool avx512);

}  // namespace qsmcore::kernels::winograd
