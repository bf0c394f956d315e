#!/usr/bin/env bash
# Activation residency (issue #16) on full-size twins (tools/twins/make --full): each network on a
# D×H×W brain volume padded to the network's size divisor (as qsm run feeds it), unbudgeted, then under budgets of 1/2, 1/4 and 1/8 of its unbudgeted peak and at
# the least budget its spilled plan can run in (from the refusal of a smaller one). For each run
# that fits: bitwise equality with the unbudgeted output, the process's peak RSS against the
# budget, the time ratio to the unbudgeted run (same threads, same machine, one after the other)
# and the bytes spilled; a budget below the least is printed as refused, with the least.
# Usage: bench/activation_spill.sh [SHAPE=181x217x181] [THREADS=2] [MODELS="xqsm qsmnet nextqsm-vjp"]
# RESIDENCY=stream:host=0 (for example) runs the budgeted runs with that weight residency, so the
# budget is left to the activations; the unbudgeted run, the time ratio's base, stays fully resident.
set -euo pipefail
cd "$(dirname "$0")/.."
shape=${1:-181x217x181}
threads=${2:-2}
models=${3:-"xqsm qsmnet nextqsm-vjp"}
qsm=$(realpath "${QSM:-build/qsm}")
twins=$PWD/.cache/twins-full
work=$PWD/.cache/bench/spill
mkdir -p "$work"
IFS=x read -r d h w <<<"$shape"
input_for() {  # model -> writes $work/$model.npy on the padded grid
  local id=${1%-vjp}
  local m
  m=$("$qsm" models show "$id" --json | /usr/bin/python3 -c "import json,sys;print(json.load(sys.stdin)['size_divisor'])")
  /usr/bin/python3 - "$work/$1.npy" "$d" "$h" "$w" "$m" <<'PY'
import sys, numpy as np
d, h, w, m = (int(v) for v in sys.argv[2:6])
shape = tuple(-(-n // m) * m for n in (d, h, w))
np.save(sys.argv[1], (np.random.default_rng(7).standard_normal((1, 1) + shape) * 0.05).astype(np.float32))
PY
}
residency=${RESIDENCY:-full}
run() {  # model out budget -> prints "status seconds"; report in $out.json
  local model=$1 out=$2 budget=$3
  local res=$residency
  [ "$budget" = none ] && res=full
  rm -rf "$out" "$out.json"
  local input
  input=$("$qsm" onnx info "$twins/$model.onnx" | awk '/^inputs/ && !done {getline; sub(":", "", $1); print $1; done = 1}')
  local t0 t1
  t0=$(date +%s.%N)
  if "$qsm" onnx run "$twins/$model.onnx" --in "$input=$work/$model.npy" --out "$out" --threads "$threads" \
      --mem-budget "$budget" --residency "$res" --spill-dir "$work" --report "$out.json" >"$out.log" 2>&1; then
    t1=$(date +%s.%N)
    echo "ok $(echo "$t1 - $t0" | bc)"
  else
    echo "refused 0"
  fi
}
printf '%-12s %-9s %14s %10s %14s %14s %8s %12s %8s\n' network budget "budget MiB" outcome "peak RSS MiB" "spilled MiB" \
  "time x" "bitwise" "least"
for model in $models; do
  [ -f "$twins/$model.onnx" ] || { echo "$model: no full-size twin in $twins (tools/twins/make --full)"; continue; }
  input_for "$model"
  read -r st base_s < <(run "$model" "$work/$model-none" none)
  [ "$st" = ok ] || { echo "$model: the unbudgeted run failed: $(tail -1 "$work/$model-none.log")"; continue; }
  peak=$(/usr/bin/python3 -c "import json;print(json.load(open('$work/$model-none.json'))['predicted_peak_bytes'])")
  rss=$(/usr/bin/python3 -c "import json;print(json.load(open('$work/$model-none.json'))['process_peak_rss_bytes']//1048576)")
  printf '%-12s %-9s %14s %10s %14s %14s %8s %12s %8s\n' "$model" none - ok "$rss" 0 1.00 - -
  least=""
  for frac in 2 4 8 least; do
    if [ "$frac" = least ]; then
      [ -n "$least" ] || continue
      budget=$least
    else
      budget=$((peak / frac))
    fi
    out="$work/$model-$frac"
    read -r st secs < <(run "$model" "$out" "$budget")
    if [ "$st" != ok ]; then
      least=$(grep -o 'spilled to disk it would need [0-9]*' "$out.log" | grep -o '[0-9]*$' || true)
      printf '%-12s %-9s %14s %10s %14s %14s %8s %12s %8s\n' "$model" "1/$frac" $((budget / 1048576)) refused - - - - \
        "${least:+$((least * 100 / peak))%}"
      continue
    fi
    eq=$(cmp -s "$out"/*.npy "$work/$model-none"/*.npy && echo equal || echo DIFFERS)
    /usr/bin/python3 - "$out.json" "$model" "$frac" "$budget" "$secs" "$base_s" "$eq" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
model, frac, budget, secs, base, eq = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
s = r["spill"]
label = "least" if frac == "least" else f"1/{frac}"
print(f"{model:<12} {label:<9} {budget // 1048576:>14} {'ok':>10} {r['process_peak_rss_bytes'] // 1048576:>14} "
      f"{(s['written_bytes'] + s['read_bytes']) // 1048576:>14} {secs / base:>8.2f} {eq:>12} {'':>8}")
PY
  done
done
