#!/usr/bin/env bash
# The README's first command: set up and build (tools/setup.sh), then `qsm demo`:
#  part 1: the atlas head's raw scan (wrapped multi-echo phase and magnitude, as `qsm phantom --raw
#          --anatomy atlas` writes it, 181x217x181 at 1 mm) -> the whole pipeline from the scan
#          alone (own mask, MCPC-3D-S + ROMEO, PDF) with the default inversion (TV-ADMM), with
#          qsmcore-invnet (our trained network, models/) as the inversion, and with TKD -> NRMSE,
#          XSIM, HFEN and slope against the true chi, seconds, predicted and measured peak memory;
#  part 2: qsmcore-invnet and TKD on the simulated local field of the ellipsoid head, the task
#          the network was trained for;
# then NIfTI volumes, slice figures (chi.png: truth and each chain in three planes, a ppm colour
# bar, the window stated), demo.json. One to two minutes on 2 cores, 2 GiB of memory.
# Extra arguments go to qsm demo (e.g. --size 96 for a quicker, coarser run, --threads 4, or
# --model xqsm for another registry network whose weights are in the cache); the output folder is
# build/qsm-demo unless --out is given.
set -euo pipefail
cd "$(dirname "$0")/.."
# The command only (not the test binaries), and only the packages it needs (setup.sh).
QSM_SETUP_PACKAGES=demo QSM_SETUP_TARGETS="${QSM_SETUP_TARGETS:-qsm}" bash tools/setup.sh
args=("$@")
case " $* " in *" --out "*) ;; *) args=(--out build/qsm-demo "${args[@]}") ;; esac
build/qsm demo "${args[@]}"
