// The native 3-D Winograd convolution F(2×2×2, 3×3×3) (issue #50): 3×3×3 windows, stride 1,
// dilation 1, pad 1 on every face, groups 1, fp32, channels-last activations (NDHWC, the layout
// the oneDNN backend keeps on AVX2 and AVX-512). The weights are transformed once, at
// construction; a run transforms its inputs and outputs per block of tiles, so its scratch is a
// few hundred KiB per thread whatever the volume. The oneDNN backend chooses it per layer
// (choice.h): standalone convs (kernels/onednn/conv.cpp) and the layers of depth-slab conv chains
// (kernels/onednn/conv_chain.cpp), through run_window.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/post_op.h"

namespace qsmcore::kernels::winograd {

/// The geometry: batch, input and output channels, and the spatial size (input = output, pad 1).
struct Conv3dShape {
  int n = 1, c = 0, m = 0;
  int d = 0, h = 0, w = 0;
};

/// A depth window of a batch-1 volume: d_out output planes from d_in input planes, output plane
/// z reading input planes z − pad_front … z − pad_front + 2 (zeros outside [0, d_in)): a conv
/// chain's slab, whose depth pads are the volume's at its faces and 0 inside.
struct DepthWindow {
  int d_out = 0, d_in = 0, pad_front = 1;
};

/// Whether F(2³, 3³) computes a conv of these geometry attributes: 3×3×3, stride 1, dilation 1,
/// pad 1 on every face, groups 1.
bool winograd_fits(const std::vector<std::int64_t>& kernel, const std::vector<std::int64_t>& strides,
                   const std::vector<std::int64_t>& dilations, const std::vector<std::int64_t>& pads,
                   std::int64_t groups);

class WinogradConv3d {
 public:
  /// weights [m][c][3][3][3] and bias [m] (or null), both finite; `post` as the graph fuses them
  /// (activations, Sum with its addend passed to run). tile_block: tiles per block (0: 40,
  /// the block whose batches do not alias in L1 on any shape measured; conv3d_winograd.cpp).
  WinogradConv3d(const Conv3dShape& s, const float* weights, const float* bias, std::vector<graph::PostOp> post,
                 int tile_block = 0);
  ~WinogradConv3d();
  WinogradConv3d(const WinogradConv3d&) = delete;
  WinogradConv3d& operator=(const WinogradConv3d&) = delete;

  /// Scratch a run on `threads` threads needs (a plan's scratch slot, or run's own).
  std::size_t scratch_bytes(int threads) const;
  /// Bytes of the transformed weights (accounted as Weights).
  std::int64_t packed_bytes() const;
  /// Bytes of the plain transformed weights, held while they are packed (at construction).
  std::int64_t derived_bytes() const;
  /// Tiles per block.
  int tile_block() const;
  /// "qsm:winograd_f2_3d+<the matmul's implementation>".
  std::string impl_name() const;

  /// x [n][d][h][w][c], y and the Sum addend `add` (null without a Sum; may be y itself)
  /// [n][d][h][w][m]. scratch: scratch_bytes(threads) bytes, 64-byte aligned. Results do not
  /// depend on `threads`.
  void run(const float* x, const float* add, float* y, std::byte* scratch, std::size_t scratch_size, int threads) const;
  /// One depth window (batch 1; h, w and the channels the construction's): x [d_in][h][w][c],
  /// y and add [d_out][h][w][m]. Runs on at most `threads` workers, fewer where the scratch holds
  /// fewer (scratch_bytes(1) each); results do not depend on either.
  void run_window(const float* x, const float* add, float* y, const DepthWindow& win, std::byte* scratch,
                  std::size_t scratch_size, int threads) const;
  /// The same with the input channels split over several inputs (a concatenation never made:
  /// a conv chain's parts), each [d_in][h][w][its c], the c adding up to the construction's, in
  /// the order of the weights' input channels.
  struct Input {
    const float* x = nullptr;
    int c = 0;
  };
  void run_window(std::span<const Input> xs, const float* add, float* y, const DepthWindow& win, std::byte* scratch,
                  std::size_t scratch_size, int threads) const;
  /// The same on max_threads() threads, with the scratch in an AccountedArray (category Scratch)
  /// freed on return.
  void run(const float* x, const float* add, float* y) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qsmcore::kernels::winograd
