#!/usr/bin/env bash
# Memory benchmark on the full-size twins (tools/twins/make --full): for each network, qsmcore
# with its memory passes (depth-slab conv chains etc.), qsmcore with whole-volume convolutions
# (--no-conv-chains), and ONNX Runtime (onnxruntime-node, defaults), same thread count, same
# input, same run. Prints one table: median time of the planned runs and whole-process peak RSS
# (/usr/bin/time) of each, and the ratios ours/ORT.
# Usage: bench/twins_memory_vs_ort.sh [THREADS] [REPEAT] [SIZE] [NETS...]   (SIZE: cube edge)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
repeat=${2:-2}
size=${3:-128}
shift $(( $# > 3 ? 3 : $# )) || true
nets=("$@")
[ ${#nets[@]} -gt 0 ] || nets=(xqsm qsmnet lpcnn ir2qsm nextqsm-vjp)
twins=.cache/twins-full
work=.cache/bench
mkdir -p "$work"
[ -f "$twins/qsmnet.onnx" ] || tools/twins/make --full --out "$twins" >/dev/null
x=$work/x_${size}.npy
[ -f "$x" ] || /usr/bin/python3 tools/testnets/make_inputs.py "$x" 1 1 "$size" "$size" "$size" >/dev/null
ours() {  # model input_name extra_flag -> "seconds kb"
  local log=$work/ours_$$.log
  /usr/bin/time -f 'maxrss_kb %M' build/qsm onnx run "$1" --in "$2=$x" --out "$work/o_ours" \
    --threads "$threads" --repeat $((repeat + 1)) $3 >"$log" 2>&1
  echo "$(sed -n 's/^median of [0-9]* planned runs: \([0-9.]*\) s.*/\1/p' "$log") $(sed -n 's/^maxrss_kb //p' "$log")"
}
printf '%-12s | %8s %8s %8s %6s | %8s %8s %8s %6s\n' network "ours s" "whole s" "ORT s" ratio \
  "ours MiB" "whole" "ORT MiB" ratio
for n in "${nets[@]}"; do
  model=$twins/$n.onnx
  input=$(build/qsm onnx info "$model" | sed -n '/^inputs:/{n;s/^ *\([^:]*\):.*/\1/p}')
  read -r ot om <<<"$(ours "$model" "$input" "")"
  read -r wt wm <<<"$(ours "$model" "$input" --no-conv-chains)"
  log=$work/ort_$$.log
  /usr/bin/time -f 'maxrss_kb %M' node tools/ort/run.js "$model" --in "$input=$x" --out "$work/o_ort" \
    --threads "$threads" --repeat "$repeat" >"$log" 2>&1
  rt=$(grep -o '"median_ms":[0-9.]*' "$log" | cut -d: -f2 | awk '{print $1/1000}')
  rm_=$(sed -n 's/^maxrss_kb //p' "$log")
  awk -v n="$n" -v ot="$ot" -v wt="$wt" -v rt="$rt" -v om="$om" -v wm="$wm" -v rm="$rm_" 'BEGIN {
    printf "%-12s | %8.2f %8.2f %8.2f %6.2f | %8.0f %8.0f %8.0f %6.2f\n", n, ot, wt, rt, ot/rt, om/1024, wm/1024, rm/1024, om/rm }'
done
echo "threads=$threads, ${size}³ input, median of $repeat runs each (ours: after the planning run); peak RSS of the whole process"
echo "ratio = ours (default passes) / ONNX Runtime; 'whole' = ours with --no-conv-chains"
