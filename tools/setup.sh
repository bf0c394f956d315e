#!/usr/bin/env bash
# Installs every dependency from Debian bookworm and npm, then builds qsmcore (Release) into
# build/. Idempotent: safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
# QSM_SETUP_PACKAGES=demo (what tools/demo.sh asks for) installs only what building `qsm` and
# running the demo need: the compiler, the libraries it links and the atlases of the demo's head.
# PyTorch, ONNX, Node and the npm packages are for the tests, the Python module and the page: on a
# fresh 2-core machine 1086 packages instead of 203, and 2 of the first command's 6 minutes
# (docs/build.md). Anything else (the default) installs everything.
pkgs=(cmake ninja-build g++ pkg-config git
  libdnnl-dev libfftw3-dev libnifti2-dev libcli11-dev nlohmann-json3-dev libssl-dev
  libcurl4-openssl-dev libpng-dev libgtest-dev libgmock-dev
  mricron-data)  # the MNI152 atlases of the atlas phantom (physics.md §4.4)
full=1
[ "${QSM_SETUP_PACKAGES:-all}" = demo ] && full=0
if [ $full = 1 ]; then
  pkgs+=(libbenchmark-dev python3-torch python3-onnx python3-numpy
    python3-dev python3-venv python3-setuptools python3-wheel python3-pybind11 python3-nibabel python3-pytest
    dcm2niix python3-pydicom)
  command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# onnxruntime-node's install script downloads GPU binaries (fails offline); the CPU library
# ships in the package, so skip scripts. puppeteer-core (the browser test's driver: it drives
# Debian's chromium, never downloads one), @niivue/niivue (the web page's viewer) and
# @niivue/dcm2niix (the page's DICOM conversion, dcm2niix built to wasm) come along.
if [ $full = 1 ] && { [ ! -f node_modules/onnxruntime-node/package.json ] ||
  [ ! -f node_modules/puppeteer-core/package.json ] || [ ! -f node_modules/@niivue/niivue/package.json ] ||
  [ ! -f node_modules/@niivue/dcm2niix/package.json ]; }; then
  # --omit=dev: onnxruntime-web (140 MB) is for bench/wasm_vs_ort_web.sh only, which installs it.
  # In the background while the build below compiles (a minute of downloads on a fresh machine);
  # waited for, and its failure fails this script, at the end.
  npm install --ignore-scripts --omit=dev --no-audit --no-fund --loglevel=error &
  npm_pid=$!
fi
# Unity batches (cmake/sources.cmake) by default here: they halve the library's compile time on a
# fresh machine; QSM_UNITY_BUILD=OFF compiles each source on its own includes (docs/build.md).
# QSM_SETUP_TARGETS names what to build (the demo asks for `qsm` only: the test binaries are
# more than half of a full build's CPU time); default everything.
# The Python module is asked for by name after a full install: a build first configured by the
# demo's (no pybind11 then) keeps QSM_BUILD_PYTHON=OFF in its cache otherwise.
py=()
[ $full = 1 ] && py=(-DQSM_BUILD_PYTHON=ON)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DQSM_UNITY_BUILD="${QSM_UNITY_BUILD:-ON}" "${py[@]}" >/dev/null
# shellcheck disable=SC2086  # a list of targets
ninja -C build ${QSM_SETUP_TARGETS:-}
if [ -n "${npm_pid:-}" ]; then wait "$npm_pid"; fi
