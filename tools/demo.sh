#!/usr/bin/env bash
# The README's first command: set up and build (tools/setup.sh), then `qsm demo`: head phantom ->
# simulated local field -> qsmcore-invnet (qsmcore's own network, trained on synthetic heads and
# shipped in models/; through run_network) and TKD -> metrics against the ground truth,
# predicted vs measured memory, NIfTI + PNG + demo.json.
# Extra arguments go to qsm demo (e.g. --size 64 --threads 4, or --model xqsm for another
# registry network whose weights are in the cache); the output folder is build/qsm-demo unless
# --out is given.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
args=("$@")
case " $* " in *" --out "*) ;; *) args=(--out build/qsm-demo "${args[@]}") ;; esac
build/qsm demo "${args[@]}"
