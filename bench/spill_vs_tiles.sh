#!/usr/bin/env bash
# Exact spilled whole-volume runs against tiled runs at the same budget (issue #16), the way a user
# runs them: `qsm run` on a brain-sized head phantom (qsm phantom, 181×217×181 at 1 mm) with the
# full-size twins' weights (tools/twins/make --full). For each network: the unbudgeted
# whole-volume run, then at 1/2, 1/4 and 1/8 of its predicted peak
#  - spilled: the whole volume within the budget (activations through the spill file): its time
#    against the unbudgeted run's, the process's peak RSS, the bytes spilled, and whether χ is the
#    unbudgeted χ bit for bit;
#  - tiled: the same budget with spilling off (--no-spill), so the run takes the largest tiles
#    that fit in memory: its time ratio, the tile, and χ's error against the whole-volume χ inside
#    the mask (RMS of the difference over the RMS of χ, and the largest difference over χ's range).
# Networks the registry does not tile (NeXtQSM) have no tiled column. A budget below what even the
# spilled whole volume needs is printed as refused. Each run is a fresh process, one after the other.
# Usage: bench/spill_vs_tiles.sh [SIZE=181,217,181] [THREADS=2] [MODELS="xqsm qsmnet nextqsm"]
# RESIDENCY=stream:host=0 (for example) runs the budgeted runs, spilled and tiled alike, with that
# weight residency (QSMnet's 379 MiB of weights alone exceed 1/8 of its peak); the unbudgeted run
# stays fully resident.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-181,217,181}
threads=${2:-2}
models=${3:-"xqsm qsmnet nextqsm"}
qsm=$(realpath "${QSM:-build/qsm}")
export QSM_MODEL_CACHE=$PWD/.cache/twins-full
work=$PWD/.cache/bench/tiles
mkdir -p "$work"
phantom=$work/phantom-${size//,/x}
[ -f "$phantom/local_field.nii.gz" ] || "$qsm" phantom --out "$phantom" --size "$size" --b0 3 >/dev/null

run() {  # model name budget [extra...] -> prints "ok seconds" or "refused 0"; report in $work/$name.json
  local model=$1 name=$2 budget=$3
  shift 3
  rm -f "$work/$name.nii.gz" "$work/$name.json"
  local t0 t1
  t0=$(date +%s.%N)
  if "$qsm" run "$model" --in "$phantom/local_field.nii.gz" --mask "$phantom/mask.nii.gz" --no-verify --quiet \
      --threads "$threads" --mem-budget "$budget" --spill-dir "$work" --out "$work/$name.nii.gz" \
      --report "$work/$name.json" "$@" >"$work/$name.log" 2>&1; then
    t1=$(date +%s.%N)
    echo "ok $(echo "$t1 - $t0" | bc)"
  else
    echo "refused 0"
  fi
}

compare() {  # whole.nii.gz other.nii.gz mask -> "bitwise" or "rel_rmse max_rel"
  /usr/bin/python3 - "$@" <<'PY'
import gzip, sys
import numpy as np
def load(p):
    raw = gzip.open(p).read()
    off = int(np.frombuffer(raw[108:112], np.float32)[0])
    dims = np.frombuffer(raw[40:56], np.int16)
    code = int(np.frombuffer(raw[70:72], np.int16)[0])
    dt = {16: np.float32, 64: np.float64, 2: np.uint8, 4: np.int16}[code]
    n = int(np.prod(dims[1:1 + dims[0]]))
    return np.frombuffer(raw[off:off + n * np.dtype(dt).itemsize], dt).astype(np.float64)
a, b, m = (load(p) for p in sys.argv[1:4])
if open(sys.argv[1], 'rb').read() == open(sys.argv[2], 'rb').read() or np.array_equal(a, b):
    print("bitwise")
    sys.exit()
m = m > 0.5
d = (b - a)[m]
print(f"{np.sqrt(np.mean(d ** 2)) / np.sqrt(np.mean(a[m] ** 2)) * 100:.1f}% {np.abs(d).max() / np.ptp(a[m]) * 100:.1f}%")
PY
}

field() {  # report key path -> value
  /usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval('r' + sys.argv[2]))" "$@"
}

printf '%-8s %-6s %9s | %-8s %7s %9s %10s %-8s | %-8s %7s %6s %9s %8s\n' network budget MiB spilled "time x" "RSS MiB" \
  "moved MiB" "χ" tiled "time x" tile "rel RMSE" "max err"
for model in $models; do
  read -r st base < <(run "$model" "$model-none" none)
  [ "$st" = ok ] || { echo "$model: the unbudgeted run failed: $(tail -1 "$work/$model-none.log")"; continue; }
  peak=$(field "$work/$model-none.json" "['memory']['predicted_peak_bytes']")
  rss=$(($(field "$work/$model-none.json" "['memory']['process_peak_rss_bytes']") / 1048576))
  printf '%-8s %-6s %9s | %-8s %7s %9s %10s %-8s |\n' "$model" none $((peak / 1048576)) ok 1.00 "$rss" 0 -
  tileable=$("$qsm" models show "$model" --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['tiled'])")
  for frac in 2 4 8; do
    budget=$((peak / frac))
    read -r st secs < <(run "$model" "$model-$frac" "$budget" --residency "${RESIDENCY:-full}")
    if [ "$st" = ok ]; then
      moved=$((($(field "$work/$model-$frac.json" "['spill']['written_bytes']") + \
        $(field "$work/$model-$frac.json" "['spill']['read_bytes']")) / 1048576))
      srss=$(($(field "$work/$model-$frac.json" "['memory']['process_peak_rss_bytes']") / 1048576))
      sx=$(echo "scale=2; $secs / $base" | bc)
      eq=$(compare "$work/$model-none.nii.gz" "$work/$model-$frac.nii.gz" "$phantom/mask.nii.gz")
      [ "$eq" = bitwise ] || eq="DIFFERS"
      spilled="ok"
    else
      sx=- srss=- moved=- eq=- spilled="refused"
    fi
    tiled=- tx=- tile=- err="- -"
    if [ "$tileable" = True ]; then
      read -r st secs < <(run "$model" "$model-$frac-tiled" "$budget" --no-spill --residency "${RESIDENCY:-full}")
      if [ "$st" = ok ]; then
        tiled=ok
        tx=$(echo "scale=2; $secs / $base" | bc)
        tile=$(grep -o 'tiles of core [0-9]*' "$work/$model-$frac-tiled.json" | sed -n 1p | grep -o '[0-9]*$' || echo whole)
        err=$(compare "$work/$model-none.nii.gz" "$work/$model-$frac-tiled.nii.gz" "$phantom/mask.nii.gz")
      else
        tiled=refused
      fi
    fi
    read -r rel mx <<<"$err"
    printf '%-8s %-6s %9s | %-8s %7s %9s %10s %-8s | %-8s %7s %6s %9s %8s\n' "$model" "1/$frac" $((budget / 1048576)) \
      "$spilled" "$sx" "$srss" "$moved" "$eq" "$tiled" "$tx" "$tile" "$rel" "${mx:--}"
  done
done
