#!/usr/bin/env bash
# The README's first command: set up and build (tools/setup.sh), generate the xQSM architecture
# twin (the published xQSM architecture with random weights; only that one network, seconds),
# then `qsm demo`: head phantom -> simulated local field -> xQSM (through run_network) and TKD
# -> metrics against the ground truth, predicted vs measured memory, NIfTI + PNG + demo.json.
# Extra arguments go to qsm demo (e.g. --size 64 --threads 4); the output folder is
# build/qsm-demo unless --out is given.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
twins=build/demo/twins
[ -f "$twins/xqsm.onnx" ] || /usr/bin/python3 tools/twins/make --out "$twins" --only xqsm >/dev/null
args=("$@")
case " $* " in *" --out "*) ;; *) args=(--out build/qsm-demo "${args[@]}") ;; esac
build/qsm demo --model "$twins/xqsm.onnx" "${args[@]}"
