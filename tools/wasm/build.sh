#!/usr/bin/env bash
# Builds qsmcore for WebAssembly with Debian's emscripten: build-wasm/mt (pthreads: Node and
# crossOriginIsolated pages) and build-wasm/st (single-threaded: any page), each with qsm-node
# (Node) and qsm-web (the web page's module, web/). Idempotent.
#   tools/wasm/build.sh [mt|st]...   (default: both)
# The wasm test binaries (conformance cases, portable FFT) are built in mt only: st differs in its
# threads and exception mode, which tests/wasm checks through st's qsm-node; QSM_WASM_ST_TESTS=ON
# builds them in st too.
set -euo pipefail
cd "$(dirname "$0")/../.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
need=()
# chromium: the browser test of the web page (tests/web) runs it headless.
for p in emscripten nodejs nlohmann-json3-dev libcli11-dev cmake ninja-build chromium; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# emscripten's JS optimiser needs Debian's acorn (pitfall 1 in docs/wasm.md).
export NODE_PATH=/usr/share/nodejs
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(mt st)
for v in "${variants[@]}"; do
  case "$v" in
    mt) threads=ON tests=ON ;;
    st) threads=OFF tests=${QSM_WASM_ST_TESTS:-OFF} ;;
    *) echo "build.sh: unknown variant '$v' (mt or st)" >&2; exit 2 ;;
  esac
  emcmake cmake -S . -B "build-wasm/$v" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQSM_WASM_THREADS=$threads -DQSM_BUILD_TESTS=$tests \
    -DQSM_UNITY_BUILD="${QSM_UNITY_BUILD:-OFF}" >/dev/null
  ninja -C "build-wasm/$v"
done
