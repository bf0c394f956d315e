#!/usr/bin/env bash
# The README's second command: set up (the Python package included), generate the test data
# (ONNX conformance cases, reduced architecture twins, parity test networks) and run the whole
# suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
# setup.sh (dependencies, Release build), then the Python package into build/venv, where the
# ctest test python.pytest runs the suite of python/tests.
bash tools/python.sh
# The development packages (npm's bids-validator, which checks the phantom's BIDS dataset;
# onnxruntime-web comes along): setup.sh leaves them out, the demo does not need them. Installed
# in the background while the WebAssembly build below compiles, and waited for after it.
npm_pid=
if [ ! -f node_modules/bids-validator/package.json ]; then
  npm install --ignore-scripts --include=dev --no-audit --no-fund --loglevel=error &
  npm_pid=$!
fi
# The WebAssembly build (build-wasm/mt and st), which the native tests/wasm compare with the
# native engine and whose own tests (conformance cases, portable FFT; mt only) run under Node below.
bash tools/wasm/build.sh
if [ -n "$npm_pid" ]; then wait "$npm_pid"; fi
data=build/testdata
mkdir -p "$data"
[ -d "$data/onnx-cases/node" ] || bash tools/conformance/generate.sh "$data/onnx-cases"
[ -f "$data/testnets/unet3d_b16.onnx" ] || /usr/bin/python3 tools/testnets/export_testnets.py --out "$data/testnets" >/dev/null
[ -f "$data/twins/manifest.json" ] || tools/twins/make --out "$data/twins"
# The tiled networks' full-size twins (~860 MB, ~25 s): the registry's tile figures were measured
# on them, so the host-estimate test (tests/tile_growth/tiled_peak_test.cpp) runs on them.
[ -f "$data/twins-tiled/manifest.json" ] ||
  tools/twins/make --full --only xqsm,qsmnet,qsmnet-plus,ir2qsm --out "$data/twins-tiled" >/dev/null
export QSM_ONNX_CASES="$PWD/$data/onnx-cases/node"
export QSM_TESTNETS_DIR="$PWD/$data/testnets"
export QSM_TWINS_DIR="$PWD/$data/twins"
export QSM_TWINS_TILED_DIR="$PWD/$data/twins-tiled"
export QSM_ORT_RUNNER="$PWD/tools/ort/run.js"
export QSM_WASM_DIR="$PWD/build-wasm"
# ctest -j2 runs two test processes on two cores: OpenMP threads that spin while they wait took
# the residency, spill and finer-slab tests 252 s, passive ones 28 s (src/cli/omp_wait_policy.cpp;
# qsm and the Python module choose passive themselves, the test binaries are told here).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# A failed test's output is printed again at the end (tools/ctest_failures.py): a CI report
# keeps only the log's tail.
suite() { ctest --test-dir "$1" --output-on-failure "${@:2}" || { /usr/bin/python3 tools/ctest_failures.py "$1"; return 1; }; }
suite build -j2 "$@"
suite build-wasm/mt "$@"
