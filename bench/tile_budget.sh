#!/usr/bin/env bash
# A host's estimate of a tiled run's peak from the registry's figures only, against what
# `qsm run --tile` measures (memory.md §4.4, issue #54). One table: network, heap, tile config,
# tiles in flight, the estimate, the measured accounted peak (the run's report,
# memory.measured_peak_bytes: the engine's high-water above what the process held before the
# network), estimate / measured (issue #54: within [1, 1.05], +5 %/−0 %), and the per-tile growth.
#
#   bench/tile_budget.sh [WEIGHTS_DIR]
#
# WEIGHTS_DIR holds the tiled networks' ONNX files: the full-size twins (tools/twins/make --full
# --only xqsm,qsmnet,qsmnet-plus,ir2qsm; default .cache/twins-full) or the real weights; a
# network whose file is missing is listed as skipped. qsmcore-invnet ships with qsmcore. The
# registry's figures were measured on the full-size twins, so reduced twins give meaningless
# ratios. SIZE (default 96) is the phantom's edge, THREADS (default 2) the threads, CONFIGS the
# tile configs (default "32,8 48,8 64,4"), QSM the qsm binary (default build/qsm), WASM=0 leaves
# out the wasm32 rows, WASM_DIR the wasm build (default build-wasm/mt), NATIVE=0 leaves out the
# first table (native and one-tile wasm32 rows) and runs the second only.
#
# The estimate is tiled_peak_bytes (qsmcore/tiling.h, memory.md §4.3-4.4) written out from
# `qsm models show ID --json` alone, the function the tiled wrappers reserve the same terms with:
#   n = min(THREADS, tiles) in flight (tile_concurrency with no budget), p = ceil((core + 2 halo) / d) d,
#   estimate = resident + inference_fixed + max(tiled_wrapper_bytes + n · tile_bytes(p), tiled_prepare_bytes)
# with tile_bytes(p) = native_tile_fixed_bytes + native_tile_bytes_per_voxel · p³, or below the
# last of native_tile_small's [voxels, bytes] points the chord between them (TileCost::bytes);
# tiled_wrapper_bytes = 8 B a voxel for the output and qsmcore-invnet's TKD prior, + 4 KiB (the
# phantom's field is in ppm: read in place); tiled_prepare_bytes (qsmcore-invnet only, its TKD
# prior before the tiles) = 3 f64 volumes (the copy TKD is given, the prior, the FFT's real
# buffer) + 24 B on each of (x/2 + 1)·y·z (the half spectrum, complex f64, and the kernel, f64)
# + 4 KiB. Per-tile growth: the same run with THREADS + 1 threads (one more tile in flight, one
# thread per graph run in both when THREADS >= 2) minus the first; tile_bytes / growth must lie
# in [1, 1.05].
#
# wasm32 rows: the Node build (WASM_DIR/qsm-node.js, run by tools/wasm/qsm.js) has the `onnx`
# commands only (no NIfTI reader in wasm32), so no `qsm run --tile` there; its tiled runs are the
# web page's (qsm_web_run, whose tile plan predicts with tiled_peak_bytes). What is measured here
# is the part that differs between the heaps: one tile's graph run, `onnx run` at the padded
# patch on 1 thread (a tile's run on a 2-thread pool with 2 tiles in flight), its accounted peak
# (load + plan + run) against resident + inference_fixed + tile_bytes(p), the native figures
# tiled_peak_bytes counts a tile with; the wrapper's buffers are the same code on both heaps.
#
# Second table, wasm32 whole tiled runs (issue #54): the page's own path under Node
# (tools/wasm/web_run.js on WASM_DIR/qsm-web-node.js: qsm_web_tile_plan, then qsm_web_run with
# the tile) on the same phantom, at the tile configs WASM_CONFIGS (default "32,8 64,4"; a
# qsmnet run at 96³ takes minutes). The estimate is the page's plan: the input volumes the run
# makes (float32 copies and f64 volumes of the field and the mask, 24 B a voxel) +
# wasm_tiled_peak_bytes (the registry's wasm32 tiled-run figures; tiled_peak_bytes for a network
# without them) for the plan's tiles in flight (wasm_tiles_in_flight) — the host's arithmetic above
# must give the same bytes (checked). Measured: the growth of the linear memory (HEAP8.buffer.byteLength) from
# the module's start to the run's end, as `qsm measure --wasm` measures a whole run (docs/wasm.md).
# Beside it the run's accounted peak and the heap the accounting does not see (growth − accounted
# peak − inputs: fragmentation, thread stacks, the runtime; less the start's free heap), the heap
# the run took (the program break's rise, web_run.js's break_rise_bytes: the growth plus the free
# room the memory had at the start, 7.2 MB in the pthread build) and the estimate against it, and
# χ against the native tiled run (max|Δ| / range inside the mask).
set -euo pipefail
cd "$(dirname "$0")/.."
QSM=${QSM:-build/qsm}
weights=${1:-.cache/twins-full}
size=${SIZE:-96}
threads=${THREADS:-2}
configs=${CONFIGS:-"32,8 48,8 64,4"}
wasm_configs=${WASM_CONFIGS:-"32,8 64,4"}
wasm_dir=${WASM_DIR:-build-wasm/mt}
wasm=${WASM:-1}
[ -f "$wasm_dir/qsm-node.js" ] || wasm=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$QSM" phantom --out "$work/ph" --size "$size" --b0 3 >/dev/null

