#!/usr/bin/env bash
# The phase-to-local-field chain on the atlas head's raw scan (qsm phantom --anatomy atlas --raw:
# real anatomy from the MNI152 atlases, 4 echoes at 7 T, wrapped, noisy, scalp and air around the
# head, a receiver phase offset), every unwrapper ×
# background removal with the true mask, then the default chain with its own mask; each removal's
# own local field, and the default's after TV-ADMM: the field of TV's χ (methods.md §5.2). One table:
# the local field's NRMSE against the truth over the whole true mask (demeaned; voxels a method
# eroded count as error), voxels eroded, the pipeline's seconds, and its accounted peak predicted
# against measured, with the process's peak RSS.
#   bench/field_pipeline.sh [SIZE=181,217,181] [THREADS=2] [ANATOMY=atlas|ellipsoids]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
size="${1:-181,217,181}"
threads="${2:-2}"
anatomy="${3:-atlas}"
qsm="$root/build/qsm"
[ -x "$qsm" ] || { echo "build qsm first (bash tools/setup.sh)"; exit 1; }
work="$(mktemp -d /tmp/qsm-field-bench-XXXXXX)"
trap 'rm -rf "$work"' EXIT

"$qsm" phantom --raw --anatomy "$anatomy" --size "$size" --layout echoes --out "$work/scan" >/dev/null
mags=$(ls "$work"/scan/magnitude_e*.nii.gz | sort -V | paste -sd,)
phases=$(ls "$work"/scan/phase_e*.nii.gz | sort -V | paste -sd,)

run() {  # name, extra options...
  local name="${1// /_}"; shift
  /usr/bin/time -f %M -o "$work/$name.rss" "$qsm" pipeline --mag "$mags" --phase "$phases" --out "$work/$name" \
    --threads "$threads" --quiet --no-preview "$@"
}

rows=()
for bfr in vsharp sharp resharp ismv pdf lbv; do  # the true mask: the stages after it, on it alone
  run "true-mask romeo-$bfr" --mask "$work/scan/mask.nii.gz" --field-in-mask-only --bfr "$bfr" --local-field removal
  rows+=("true-mask romeo-$bfr")
done
for bfr in pdf lbv; do
  run "true-mask laplacian-$bfr" --mask "$work/scan/mask.nii.gz" --field-in-mask-only --unwrap laplacian --bfr "$bfr" \
    --local-field removal
  rows+=("true-mask laplacian-$bfr")
done
# The true mask as a user gives it: the field also measured where the data's mask reaches beyond
# it (the default; methods.md §5.1), the outputs cut back to it.
run "true-mask+beyond romeo-pdf" --mask "$work/scan/mask.nii.gz" --bfr pdf --local-field removal
rows+=("true-mask+beyond romeo-pdf")
# The default after TV-ADMM: the local field is the field of TV's χ inside the mask (methods.md §5.2).
run "true-mask+beyond pdf-tv-field" --mask "$work/scan/mask.nii.gz"
rows+=("true-mask+beyond pdf-tv-field")
for bfr in vsharp sharp resharp ismv pdf lbv; do  # nothing but the scan: its own mask
  run "own-mask romeo-$bfr" --bfr "$bfr" --local-field removal
  rows+=("own-mask romeo-$bfr")
done
run "own-mask pdf-tv-field"
rows+=("own-mask pdf-tv-field")

/usr/bin/python3 - "$work" "${rows[@]}" <<'PY'
import json, sys
import nibabel as nib, numpy as np
work, rows = sys.argv[1], sys.argv[2:]
truth = nib.load(f"{work}/scan/local_field.nii.gz").get_fdata()
mask = nib.load(f"{work}/scan/mask.nii.gz").get_fdata() > 0.5
t = truth[mask] - truth[mask].mean()
print(f"{'mask, unwrap-bfr':28} {'NRMSE %':>8} {'mask Dice':>9} {'eroded':>9} {'seconds':>8} {'predicted MiB':>14} {'measured MiB':>13} {'ratio':>6} {'peak RSS MiB':>13}")
for label in rows:
    name = label.replace(" ", "_")
    rep = json.load(open(f"{work}/{name}/report.json"))
    local = nib.load(f"{work}/{name}/local_field.nii.gz").get_fdata()
    r = local[mask] - local[mask].mean()
    nrmse = 100 * np.linalg.norm(r - t) / np.linalg.norm(t)
    secs = sum(s["seconds"] for s in rep["stages"])
    pred, meas = rep["predicted_peak_bytes"] / 2**20, rep["measured_peak_bytes"] / 2**20
    rss = int(open(f"{work}/{name}.rss").read().split()[-1]) / 1024
    valid = nib.load(f"{work}/{name}/mask.nii.gz").get_fdata() > 0.5
    brain = nib.load(f"{work}/{name}/brain_mask.nii.gz").get_fdata() > 0.5
    eroded = int(mask.sum() - valid[mask].sum())  # true-brain voxels without a local field
    dice = 2 * (brain & mask).sum() / (brain.sum() + mask.sum())
    print(f"{label:28} {nrmse:8.1f} {dice:9.3f} {eroded:9d} {secs:8.2f} {pred:14.1f} {meas:13.1f} {pred/meas:6.3f} {rss:13.1f}")
PY
