#!/usr/bin/env bash
# The native 3-D Winograd conv F(2³,3³) (src/kernels/winograd/, issue #50) against oneDNN's
# direct conv on 3×3×3 layers (+ bias, ReLU), side by side in one process: median times, their
# ratio (Winograd / direct: below 1 is faster), effective GFLOP/s (direct-convolution FLOPs /
# time) and the largest difference of the outputs over their range. bench/conv_winograd.cpp.
# Usage: bench/conv_winograd.sh [THREADS] [REPEAT] [C,M,D ...]   (default: 32->32 and 64->64 at
# 64³ and 128³, 16->16 at 128³). QSM_WINOGRAD_TILE_BLOCK=N overrides the tiles per block.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
repeat=${2:-3}
shift $(($# < 2 ? $# : 2))
flock /tmp/qsm-build.lock ninja -C build qsm_bench_conv_winograd >/dev/null
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(32,32,64 64,64,64 16,16,128 32,32,128 64,64,128)
build/tests/qsm_bench_conv_winograd "$threads" "$repeat" "${shapes[@]}"
