#!/usr/bin/env bash
# oneDNN conv throughput inside qsmcore against the machine's FP32 peak (measured by
# bench/fma_peak.cpp) and against ONNX Runtime on the same one-layer model, same threads:
# a 3x3x3 conv 32 -> 32 channels (+ ReLU) at 128^3, 2·32·32·27·128³ = 116 GFLOP per pass.
# Then per layer shape of the anchor U-Net (base 32, its 3×3×3 convs at their level's size for
# a 128³ input) the effective GFLOP/s (direct-convolution FLOPs / time) of oneDNN's direct conv and
# of the native Winograd F(2³,3³) (issue #50; bench/conv_winograd.cpp), against the same peak;
# LAYERS=0 skips it (it takes minutes: the 128³ layers are seconds each).
# Usage: bench/conv_gflops.sh [THREADS] [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
repeat=${2:-3}
work=.cache/bench
mkdir -p "$work"
g++ -O3 -march=native -fopenmp bench/fma_peak.cpp -o "$work/fma_peak"
peak=$("$work/fma_peak" "$threads")
[ -f "$work/conv32.onnx" ] || /usr/bin/python3 - "$work/conv32.onnx" <<'PY'
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Conv3d(32, 32, 3, padding=1), torch.nn.ReLU()).eval()
torch.onnx.export(m, torch.randn(1, 32, 16, 16, 16), sys.argv[1], input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {2: "d", 3: "h", 4: "w"}}, opset_version=17)
PY
x=$work/x32c_128.npy
[ -f "$x" ] || /usr/bin/python3 tools/testnets/make_inputs.py "$x" 1 32 128 128 128 >/dev/null
flop=$(awk 'BEGIN { print 2*32*32*27*128^3 }')
ours=$(build/qsm onnx run "$work/conv32.onnx" --in input="$x" --out "$work/o_conv" --threads "$threads" \
  --repeat $((repeat + 1)) | sed -n 's/^median of [0-9]* planned runs: \([0-9.]*\) s/\1/p')
ort=$(node tools/ort/run.js "$work/conv32.onnx" --in input="$x" --out "$work/o_conv_ort" --threads "$threads" \
  --repeat "$repeat" | grep -o '"median_ms":[0-9.]*' | cut -d: -f2 | awk '{print $1/1000}')
awk -v f="$flop" -v o="$ours" -v r="$ort" -v p="$peak" 'BEGIN {
  printf "%-28s | %10s %10s %6s\n", "3x3x3 conv 32->32 at 128^3", "ours", "ORT", "ratio"
  printf "%-28s | %10.3f %10.3f %6.2f\n", "time s", o, r, o/r
  printf "%-28s | %10.1f %10.1f %6.2f\n", "GFLOP/s", f/o/1e9, f/r/1e9, (f/o)/(f/r)
  printf "%-28s | %9.0f%% %9.0f%%\n", "of FP32 peak (" sprintf("%.0f", p) " GFLOP/s)", 100*f/o/1e9/p, 100*f/r/1e9/p }'
echo "threads=$threads, median of $repeat runs each (ours: after the planning run); peak measured by bench/fma_peak.cpp"
[ "${LAYERS:-1}" = 0 ] && exit 0
echo
echo "per layer (c->m at side^3), FP32 peak $peak GFLOP/s; GF/s columns: direct-conv FLOPs / time"
flock /tmp/qsm-build.lock ninja -C build qsm_bench_conv_winograd >/dev/null
build/tests/qsm_bench_conv_winograd "$threads" "$repeat" 32,32,128 64,32,128 32,64,64 64,64,64 128,64,64 64,128,32 \
  128,128,32 256,128,32 128,256,16 256,256,16 512,256,16 256,512,8 512,512,8
