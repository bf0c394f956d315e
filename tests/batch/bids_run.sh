#!/usr/bin/env bash
# `qsm batch plan` on a BIDS dataset (issue #17): two subjects written from head phantoms, raw
# multi-echo phase and magnitude (one file per echo, EchoTime and MagneticFieldStrength in the
# sidecars) and derivatives (local field in ppm with "Units", brain mask); a third subject has
# no mask. Through the reduced twins:
#   - iQSM takes the raw echoes: the plan reads the TEs and B0 from the sidecars, the task stacks
#     the echoes into one file, and the run's report shows all of them;
#   - xQSM takes the derivatives' local field and mask;
#   - the subject without a mask is refused by the plan with the reason, the others run.
# Usage: bids_run.sh QSM_BINARY   (QSM_TWINS_DIR: the reduced twins)
set -euo pipefail
qsm=$(realpath "$1")
twins=${QSM_TWINS_DIR:?set QSM_TWINS_DIR to the reduced twins (tools/twins/make --out DIR)}
work=$(mktemp -d /tmp/qsm-batch-bids.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$qsm" phantom --out "$work/ph" --size 48 --te 0.004,0.012,0.020 --b0 3 >/dev/null
/usr/bin/python3 - "$work" <<'PY'
import json, os, sys
import nibabel as nib, numpy as np
w = sys.argv[1]
bids = f"{w}/bids"
os.makedirs(bids, exist_ok=True)
json.dump({"Name": "qsm batch test", "BIDSVersion": "1.9.0"}, open(f"{bids}/dataset_description.json", "w"))
phase, mag = nib.load(f"{w}/ph/phase.nii.gz"), nib.load(f"{w}/ph/magnitude.nii.gz")
field, mask = nib.load(f"{w}/ph/local_field.nii.gz"), nib.load(f"{w}/ph/mask.nii.gz")
for sub in ("1", "2", "nomask"):
    anat = f"{bids}/sub-{sub}/ses-1/anat"
    der = f"{bids}/derivatives/prep/sub-{sub}/ses-1/anat"
    os.makedirs(anat, exist_ok=True)
    os.makedirs(der, exist_ok=True)
    prefix = f"sub-{sub}_ses-1_run-1"
    for e, te in enumerate((0.004, 0.012, 0.020)):
        for part, img in (("phase", phase), ("mag", mag)):
            name = f"{anat}/{prefix}_echo-{e + 1}_part-{part}_MEGRE"
            data = np.asarray(img.dataobj, dtype=np.float32)[..., e]
            nib.save(nib.Nifti1Image(data, img.affine), name + ".nii.gz")
            json.dump({"EchoTime": te, "MagneticFieldStrength": 3.0}, open(name + ".json", "w"))
    nib.save(nib.Nifti1Image(np.asarray(field.dataobj, dtype=np.float32), field.affine), f"{der}/{prefix}_localfield.nii.gz")
    json.dump({"Units": "ppm"}, open(f"{der}/{prefix}_localfield.json", "w"))
    if sub != "nomask":
        nib.save(nib.Nifti1Image(np.asarray(mask.dataobj, dtype=np.uint8), mask.affine), f"{der}/{prefix}_desc-brain_mask.nii.gz")
PY

for model in iqsm xqsm; do
  out=$work/$model
  env "QSM_MODEL_DIR_$(echo "$model" | tr '[:lower:]' '[:upper:]')=$twins" \
    "$qsm" batch plan "$work/bids" --model "$model" --out "$out" --threads 1 --no-verify --seconds-per-voxel 1e-6 \
    >"$work/plan-$model.txt" 2>&1 || fail "$model: plan failed: $(cat "$work/plan-$model.txt")"
  cat "$work/plan-$model.txt"
  grep -q 'sub-nomask_ses-1_run-1: .*missing a _mask image' "$work/plan-$model.txt" || fail "$model: the subject without a mask is not refused with the reason"
  "$qsm" batch run "$out" --local -j 2 --mem-budget 4GiB >"$work/run-$model.txt" 2>&1 || true
  cat "$work/run-$model.txt"
  grep -q '^3 subject(s): done 2 failed 1$' "$work/run-$model.txt" || fail "$model: expected 2 done, 1 failed"
done
/usr/bin/python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
rep = json.load(open(f"{w}/iqsm/subjects/sub-1_ses-1_run-1/sub-1_ses-1_run-1_report.json"))
opts, phase = rep["options"], rep["inputs"]["field"]
if opts["te_s"] != [0.004, 0.012, 0.02] or opts["b0_tesla"] != 3.0:
    sys.exit(f"FAIL: iqsm ran with TE {opts['te_s']} and B0 {opts['b0_tesla']}, not the sidecars' 0.004,0.012,0.02 s and 3 T")
if phase["frames"] != 3 or rep["inputs"]["magnitude"]["frames"] != 3:
    sys.exit("FAIL: the echoes were not stacked into one 3-frame input: " + json.dumps(rep["inputs"]))
x = json.load(open(f"{w}/xqsm/subjects/sub-2_ses-1_run-1/sub-2_ses-1_run-1_report.json"))
if not x["inputs"]["field"]["path"].endswith("_localfield.nii.gz") or x["inputs"]["field"]["unit"] != "ppm":
    sys.exit("FAIL: xqsm did not take the derivatives' local field in ppm: " + json.dumps(x["inputs"]["field"]))
print("reports: iqsm took 3 stacked echoes at TE", opts["te_s"], "B0", opts["b0_tesla"], "; xqsm the local field in ppm")
PY
echo "PASS: qsm batch on a BIDS dataset"
