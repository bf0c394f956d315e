#!/usr/bin/env bash
# Weight-residency benchmark: the full-size QSMnet architecture twin (397.8 MB of weights,
# tools/twins) at 128³ under each policy — FullyResident, LayerwiseHost, DenseDiskStream with a
# host budget of 0 (direct disk -> packed), 32, 64, 128, 256 MB and unbounded — then batches of
# 4 tiles (64³) run layer-major. Prints one table: accounted weight memory (peak), whole-process
# peak RSS (/usr/bin/time), the median time of the planned runs, and the ratios to FullyResident
# and to ONNX Runtime (onnxruntime-node, same threads, same machine, same run).
# Usage: bench/residency_qsmnet.sh [THREADS] [REPEAT] [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
repeat=${2:-2}
size=${3:-128}
tile=$((size / 2))
work=.cache/bench/residency
mkdir -p "$work"
model=.cache/twins-full/qsmnet.onnx
[ -f "$model" ] || tools/twins/make --full --only qsmnet --out .cache/twins-full >/dev/null
x=$work/field_$size.npy
xt=$work/field_$tile.npy
[ -f "$x" ] || /usr/bin/python3 tools/testnets/make_inputs.py "$x" 1 1 "$size" "$size" "$size" >/dev/null
[ -f "$xt" ] || /usr/bin/python3 tools/testnets/make_inputs.py "$xt" 1 1 "$tile" "$tile" "$tile" >/dev/null

# run NAME POLICY INPUT BATCH -> "weights_mib rss_mib seconds"
run() {
  local name=$1 policy=$2 input=$3 batch=$4
  local log=$work/$name.log rep=$work/$name.json
  /usr/bin/time -f 'maxrss_kb %M' build/qsm onnx run "$model" --in field="$input" --out "$work/o_$name" \
    --threads "$threads" --repeat $((repeat + 1)) --residency "$policy" --batch "$batch" --report "$rep" >"$log" 2>&1
  local kb
  kb=$(sed -n 's/^maxrss_kb //p' "$log")
  /usr/bin/python3 - "$rep" "$kb" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['weights_peak_bytes'] / 2**20:.1f} {int(sys.argv[2]) / 1024:.0f} {r['median_run_seconds']:.2f}")
PY
}

printf '%-34s | %10s %10s %9s | %8s %8s\n' "policy (QSMnet twin)" "weights" "peak RSS" "time s" "vs full" "vs ORT"
ort_log=$work/ort.log
/usr/bin/time -f 'maxrss_kb %M' node tools/ort/run.js "$model" --in field="$x" --out "$work/o_ort" \
  --threads "$threads" --repeat "$repeat" >"$ort_log" 2>&1
ort_t=$(grep -o '"median_ms":[0-9.]*' "$ort_log" | cut -d: -f2 | awk '{print $1/1000}')
ort_kb=$(sed -n 's/^maxrss_kb //p' "$ort_log")
row() {  # label weights rss time full_time
  awk -v l="$1" -v w="$2" -v m="$3" -v t="$4" -v f="$5" -v o="$ort_t" 'BEGIN {
    printf "%-34s | %7.1f MiB %6.0f MiB %9.2f | %8.2f %8s\n", l, w, m, t, t / f, (o > 0 ? sprintf("%.2f", t / o) : "-") }'
}
read -r fw fm ft <<<"$(run full full "$x" 1)"
row "full ($size³)" "$fw" "$fm" "$ft" "$ft"
for p in "layerwise:depth=1" "stream:host=0" "stream:host=32MiB" "stream:host=64MiB" "stream:host=128MiB" \
         "stream:host=256MiB" "stream:host=16GiB"; do
  read -r w m t <<<"$(run "$(echo "$p" | tr ':=,' '___')" "$p" "$x" 1)"
  row "$p ($size³)" "$w" "$m" "$t" "$ft"
done
printf '%-34s | %7s     %6.0f MiB %9.2f | %8s %8s\n' "ONNX Runtime ($size³)" "-" "$((ort_kb / 1024))" "$ort_t" "-" "1.00"
ort_t=0  # the tile batches have no ORT row
read -r bw bm bt <<<"$(run batch_full full "$xt" 4)"
row "full (4 × $tile³ tiles)" "$bw" "$bm" "$bt" "$bt"
for p in "stream:host=0" "stream:host=64MiB"; do
  read -r w m t <<<"$(run "batch_$(echo "$p" | tr ':=,' '___')" "$p" "$xt" 4)"
  row "$p (4 × $tile³, layer-major)" "$w" "$m" "$t" "$bt"
done
echo "threads=$threads, median of $repeat runs after the planning run; weights = accounted peak of weight buffers"
echo "(raw, folded, packed) over load and runs; peak RSS of the whole process"
