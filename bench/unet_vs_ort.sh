#!/usr/bin/env bash
# Engine benchmark: the test 3-D U-Net at full width (base 32, 22.6 M parameters) at 64³, 128³
# and 160×192×160, qsmcore (oneDNN backend) vs ONNX Runtime (onnxruntime-node, defaults), same
# thread count, same machine, same run. qsmcore runs once per convolution algorithm (issue #50:
# QSM_CONV_ALGO=direct, oneDNN's direct conv everywhere; auto, the native Winograd where
# src/kernels/winograd/choice.cpp's measured table predicts it faster; bf16, --precision bf16:
# every conv direct on bf16 inputs and weights, f32 sums, where the CPU has avx512_bf16 or AMX,
# its Δ/range the cost in accuracy against ORT's f32). Prints one table: median
# time of the planned runs and whole-process peak RSS (/usr/bin/time) of each, the ratios to ORT,
# and each output's largest difference from ORT's over the range of ORT's.
# Usage: bench/unet_vs_ort.sh [THREADS] [REPEAT] [SHAPES...]   (shapes as DxHxW)
#        ALGOS="direct auto bf16" (default) picks the qsmcore rows.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
repeat=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(64x64x64 128x128x128 160x192x160)
read -r -a algos <<<"${ALGOS:-direct auto bf16}"
work=.cache/bench
mkdir -p "$work"
[ -f "$work/unet3d_b32.onnx" ] || /usr/bin/python3 tools/testnets/export_testnets.py --out "$work" --base 32 >/dev/null
model=$work/unet3d_b32.onnx
maxdiff() {  # largest |a − b| over the range of b, for the one .npy in each folder
  /usr/bin/python3 -c 'import sys, glob, numpy as np
a = np.load(glob.glob(sys.argv[1] + "/*.npy")[0]).astype(np.float64)
b = np.load(glob.glob(sys.argv[2] + "/*.npy")[0]).astype(np.float64)
print("%.1e" % (np.abs(a - b).max() / (b.max() - b.min())) if np.isfinite(a).all() else "nonfinite")' "$1" "$2"
}
printf '%-12s %-8s | %10s %10s %6s | %10s %10s %6s | %9s\n' shape algo "ours s" "ORT s" ratio "ours MiB" "ORT MiB" \
  ratio "Δ/range"
for s in "${shapes[@]}"; do
  IFS=x read -r d h w <<<"$s"
  x=$work/x_$s.npy
  [ -f "$x" ] || /usr/bin/python3 tools/testnets/make_inputs.py "$x" 1 1 "$d" "$h" "$w" >/dev/null
  ort_log=$work/ort_$s.log
  /usr/bin/time -f 'maxrss_kb %M' node tools/ort/run.js "$model" --in input="$x" --out "$work/o_ort" \
    --threads "$threads" --repeat "$repeat" >"$ort_log" 2>&1
  ort_t=$(grep -o '"median_ms":[0-9.]*' "$ort_log" | cut -d: -f2 | awk '{print $1/1000}')
  ort_kb=$(sed -n 's/^maxrss_kb //p' "$ort_log")
  for algo in "${algos[@]}"; do
    ours_log=$work/ours_${s}_$algo.log
    precision=f32 conv_algo=$algo
    [ "$algo" != bf16 ] || precision=bf16 conv_algo=auto  # bf16 runs every conv direct
    QSM_CONV_ALGO=$conv_algo /usr/bin/time -f 'maxrss_kb %M' build/qsm onnx run "$model" --in input="$x" \
      --out "$work/o_ours_$algo" --threads "$threads" --repeat $((repeat + 1)) --precision "$precision" \
      >"$ours_log" 2>&1
    ours_t=$(sed -n 's/^median of [0-9]* planned runs: \([0-9.]*\) s/\1/p' "$ours_log")
    [ -n "$ours_t" ] || ours_t=$(sed -n 's/.*first run (plan + run) \([0-9.]*\) s/\1/p' "$ours_log")
    ours_kb=$(sed -n 's/^maxrss_kb //p' "$ours_log")
    diff=$(maxdiff "$work/o_ours_$algo" "$work/o_ort")
    awk -v s="$s" -v a="$algo" -v ot="$ours_t" -v rt="$ort_t" -v om="$ours_kb" -v rm="$ort_kb" -v df="$diff" 'BEGIN {
      printf "%-12s %-8s | %10.2f %10.2f %6.2f | %10.0f %10.0f %6.2f | %9s\n", s, a, ot, rt, ot/rt, om/1024, rm/1024,
        om/rm, df }'
  done
done
echo "threads=$threads, median of $repeat runs each (ours: after the planning run); peak RSS of the whole process"
