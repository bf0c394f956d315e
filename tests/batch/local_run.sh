#!/usr/bin/env bash
# `qsm batch run --local` (issue #17) on this machine, through the reduced xQSM twin:
#   - with a budget that holds one subject's request, subjects run one at a time; with room for
#     two, two run at once (the runner's own "N running" lines);
#   - every subject finishes except one whose field holds a NaN, which is reported failed with
#     that error (and the command exits non-zero), and each output exists with its report;
#   - a second run redoes only what is not done.
# Usage: local_run.sh QSM_BINARY   (QSM_TWINS_DIR: the reduced twins, tools/twins/make)
set -euo pipefail
qsm=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
twins=${QSM_TWINS_DIR:?set QSM_TWINS_DIR to the reduced twins (tools/twins/make --out DIR)}
work=$(mktemp -d /tmp/qsm-batch-local.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for n in 48 64; do "$qsm" phantom --out "$work/ph$n" --size "$n" >/dev/null; done
/usr/bin/python3 "$here/nan_field.py" "$work/ph48/local_field.nii.gz" "$work/nan_field.nii.gz" 5 6 7
{
  printf 'id\tin\tmask\n'
  for k in 1 2; do printf 'a48-%s\tph48/local_field.nii.gz\tph48/mask.nii.gz\n' "$k"; done
  for k in 1 2; do printf 'b64-%s\tph64/local_field.nii.gz\tph64/mask.nii.gz\n' "$k"; done
  printf 'nanfield\tnan_field.nii.gz\tph48/mask.nii.gz\n'
} >"$work/cohort.tsv"
export QSM_MODEL_DIR_XQSM=$twins
out=$work/batch
"$qsm" batch plan "$work/cohort.tsv" --model xqsm --out "$out" --threads 1 --no-verify --seconds-per-voxel 1e-6
# A folder sbatch's #SBATCH lines could not name is refused before anything is written.
if "$qsm" batch plan "$work/cohort.tsv" --model xqsm --out "$work/with space" --no-verify >"$work/space.txt" 2>&1; then
  fail "a batch folder with a blank in its path was accepted"
fi
if ! grep -q 'may not hold blanks' "$work/space.txt" || [ -e "$work/with space" ]; then
  fail "the blank is not named, or something was written"
fi
largest=$(/usr/bin/python3 -c 'import json,sys; print(max(s["mem_mib"] for s in json.load(open(sys.argv[1]))["subjects"]))' "$out/batch.json")

# One request's room: never two at once, even with -j 4.
if "$qsm" batch run "$out" --local -j 4 --mem-budget "${largest}MiB" >"$work/one.txt" 2>&1; then
  fail "a cohort with a NaN subject ran without error"
fi
cat "$work/one.txt"
grep -q ', 2 running)' "$work/one.txt" && fail "two subjects ran at once within one subject's budget"
grep -q 'nanfield: failed (local): .*NaN' "$work/one.txt" || fail "the NaN subject's error is not reported"
for id in a48-1 a48-2 b64-1 b64-2; do
  if [ ! -f "$out/subjects/$id/${id}_chi.nii.gz" ] || [ ! -f "$out/subjects/$id/${id}_report.json" ]; then
    fail "$id: no output"
  fi
done
grep -q '^5 subject(s): done 4 failed 1$' "$work/one.txt" || fail "expected 4 done, 1 failed"

# Again with room for two: only the failed subject runs, and with -j 2 and a wide budget a
# fresh cohort runs two at once.
"$qsm" batch run "$out" --local -j 2 --mem-budget 4GiB >"$work/again.txt" 2>&1 || true
[ "$(grep -c '^started ' "$work/again.txt")" = 1 ] || fail "the second run started more than the one subject not done"
rm -rf "$out/subjects" "$out/jobs.json"
"$qsm" batch run "$out" --local -j 2 --mem-budget 4GiB >"$work/two.txt" 2>&1 || true
grep -q ', 2 running)' "$work/two.txt" || fail "with room for two, two subjects never ran at once"
echo "PASS: qsm batch run --local"
