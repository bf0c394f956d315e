#!/usr/bin/env bash
# The README's first command: set up, export the test 3-D U-Net (depth 4, base 16) and run it
# on a generated 128^3 volume, printing time and peak memory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
mkdir -p build/demo
[ -f build/demo/unet3d_b16.onnx ] || /usr/bin/python3 tools/testnets/export_testnets.py --out build/demo --base 16 >/dev/null
build/qsm demo --model build/demo/unet3d_b16.onnx --size 128
