#!/usr/bin/env bash
# A refactor must not slow anything down (issue #52: "no slowdown > 3 %"): the same workloads run
# by two builds of `qsm`, alternating, and one table of their best times, the ratio and peak RSS.
# Workloads: the test 3-D U-Net (base 32) at 96³ on the engine's plans; the same under a budget
# that makes it spill activations to disk (the spill planner, its transfers and parking); the same
# with layer-wise weight residency; qsmcore-invnet through `qsm run` (a network's wrapper: reading,
# padding, TKD, writing); and `qsm pipeline` from the raw scan of a 96³ head to χ (every stage).
# Both builds run oneDNN's direct convolution (QSM_CONV_ALGO=direct), so a newer build's Winograd
# does not count as a refactor's gain.
# Usage: bench/before_after.sh OLD_QSM NEW_QSM [THREADS] [ROUNDS]   (WORKLOADS="a b" picks some)
#   e.g. build a commit before the refactors into /tmp/before (git archive REV | tar -x -C DIR;
#   cmake -S DIR -B DIR/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DQSM_BUILD_TESTS=OFF; ninja qsm)
#   and compare: bench/before_after.sh /tmp/before/build/qsm build/qsm 2 5
# Rounds alternate old and new so that load from elsewhere hits both alike; the best of the rounds
# is reported (the least disturbed run), wall time and CPU time (user + system: on a shared
# machine what others run stretches the wall clock far more than the CPU seconds), with the
# spread of the wall-time ratio over the rounds beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?OLD_QSM} new=${2:?NEW_QSM}
threads=${3:-2}
rounds=${4:-5}
work=.cache/bench/before_after
mkdir -p "$work"
bench=.cache/bench
[ -f "$bench/unet3d_b32.onnx" ] || /usr/bin/python3 tools/testnets/export_testnets.py --out "$bench" --base 32 >/dev/null
model=$bench/unet3d_b32.onnx
x=$work/x_96.npy
[ -f "$x" ] || /usr/bin/python3 tools/testnets/make_inputs.py "$x" 1 1 96 96 96 >/dev/null
[ -f "$work/head/local_field.nii.gz" ] || "$new" phantom --out "$work/head" --size 96 >/dev/null
[ -f "$work/raw/magnitude.nii.gz" ] || "$new" phantom --out "$work/raw" --size 96 --raw >/dev/null

read -r -a names <<<"${WORKLOADS:-unet96 unet96_spill unet96_layerwise invnet_run pipeline96}"
# The command line of one workload, by name ($3), for the qsm binary $1 writing into $2, in cmd.
set_cmd() {
  local q=$1 out=$2
  case $3 in
  unet96) cmd=("$q" onnx run "$model" --in input="$x" --out "$out" --threads "$threads") ;;
  unet96_spill) cmd=("$q" onnx run "$model" --in input="$x" --out "$out" --threads "$threads" --mem-budget 250MiB) ;;
  unet96_layerwise) cmd=("$q" onnx run "$model" --in input="$x" --out "$out" --threads "$threads"
    --residency layerwise) ;;
  invnet_run) cmd=("$q" run qsmcore-invnet --in "$work/head/local_field.nii.gz" --mask "$work/head/mask.nii.gz"
    --out "$out/chi.nii.gz" --threads "$threads") ;;
  pipeline96) cmd=("$q" pipeline --mag "$work/raw/magnitude.nii.gz" --phase "$work/raw/phase.nii.gz"
    --te 0.004,0.012,0.020,0.028 --b0 7 --out "$out" --threads "$threads") ;;
  esac
}
# Wall seconds, CPU seconds and peak RSS (KiB) of one workload ($2) of binary $1, as "s cpu kib";
# a failed run prints its log and gives nothing.
timed() {
  local log=$work/last.log
  set_cmd "$1" "$work/o_$3" "$2"
  if ! QSM_CONV_ALGO=direct OMP_WAIT_POLICY=passive /usr/bin/time -f 'wall %e cpu %U %S rss %M' "${cmd[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    return 1
  fi
  sed -n 's/^wall \([0-9.]*\) cpu \([0-9.]*\) \([0-9.]*\) rss \([0-9]*\)$/\1 \2 \3 \4/p' "$log" |
    tail -1 | awk '{ print $1, $2 + $3, $4 }'
}
# The smaller of two numbers.
least() { awk -v a="$1" -v b="$2" 'BEGIN { print (b < a ? b : a) }'; }
declare -A best_old best_new cpu_old cpu_new rss_old rss_new ratios
for name in "${names[@]}"; do
  best_old[$name]=1e9 best_new[$name]=1e9 cpu_old[$name]=1e9 cpu_new[$name]=1e9 ratios[$name]=""
  # A first run of each, untimed: page cache, the model file, oneDNN's first JIT.
  timed "$old" "$name" old >/dev/null || exit 1
  timed "$new" "$name" new >/dev/null || exit 1
  for ((r = 0; r < rounds; r++)); do
    read -r to co ko < <(timed "$old" "$name" old)
    read -r tn cn kn < <(timed "$new" "$name" new)
    [ -n "$to" ] && [ -n "$tn" ] || exit 1
    best_old[$name]=$(least "${best_old[$name]}" "$to") best_new[$name]=$(least "${best_new[$name]}" "$tn")
    cpu_old[$name]=$(least "${cpu_old[$name]}" "$co") cpu_new[$name]=$(least "${cpu_new[$name]}" "$cn")
    rss_old[$name]=$ko rss_new[$name]=$kn
    ratios[$name]="${ratios[$name]} $(awk -v a="$to" -v b="$tn" 'BEGIN { printf "%.3f", b / a }')"
  done
done
printf '%-18s | %7s %7s %6s %13s | %7s %7s %6s | %7s %7s\n' workload "old s" "new s" ratio "ratio range" \
  "old cpu" "new cpu" ratio "old MiB" "new MiB"
for name in "${names[@]}"; do
  range=$(tr ' ' '\n' <<<"${ratios[$name]}" | sed '/^$/d' | sort -n | sed -n '1p;$p' | paste -sd- -)
  awk -v n="$name" -v o="${best_old[$name]}" -v w="${best_new[$name]}" -v rg="$range" -v co="${cpu_old[$name]}" \
    -v cn="${cpu_new[$name]}" -v ko="${rss_old[$name]}" -v kn="${rss_new[$name]}" 'BEGIN {
      printf "%-18s | %7.2f %7.2f %6.3f %13s | %7.2f %7.2f %6.3f | %7.0f %7.0f\n", n, o, w, w / o, rg, co, cn, cn / co,
        ko / 1024, kn / 1024 }'
done
echo "old=$old new=$new threads=$threads; best of $rounds alternating rounds (whole command: wall s, CPU s = user +" \
  "system), peak RSS of the last round"
