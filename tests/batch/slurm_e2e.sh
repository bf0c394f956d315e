#!/usr/bin/env bash
# End to end on a real SLURM (issue #17): a private single-node cluster (tools/slurm/cluster.sh)
# runs a cohort of synthetic subjects through the reduced xQSM twin with `qsm batch`:
#   - 8 subjects of 3 sizes all finish; each task's peak RSS (its own report) is <= its --mem and
#     --mem <= 1.2 x that peak + 64 MiB;
#   - a subject whose field holds a NaN is reported failed with that error, the others go on;
#   - a task made to outgrow its --mem (the script edited down, the engine's budget off) is
#     reported OOM from the scheduler's kill, and `resume` runs it to the end with more memory;
#   - a pipeline cohort (`plan --pipeline`): a raw 40³ 3-echo scan as per-echo files runs
#     `qsm pipeline` as an array task within its --mem, and a broken one is refused by the plan;
#   - the cluster is stopped at the end, whatever happened.
# Usage: slurm_e2e.sh QSM_BINARY TWINS_DIR  (root: it installs and starts slurm and munge)
set -euo pipefail
qsm=$(realpath "$1")
twins=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../tools/slurm/cluster.sh
work=$(mktemp -d /tmp/qsm-slurm-e2e.XXXXXX)
trap '"$cluster" stop "$work/slurm" >/dev/null 2>&1 || true' EXIT
eval "$("$cluster" start "$work/slurm")"
export SLURM_CONF

fail() { echo "FAIL: $*" >&2; exit 1; }

# Subjects: 3 of 64³, 3 of 96³, 2 of 128³ (each its own phantom copy), one 64³ field with a NaN,
# and one of 160³ that will be starved of memory.
for n in 64 96 128 160; do "$qsm" phantom --out "$work/ph$n" --size "$n" >/dev/null; done
/usr/bin/python3 "$here/nan_field.py" "$work/ph64/local_field.nii.gz" "$work/nan_field.nii.gz" 10 20 30
{
  printf 'id\tin\tmask\n'
  for k in 1 2 3; do printf 'a64-%s\tph64/local_field.nii.gz\tph64/mask.nii.gz\n' "$k"; done
  for k in 1 2 3; do printf 'b96-%s\tph96/local_field.nii.gz\tph96/mask.nii.gz\n' "$k"; done
  for k in 1 2; do printf 'c128-%s\tph128/local_field.nii.gz\tph128/mask.nii.gz\n' "$k"; done
  printf 'nanfield\tnan_field.nii.gz\tph64/mask.nii.gz\n'
  printf 'starved\tph160/local_field.nii.gz\tph160/mask.nii.gz\n'
} >"$work/cohort.tsv"

