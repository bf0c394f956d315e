#!/usr/bin/env bash
# What the OS sees against what the engine accounts: every full-size twin (tools/twins/make
# --full) at SIZE³ under each weight-residency policy. For each run, the accounted peak (the
# run report's measured_peak_bytes: every engine byte, weights included) and the whole-process
# peak RSS as the kernel reports it (/usr/bin/time), and their difference. Issue #13's bound is
# RSS <= accounted + 64 MiB; a row over it is marked.
# Usage: bench/rss_vs_accounting.sh [SIZE=96] [THREADS=2] [NETS...]
#   QSM=path/to/qsm to measure another build (e.g. an older one, for a before/after table).
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-96}
threads=${2:-2}
shift $(( $# > 2 ? 2 : $# )) || true
qsm=${QSM:-build/qsm}
twins=.cache/twins-full
work=.cache/bench/rss
mkdir -p "$work"
[ -f "$twins/qsmnet.onnx" ] || tools/twins/make --full --out "$twins" >/dev/null
policies=(full layerwise stream:host=0 stream:host=64MiB)
bound_mib=64

# One line per model file: "file --in name=path ..." with inputs of the file's declared shape
# (read by `qsm onnx info`), every symbolic dimension set to SIZE (fixed-patch networks keep
# their patch). NETS, when given, are file names without .onnx.
/usr/bin/python3 - "$qsm" "$twins" "$work" "$size" "$@" >"$work/runs.txt" <<'PY'
import glob, os, subprocess, sys
import numpy as np
qsm, twins, work, size, only = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), set(sys.argv[5:])
rng = np.random.default_rng(96)
for path in sorted(glob.glob(os.path.join(twins, "*.onnx"))):
    name = os.path.basename(path)[:-5]
    if only and name not in only:
        continue
    info = subprocess.run([qsm, "onnx", "info", path], capture_output=True, text=True, check=True).stdout
    block = info.split("inputs:\n", 1)[1].split("outputs:", 1)[0]
    args = []
    for line in block.strip().splitlines():
        iname, rest = line.strip().split(":", 1)
        dims = rest.split("[", 1)[1].rstrip("]").split(",")
        shape = [int(d) if d.strip().lstrip("-").isdigit() else size for d in dims if d.strip()]
        if iname in ("mask", "border"):
            x = np.ones(shape, np.float32)
        elif int(np.prod(shape)) <= 3:
            x = np.full(shape, 0.5, np.float32)  # te, b0, a B0 direction: small positive scalars
        else:
            x = rng.standard_normal(shape).astype(np.float32)
        p = os.path.join(work, f"{name}.{iname}.{size}.npy")
        if not os.path.exists(p):
            np.save(p, x)
        args.append(f"--in {iname}={p}")
    print(os.path.basename(path), " ".join(args))
PY

printf '%-22s %-18s | %12s %10s %10s\n' "model" "policy" "accounted" "peak RSS" "RSS - acc"
over=0
while read -r file ins; do
  for p in "${policies[@]}"; do
    log=$work/run.log rep=$work/report.json
    rm -f "$rep"
    # shellcheck disable=SC2086  # $ins holds several --in arguments
    if ! /usr/bin/time -f 'maxrss_kb %M' "$qsm" onnx run "$twins/$file" $ins --out "$work/out" \
        --threads "$threads" --residency "$p" --mem-budget none --report "$rep" >"$log" 2>&1; then
      printf '%-22s %-18s | failed: %s\n' "$file" "$p" "$(grep -m1 'qsm:' "$log" || tail -1 "$log")"
      continue
    fi
    kb=$(sed -n 's/^maxrss_kb //p' "$log")
    acc=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['measured_peak_bytes'])" "$rep")
    awk -v f="$file" -v p="$p" -v a="$acc" -v k="$kb" -v b="$bound_mib" 'BEGIN {
      am = a / 1048576; rm = k / 1024; d = rm - am
      printf "%-22s %-18s | %8.0f MiB %6.0f MiB %6.0f MiB%s\n", f, p, am, rm, d, (d > b ? "  OVER" : "") }'
    awk -v a="$acc" -v k="$kb" -v b="$bound_mib" 'BEGIN { exit !(k / 1024 - a / 1048576 > b) }' && over=$((over + 1))
  done
done <"$work/runs.txt"
echo "${size}³ inputs, $threads threads; accounted = the run report's measured peak, RSS = /usr/bin/time's max RSS"
echo "rows over accounted + ${bound_mib} MiB: $over"
