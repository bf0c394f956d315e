#!/usr/bin/env bash
# A host's estimate of a tiled run's peak from the registry's figures only, against what
# `qsm run --tile` measures (memory.md §4.4, issue #54). One table: network, tile config, tiles in
# flight, the estimate, the measured accounted peak (the run's report, memory.measured_peak_bytes:
# the engine's high-water above what the process held before the network), measured / estimate.
#
#   bench/tile_budget.sh [WEIGHTS_DIR]
#
# WEIGHTS_DIR holds the tiled networks' ONNX files: the full-size twins (tools/twins/make --full
# --only xqsm,qsmnet,qsmnet-plus,ir2qsm; default .cache/twins-full) or the real weights; a
# network whose file is missing is listed as skipped. qsmcore-invnet ships with qsmcore. The
# registry's figures were measured on the full-size twins, so reduced twins give meaningless
# ratios. SIZE (default 96) is the phantom's edge, THREADS (default 2) the threads, CONFIGS the
# tile configs (default "32,8 48,8 64,4"), QSM the qsm binary (default build/qsm).
#
# The estimate (memory.md §4.3-4.4), from `qsm models show ID --json` alone:
#   n = min(THREADS, tiles) in flight (no budget), p = ceil((core + 2 halo) / d) d,
#   estimate = resident + inference_fixed + tiled_wrapper_bytes(voxels) + n · tile_bytes(p)
# with tile_bytes(p) = native_tile_fixed_bytes + native_tile_bytes_per_voxel · p³, or below the
# last of native_tile_small's [voxels, bytes] points the chord between them (TileCost::bytes).
# Per-tile growth: the same run with THREADS + 1 threads (one more tile in flight, one thread per
# graph run in both when THREADS >= 2) minus the first; tile_bytes / growth must lie in
# [1, 1.05] (issue #54: +5 %/−0 %).
# (tiled_wrapper_bytes = 8 B a voxel for the output and qsmcore-invnet's TKD prior, + 4 KiB; the
# phantom's field is in ppm, so the wrapper reads it in place), and for qsmcore-invnet at least the TKD step before the tiles (the field, its
# ppm copy's masked copy, FFT buffer, spectrum and kernel: 5 volumes of f64 beside the prior and
# the field). The wasm32 rows need the wasm build's `qsm-node.js` and are not run here (see the
# report of issue #54).
set -euo pipefail
cd "$(dirname "$0")/.."
QSM=${QSM:-build/qsm}
weights=${1:-.cache/twins-full}
size=${SIZE:-96}
threads=${THREADS:-2}
configs=${CONFIGS:-"32,8 48,8 64,4"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$QSM" phantom --out "$work/ph" --size "$size" --b0 3 >/dev/null

ids=$("$QSM" models --json | python3 -c 'import json,sys; print(" ".join(m["id"] for m in json.load(sys.stdin) if m["tiled"]))')
printf '| network | tile (core,halo) | patch | in flight | estimate MB | measured MB | measured / estimate | growth per tile MB | tile_bytes MB | tile_bytes / growth |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for id in $ids; do
  spec="$work/$id.json"
  "$QSM" models show "$id" --json >"$spec"
  if [ "$id" != qsmcore-invnet ] && [ ! -f "$weights/$id.onnx" ]; then
    printf '| %s | - | - | - | - | - | skipped: no %s |\n' "$id" "$weights/$id.onnx"
    continue
  fi
  for cfg in $configs; do
    report="$work/$id-$cfg.json"
    for t in "$threads" $((threads + 1)); do
      QSM_MODEL_DIR="$weights" "$QSM" run "$id" --in "$work/ph/local_field.nii.gz" --mask "$work/ph/mask.nii.gz" \
        --tile "$cfg" --threads "$t" --mem-budget none --no-verify --quiet \
        --out "$work/out.nii.gz" --report "$work/$id-$cfg-$t.json" >/dev/null
    done
    cp "$work/$id-$cfg-$threads.json" "$report"
    python3 - "$spec" "$report" "$cfg" "$size" "$threads" "$work/$id-$cfg-$((threads + 1)).json" <<'EOF'
import json, math, sys
spec, report = (json.load(open(p)) for p in sys.argv[1:3])
core, halo = (int(v) for v in sys.argv[3].split(","))
size, threads = int(sys.argv[4]), int(sys.argv[5])
mem = spec["memory"]
d = max([spec["size_divisor"]] + spec["pad_multiple"])
p = math.ceil((core + 2 * halo) / d) * d
voxels = size**3
n = min(threads, report["tiles"])  # a host counts the tiles whose core holds a mask voxel
assert report["tiles_in_flight"] == n, f"qsmcore ran {report['tiles_in_flight']} tiles in flight, the host expects {n}"
volumes = 2 if spec["id"] == "qsmcore-invnet" else 1  # the field is in ppm: read in place
wrapper = volumes * 8 * voxels + 4096
def tile_bytes(v):
    pts = spec["native_tile_small"] or []
    if pts and v < pts[-1][0]:
        if v <= pts[0][0]:
            return pts[0][1]
        (a, ab), (b, bb) = next((pts[i - 1], pts[i]) for i in range(1, len(pts)) if pts[i][0] >= v)
        return ab if bb <= ab else ab + -(-(bb - ab) * (v - a) // (b - a))
    return spec["native_tile_fixed_bytes"] + spec["native_tile_bytes_per_voxel"] * v
estimate = mem["resident_bytes"] + mem["inference_fixed_bytes"] + wrapper + n * tile_bytes(p**3)
if spec["id"] == "qsmcore-invnet":
    estimate = max(estimate, mem["resident_bytes"] + (5 + 2) * 8 * voxels)
measured = report["memory"]["measured_peak_bytes"]
more = json.load(open(sys.argv[6]))
growth = more["memory"]["measured_peak_bytes"] - measured if more["tiles_in_flight"] == n + 1 else None
tb = tile_bytes(p**3)
g = f"{growth / 1e6:.2f} | {tb / 1e6:.2f} | {tb / growth:.3f}" if growth else f"- | {tb / 1e6:.2f} | - (fewer tiles)"
print(f"| {spec['id']} | {core},{halo} | {p}³ | {n} | {estimate / 1e6:.1f} | {measured / 1e6:.1f} | {measured / estimate:.3f} | {g} |")
EOF
  done
done