export QSM_MODEL_DIR_XQSM=$twins
out=$work/batch
"$qsm" batch plan "$work/cohort.tsv" --model xqsm --out "$out" --threads 1 --no-verify
# The starved subject is alone in the largest bucket: its script asks for a quarter of its memory
# and turns the engine's own refusal off, so only the scheduler can stop it.
starved_script=$(grep -l '160x160x160' "$out"/sbatch/*.sbatch)
[ "$(wc -l <"${starved_script%.sbatch}.tasks")" = 1 ] || fail "the 160³ subject does not have a bucket of its own"
planned_mem=$(sed -n 's/^#SBATCH --mem=\([0-9]*\)M$/\1/p' "$starved_script")
sed -i "s/^#SBATCH --mem=.*/#SBATCH --mem=$((planned_mem / 4))M/; s/^exec .*/& --mem-budget none/" "$starved_script"

wait_for_summary() {  # until the newest summary job has finished (bounded)
  local id
  id=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary_jobs"][-1])' "$out/jobs.json")
  for _ in $(seq 1 600); do
    squeue -h -j "$id" -o %T 2>/dev/null | grep -E 'PENDING|RUNNING|COMPLETING' >/dev/null || return 0
    sleep 1
  done
  fail "the summary job $id did not finish within 600 s"
}

"$qsm" batch submit "$out"
wait_for_summary
"$qsm" batch status "$out"
/usr/bin/python3 - "$out" first <<'PY'
import json, sys
out, phase = sys.argv[1], sys.argv[2]
st = {s["id"]: s for s in json.load(open(f"{out}/status.json"))}
def check(cond, what):
    if not cond:
        sys.exit(f"FAIL ({phase}): {what}\n" + json.dumps(st, indent=1))
normal = [i for i in st if i[0] in "abc"]
check(len(normal) == 8, "8 normal subjects")
for i in normal:
    s = st[i]
    check(s["state"] == "done", f"{i} is {s['state']}: {s['error']}")
    peak, mem = s["peak_rss_bytes"], s["mem_mib"] * 2**20
    check(0 < peak <= mem, f"{i}: peak RSS {peak} above --mem {mem}")
    check(mem <= 1.2 * peak + 64 * 2**20, f"{i}: --mem {mem} above 1.2 x peak RSS {peak} + 64 MiB")
check(st["nanfield"]["state"] == "failed" and "NaN" in st["nanfield"]["error"], "NaN subject: failed with its NaN error")
if phase == "first":
    check(st["starved"]["state"] == "oom", "starved subject reported OOM")
    import os
    final = [f"{out}/subjects/starved/starved_{n}" for n in ("chi.nii.gz", "report.json", "preview.png")]
    check(not any(os.path.exists(f) for f in final), "the killed task left an output under its final name")
else:
    check(st["starved"]["state"] == "done" and st["starved"]["attempts"] == 2, "starved subject done on its second attempt")
    check(st["nanfield"]["attempts"] == 2, "NaN subject tried again by resume")
print(f"{phase}: " + ", ".join(f"{i} {s['state']}" for i, s in sorted(st.items())))
PY

"$qsm" batch resume "$out"
wait_for_summary
"$qsm" batch status "$out"
/usr/bin/python3 - "$out" resumed <<'PY' || exit 1
import json, sys
out = sys.argv[1]
st = {s["id"]: s for s in json.load(open(f"{out}/status.json"))}
ok = st["starved"]["state"] == "done" and st["starved"]["attempts"] == 2 and st["nanfield"]["state"] == "failed"
ok = ok and all(st[i]["state"] == "done" and st[i]["attempts"] == 1 for i in st if i[0] in "abc")
sys.exit(0 if ok else "FAIL (resumed): " + json.dumps(st, indent=1))
PY

# A pipeline cohort: one raw scan (per-echo files with sidecars) and one whose phase is missing.
"$qsm" phantom --raw --size 40 --te 0.004,0.012,0.020 --b0 3 --layout echoes --out "$work/raw" >/dev/null
files() { echo "$work/raw/$1_e1.nii.gz,$work/raw/$1_e2.nii.gz,$work/raw/$1_e3.nii.gz"; }
{
  printf 'id\tmagnitude\tphase\n'
  printf 'scan\t%s\t%s\n' "$(files magnitude)" "$(files phase)"
  printf 'nophase\t%s\t%s\n' "$(files magnitude)" "$work/raw/no_such_phase.nii.gz"
} >"$work/scans.tsv"
out=$work/pbatch
"$qsm" batch plan "$work/scans.tsv" --pipeline --out "$out" --threads 1 -- --inversion tkd 2>"$work/pplan.txt"
grep -q "nophase: .*no_such_phase.nii.gz" "$work/pplan.txt" || fail "the scan without phase is not refused naming the file"
"$qsm" batch submit "$out"
wait_for_summary
"$qsm" batch status "$out"
/usr/bin/python3 - "$out" <<'PY' || exit 1
import json, sys
out = sys.argv[1]
st = {s["id"]: s for s in json.load(open(f"{out}/status.json"))}
s = st["scan"]
ok = s["state"] == "done" and s["where"].startswith("slurm job") and 0 < s["peak_rss_bytes"] <= s["mem_mib"] * 2**20
ok = ok and st["nophase"]["state"] == "failed" and "no_such_phase" in st["nophase"]["error"]
sys.exit(0 if ok else "FAIL (pipeline): " + json.dumps(st, indent=1))
PY
echo "PASS: qsm batch on SLURM"
