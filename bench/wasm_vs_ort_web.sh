#!/usr/bin/env bash
# Browser benchmark (issue #15): qsmcore-wasm (build-wasm/mt/qsm-web) vs onnxruntime-web 1.30
# (npm; wasm EP, its SIMD + threads build) in the same headless Chromium, crossOriginIsolated,
# same ONNX file, same input, same thread count; and qsmcore-wasm vs native qsmcore (build/qsm).
# Cases: the full-size xQSM and IR2QSM twins (tools/twins/make --full) at 64³ and 96³, and one
# Conv 3×3×3 32→32 pad 1 at 64³ (GFLOP/s = 2·27·32·32·64³ / time). Prints one markdown table:
# median run times after a warm-up, wasm heap high-water of each engine, the ratios qsm/ORT and
# wasm/native, and max|qsm − ORT| over ORT's output range (same computation, checked).
# Usage: bench/wasm_vs_ort_web.sh [REPEAT] [THREADS (1,2)] [SIZES (64 96)...]
# QSM_BENCH_WEIGHTS=stream: qsmcore-wasm streams the weights from the model's Blob (not in its heap).
# Needs: build/qsm, build-wasm/mt/qsm-web.* (tools/wasm/build.sh mt), node_modules (npm install
# --ignore-scripts: puppeteer-core, onnxruntime-web), Debian chromium, python3-onnx + numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-3}
threads=${2:-1,2}
shift $(( $# > 2 ? 2 : $# )) || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(64 96)
# onnxruntime-web is a devDependency (tools/setup.sh leaves it out): installed here when missing.
[ -f node_modules/onnxruntime-web/dist/ort.wasm.min.mjs ] ||
  npm install --ignore-scripts --include=dev --no-audit --no-fund --loglevel=error
work=.cache/bench-web
twins=.cache/twins-full
mkdir -p "$work"
for t in xqsm ir2qsm; do
  [ -f "$twins/$t.onnx" ] || /usr/bin/python3 tools/twins/make --full --out "$twins" --only xqsm,ir2qsm >&2
  ln -sf "$(realpath "$twins/$t.onnx")" "$work/$t.onnx"
done
# The same seeded input as .npy (native qsm) and raw float32 (the page), and the conv model.
/usr/bin/python3 - "$work" "${sizes[@]}" <<'PY'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
work, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
def save(name, x):
    if not os.path.exists(f"{work}/{name}.bin"):
        np.save(f"{work}/{name}.npy", x)
        x.tofile(f"{work}/{name}.bin")
rng = np.random.default_rng(0)
for s in sorted(set(sizes)):
    save(f"x{s}", np.random.default_rng(s).standard_normal((1, 1, s, s, s), dtype=np.float32))
save("c64", rng.standard_normal((1, 32, 64, 64, 64), dtype=np.float32))
if not os.path.exists(f"{work}/conv.onnx"):
    w = (rng.standard_normal((32, 32, 3, 3, 3)) / np.sqrt(32 * 27)).astype(np.float32)
    b = (0.1 * rng.standard_normal(32)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3, 3], pads=[1] * 6)
    g = helper.make_graph([node], "conv3d_32", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, "d", "h", "w"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, "d", "h", "w"])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench/wasm_vs_ort_web.sh")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, f"{work}/conv.onnx")
PY
gflop=$(awk 'BEGIN { printf "%.4f", 2 * 27 * 32 * 32 * 64 ^ 3 / 1e9 }')
cases=(--case "Conv 3³ 32→32:conv.onnx:c64:64x64x64:32:$gflop")
for t in xqsm ir2qsm; do
  for s in "${sizes[@]}"; do cases+=(--case "$t:$t.onnx:x$s:${s}x${s}x${s}"); done
done
node bench/wasm_vs_ort_web.js --data "$work" --qsm build/qsm --repeat "$repeat" --threads "$threads" \
  --qsm-weights "${QSM_BENCH_WEIGHTS:-full}" "${cases[@]}"
