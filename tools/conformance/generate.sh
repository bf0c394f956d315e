#!/usr/bin/env bash
# Generates the ONNX backend conformance cases (node/, simple/, pytorch-*/ ...) into DIR with
# Debian's python3-onnx 1.12. That onnx predates NumPy 1.24, which removed the np.float/np.int/
# np.bool/np.object aliases its case modules still use, so the aliases are restored in the same
# interpreter before any onnx module is imported. /usr/bin/python3 is used explicitly so that a
# pyenv/venv python without python3-onnx on PATH is not picked up.
# Usage: tools/conformance/generate.sh DIR   (then QSM_ONNX_CASES=DIR/node)
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTPUT_DIR" >&2
  exit 2
fi
out="$1"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Run from a neutral directory: a folder named 'onnx' in the caller's cwd would shadow the package.
cd /
QSM_GEN_OUT="$out" /usr/bin/python3 -c "
import os, sys
import numpy as np
np.float = float; np.int = int; np.bool = bool; np.object = object
sys.argv = ['backend-test-tools', 'generate-data', '-o', os.environ['QSM_GEN_OUT']]
from onnx.backend.test.cmd_tools import main
main()
"
# Shape-like inputs (Reshape's shape, Slice's starts, ...) must be plan-time constants in
# qsmcore; the node cases feed them as graph inputs, so freeze them into initializers.
/usr/bin/python3 "$here/freeze_const_inputs.py" "$out/node"
n=$(find "$out/node" -mindepth 1 -maxdepth 1 -type d | wc -l)
echo "generated $n node cases in $out/node"
