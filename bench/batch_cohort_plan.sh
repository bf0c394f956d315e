#!/usr/bin/env bash
# What `qsm batch plan` asks a cluster for, for a simulated cohort: N subjects of mixed grids
# (typical 3D-GRE brain acquisitions), as NIfTI headers over sparse zero data, through a full-size
# twin (tools/twins/make --full). Prints the plan's buckets, then the memory the cohort asks for in
# total against QSMxT v9's fixed --mem=32G per job, and the ratio.
# Usage: bench/batch_cohort_plan.sh [N=1000] [MODEL=xqsm] [THREADS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
model=${2:-xqsm}
threads=${3:-2}
qsm=$(realpath "${QSM:-build/qsm}")
twins=$PWD/.cache/twins-full
[ -f "$twins/$model.onnx" ] || tools/twins/make --full --out "$twins" >/dev/null
work=$PWD/.cache/bench/cohort
rm -rf "$work/plan"
mkdir -p "$work/grids"
/usr/bin/python3 - "$work" "$n" <<'PY'
import os, sys
import nibabel as nib, numpy as np
work, n = sys.argv[1], int(sys.argv[2])
# (dims, voxel mm, share of the cohort): 1 mm and sub-mm 3D GRE, a few large FOVs.
grids = [((160, 220, 160), 1.0, 0.20), ((176, 240, 160), 1.0, 0.20), ((192, 256, 176), 0.9, 0.20),
         ((224, 224, 144), 1.0, 0.15), ((208, 256, 176), 0.8, 0.10), ((256, 256, 128), 0.9, 0.08),
         ((240, 240, 200), 0.75, 0.05), ((256, 256, 256), 0.7, 0.02)]
paths = []
for dims, mm, _ in grids:
    p = f"{work}/grids/{dims[0]}x{dims[1]}x{dims[2]}"
    for kind in ("field", "mask"):
        f = f"{p}_{kind}.nii"
        if not os.path.exists(f):
            img = nib.Nifti1Image(np.zeros((2, 2, 2), np.float32), np.diag([mm, mm, mm, 1.0]))
            img.header.set_data_shape(dims)
            hdr = img.header
            with open(f, "wb") as fh:
                hdr.write_to(fh)
                fh.seek(int(hdr.get_data_offset()) + int(np.prod(dims)) * 4 - 1)
                fh.write(b"\0")  # sparse: the data a header promises, no disk for it
    paths.append(p)
rng = np.random.default_rng(1000)
pick = rng.choice(len(grids), size=n, p=[g[2] for g in grids])
with open(f"{work}/cohort.tsv", "w") as t:
    t.write("id\tin\tmask\n")
    for i, k in enumerate(pick):
        t.write(f"sub-{i:04d}\t{paths[k]}_field.nii\t{paths[k]}_mask.nii\n")
PY
env "QSM_MODEL_DIR_$(echo "$model" | tr '[:lower:]-' '[:upper:]_')=$twins" \
  "$qsm" batch plan "$work/cohort.tsv" --model "$model" --out "$work/plan" --threads "$threads" --no-verify
/usr/bin/python3 - "$work/plan/batch.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
subs = [s for s in p["subjects"] if not s["error"]]
asked = sum(s["mem_mib"] for s in subs) / 1024
fixed = 32 * len(subs)
print(f"\n{len(subs)} subjects of {p['model']['id']}: {len(p['buckets'])} buckets")
print(f"{'':18}{'ours':>12}{'QSMxT v9 --mem=32G':>22}{'ratio':>8}")
print(f"{'memory asked':18}{asked:>10.0f} G{fixed:>20.0f} G{asked / fixed:>8.3f}")
big = max(s["mem_mib"] for s in subs) / 1024
print(f"{'largest task':18}{big:>10.1f} G{32:>20.0f} G{big / 32:>8.3f}")
print("time per voxel:", p["time"]["source"])
PY
