#!/usr/bin/env bash
# R2* estimators' bias and spread under noise against the Cramér–Rao bound, and the maps' seconds
# and bytes per voxel at 181×217×181 × 4 echoes: the figures of tests/relaxometry/figures_test.cpp,
# which the suite leaves disabled (they print, they assert nothing, and the timing needs a quiet
# machine). Same threads as the pipeline's.
#   bench/relaxometry_figures.sh [THREADS=2]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/tests/qsm_relaxometry_tests"
[ -x "$bin" ] || { echo "build the tests first (bash tools/setup.sh)"; exit 1; }
OMP_NUM_THREADS="${1:-2}" OMP_WAIT_POLICY=passive "$bin" --gtest_also_run_disabled_tests \
  --gtest_filter='RelaxometryFigures.*' --gtest_brief=1