# The host's arithmetic, from the registry's JSON alone (tiled_peak_bytes, TileCost::bytes).
cat >"$work/host.py" <<'EOF'
import json, math, sys
def patch(spec, core, halo):
    d = max([spec["size_divisor"]] + spec["pad_multiple"])
    return math.ceil((core + 2 * halo) / d) * d
def cost(pts, fixed, per_voxel, v):
    # TileCost::bytes: the line, or below the last small point the chord through them.
    pts = pts or []
    if pts and v < pts[-1][0]:
        if v <= pts[0][0]:
            return pts[0][1]
        (a, ab), (b, bb) = next((pts[i - 1], pts[i]) for i in range(1, len(pts)) if pts[i][0] >= v)
        return ab if bb <= ab else ab + -(-(bb - ab) * (v - a) // (b - a))
    return fixed + per_voxel * v
def tile_bytes(spec, v):
    return cost(spec["native_tile_small"], spec["native_tile_fixed_bytes"], spec["native_tile_bytes_per_voxel"], v)
def tiled_peak(spec, p, dims, n, field_copy=False):
    mem = spec["memory"]
    voxels = dims[0] * dims[1] * dims[2]
    invnet = spec["id"] == "qsmcore-invnet"
    wrapper = (1 + field_copy + invnet) * 8 * voxels + 4096
    prepare = 0
    if invnet:
        prepare = (3 + field_copy) * 8 * voxels + 24 * (dims[0] // 2 + 1) * dims[1] * dims[2] + 4096
    held = mem["resident_bytes"] + mem["inference_fixed_bytes"]
    return max(mem["load_peak_bytes"], held + max(wrapper + n * tile_bytes(spec, p**3), prepare))
def wasm_tiled_peak(spec, p, dims, n, field_copy=False):
    # wasm_tiled_peak_bytes (memory.md §4.6); the native estimate where not measured in wasm32.
    run = spec["wasm_tiled_run"]
    if run is None:
        return tiled_peak(spec, p, dims, n, field_copy)
    voxels = dims[0] * dims[1] * dims[2]
    invnet = spec["id"] == "qsmcore-invnet"
    wrapper = (1 + field_copy + invnet) * 8 * voxels + 4096
    prepare = (3 + field_copy) * 8 * voxels + 24 * (dims[0] // 2 + 1) * dims[1] * dims[2] + 4096 if invnet else 0
    tile = cost(run["tile_small"], run["tile_fixed_bytes"], run["tile_bytes_per_voxel"], p**3)
    return run["held_bytes"] + max(wrapper + n * tile, prepare)
EOF

ids=$("$QSM" models --json | python3 -c 'import json,sys; print(" ".join(m["id"] for m in json.load(sys.stdin) if m["tiled"]))')
for id in $ids; do "$QSM" models show "$id" --json >"$work/$id.json"; done
if [ "${NATIVE:-1}" = 1 ]; then
printf '| network | heap | tile (core,halo) | patch | in flight | estimate MB | measured MB | estimate / measured | growth per tile MB | tile_bytes MB | tile_bytes / growth |\n'
printf '|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for id in $ids; do
  spec="$work/$id.json"
  "$QSM" models show "$id" --json >"$spec"
  if [ "$id" != qsmcore-invnet ] && [ ! -f "$weights/$id.onnx" ]; then
    printf '| %s | - | - | - | - | - | - | skipped: no %s |\n' "$id" "$weights/$id.onnx"
    continue
  fi
  for cfg in $configs; do
    for t in "$threads" $((threads + 1)); do
      QSM_MODEL_DIR="$weights" "$QSM" run "$id" --in "$work/ph/local_field.nii.gz" --mask "$work/ph/mask.nii.gz" \
        --tile "$cfg" --threads "$t" --mem-budget none --no-verify --quiet \
        --out "$work/out.nii.gz" --report "$work/$id-$cfg-$t.json" >/dev/null
    done
    python3 - "$work/host.py" "$spec" "$work/$id-$cfg-$threads.json" "$cfg" "$size" "$threads" \
      "$work/$id-$cfg-$((threads + 1)).json" <<'EOF'
import json, sys
exec(open(sys.argv[1]).read())
spec, report, more = (json.load(open(p)) for p in (sys.argv[2], sys.argv[3], sys.argv[7]))
core, halo = (int(v) for v in sys.argv[4].split(","))
size, threads = int(sys.argv[5]), int(sys.argv[6])
p = patch(spec, core, halo)
n = min(threads, report["tiles"])  # a host counts the tiles whose core holds a mask voxel
assert report["tiles_in_flight"] == n, f"qsmcore ran {report['tiles_in_flight']} tiles in flight, the host expects {n}"
estimate = tiled_peak(spec, p, (size, size, size), n)
measured = report["memory"]["measured_peak_bytes"]
growth = more["memory"]["measured_peak_bytes"] - measured if more["tiles_in_flight"] == n + 1 else None
tb = tile_bytes(spec, p**3)
g = f"{growth / 1e6:.2f} | {tb / 1e6:.2f} | {tb / growth:.3f}" if growth else f"- | {tb / 1e6:.2f} | - (fewer tiles)"
print(f"| {spec['id']} | native | {core},{halo} | {p}³ | {n} | {estimate / 1e6:.1f} | {measured / 1e6:.1f} | {estimate / measured:.3f} | {g} |")
EOF
    [ "$wasm" = 1 ] || continue
    # wasm32: one tile's graph run at the padded patch (see the header).
    p=$(python3 -c 'import sys; exec(open(sys.argv[1]).read()); import json; c,h=map(int,sys.argv[3].split(",")); print(patch(json.load(open(sys.argv[2])),c,h))' "$work/host.py" "$spec" "$cfg")
    channels=1
    [ "$id" = qsmcore-invnet ] && channels=3
    /usr/bin/python3 -c 'import numpy as np,sys; c,p=int(sys.argv[2]),int(sys.argv[3]); np.save(sys.argv[1], (np.random.RandomState(1).rand(1,c,p,p,p).astype(np.float32)-0.5)*0.02)' \
      "$work/x.npy" "$channels" "$p"
    model="$weights/$id.onnx"
    [ -f "$model" ] || model="models/$id.onnx"  # qsmcore-invnet ships in models/
    input=$("$QSM" onnx info "$model" | awk '/^inputs:/{getline; sub(/^ +/,""); sub(/:.*/,""); print; exit}')
    NODE_PATH=${NODE_PATH:-/usr/share/nodejs} node tools/wasm/qsm.js onnx run "$model" --in "$input=$work/x.npy" \
      --out "$work/wo" --threads 1 --mem-budget none --report "$work/w.json" >/dev/null 2>&1
    python3 - "$work/host.py" "$spec" "$work/w.json" "$cfg" "$p" <<'EOF'
import json, sys
exec(open(sys.argv[1]).read())
spec, report = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
p = int(sys.argv[5])
mem = spec["memory"]
estimate = mem["resident_bytes"] + mem["inference_fixed_bytes"] + tile_bytes(spec, p**3)
measured = report["measured_peak_bytes"]
print(f"| {spec['id']} | wasm32, one tile's run | {sys.argv[4]} | {p}³ | 1 | {estimate / 1e6:.1f} | {measured / 1e6:.1f} | {estimate / measured:.3f} | - | - | - |")
EOF
  done
done
fi

# ---- wasm32: whole tiled runs through the page's entry points (see the header) ----------------
[ "$wasm" = 1 ] && [ -f "$wasm_dir/qsm-web-node.js" ] || exit 0
printf '\n| network | heap | tile (core,halo) | patch | tiles | in flight | estimate MB | heap growth MB | estimate / growth | accounted peak MB | unaccounted heap MB | break rise MB | estimate / break rise | wasm s | χ max\\|Δ\\|/range vs native |\n'
printf '|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for id in $ids; do
  model="$weights/$id.onnx"
  [ "$id" = qsmcore-invnet ] && model=models/$id.onnx
  [ -f "$model" ] || continue
  for cfg in $wasm_configs; do
    QSM_MODEL_DIR="$(dirname "$model")" "$QSM" run "$id" --in "$work/ph/local_field.nii.gz" --mask "$work/ph/mask.nii.gz" \
      --tile "$cfg" --threads "$threads" --mem-budget none --no-verify --quiet \
      --out "$work/native.nii.gz" --report "$work/native.json" >/dev/null
    NODE_PATH=${NODE_PATH:-/usr/share/nodejs} QSM_WASM_DIR="$wasm_dir" node tools/wasm/web_run.js "$id" --model "$model" \
      --field "$work/ph/local_field.nii.gz" --mask "$work/ph/mask.nii.gz" --tile "$cfg" --threads "$threads" \
      --out "$work/wasm-out" >"$work/web.json"
    /usr/bin/python3 - "$work/host.py" "$work/$id.json" "$work/web.json" "$cfg" "$work/native.nii.gz" \
      "$work/wasm-out/chi.npy" "$work/ph/mask.nii.gz" <<'EOF'
import gzip, json, struct, sys
import numpy as np
exec(open(sys.argv[1]).read())
spec, w = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
plan, reply, heap = w["plan"], w["reply"], w["heap"]
def nii(p):
    b = gzip.open(p).read()
    dims = struct.unpack("<3h", b[42:48]); t = struct.unpack("<h", b[70:72])[0]; off = int(struct.unpack("<f", b[108:112])[0])
    return np.frombuffer(b[off:], dtype={16: "<f4", 64: "<f8", 2: "u1"}[t], count=int(np.prod(dims))).reshape(dims, order="F")
core, halo = (int(v) for v in sys.argv[4].split(","))
dims = w["dims"]
p = patch(spec, core, halo)
n = plan["tiles_in_flight"]
host = wasm_tiled_peak(spec, p, dims, n) + 24 * dims[0] * dims[1] * dims[2]
estimate = plan["predicted_peak_bytes"] + plan["inputs_bytes"]
assert host == estimate, f"the page's plan says {estimate} B, the registry's arithmetic {host} B"
assert reply["tiles_in_flight"] == n, f"the run had {reply['tiles_in_flight']} tiles in flight, the plan {n}"
growth = heap["growth_bytes"]
acc = reply["measured_peak_bytes"]
native, chi, mask = nii(sys.argv[5]).astype(np.float64), np.load(sys.argv[6]).astype(np.float64), nii(sys.argv[7]) > 0.5
d = np.abs(chi - native)[mask].max() / np.ptp(native[mask])
print(f"| {spec['id']} | wasm32, whole tiled run | {core},{halo} | {p}³ | {reply['tiles']} | {n} | {estimate / 1e6:.1f} | "
      f"{growth / 1e6:.1f} | {estimate / growth:.3f} | {acc / 1e6:.1f} | {(growth - acc - plan['inputs_bytes']) / 1e6:.1f} | "
      f"{heap['break_rise_bytes'] / 1e6:.1f} | {estimate / heap['break_rise_bytes']:.3f} | "
      f"{reply['network_seconds']:.0f} | {d:.1e} |")
EOF
  done
done
