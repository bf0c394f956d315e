#!/usr/bin/env bash
# χ from the atlas head's raw scan (qsm phantom --anatomy atlas --raw: 181×217×181, 7 T, 4 echoes,
# wrapped, noisy, scalp and air around the head, a receiver offset), nothing but the scan given
# (the pipeline's own mask, default chain) and with the true mask, every inversion (the classical
# ones and our trained network, qsmcore-invnet). One table:
# χ's NRMSE (QSM-CI: demeaned over the true brain) and XSIM (QSM-CI: 5×5×5 window, L = 1,
# K1 = 0.01, K2 = 0.001, averaged over the true brain), the run's seconds and its peak memory.
#   bench/chi_pipeline.sh [SIZE=181,217,181] [THREADS=2]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
size="${1:-181,217,181}"
threads="${2:-2}"
qsm="$root/build/qsm"
[ -x "$qsm" ] || { echo "build qsm first (bash tools/setup.sh)"; exit 1; }
work="$(mktemp -d /tmp/qsm-chi-bench-XXXXXX)"
trap 'rm -rf "$work"' EXIT
"$qsm" phantom --raw --anatomy atlas --size "$size" --layout echoes --out "$work/scan" >/dev/null
mags=$(ls "$work"/scan/magnitude_e*.nii.gz | sort -V | paste -sd,)
phases=$(ls "$work"/scan/phase_e*.nii.gz | sort -V | paste -sd,)
rows=()
for inv in tv rts tkd tikhonov ilsqr qsmcore-invnet; do
  for m in own true; do
    extra=()
    [ "$m" = true ] && extra=(--mask "$work/scan/mask.nii.gz")
    /usr/bin/time -f %M -o "$work/$m-$inv.rss" "$qsm" pipeline --mag "$mags" --phase "$phases" --inversion "$inv" \
      --out "$work/$m-$inv" --threads "$threads" --quiet --no-preview "${extra[@]}"
    rows+=("$m-$inv")
  done
done
/usr/bin/python3 - "$work" "${rows[@]}" <<'PY'
import json, sys, subprocess
import nibabel as nib, numpy as np
from scipy import ndimage
work, rows = sys.argv[1], sys.argv[2:]
truth = nib.load(f"{work}/scan/chi.nii.gz").get_fdata()
mask = nib.load(f"{work}/scan/mask.nii.gz").get_fdata() > 0.5

def nrmse(x):
    r, t = x[mask] - x[mask].mean(), truth[mask] - truth[mask].mean()
    return 100 * np.linalg.norm(r - t) / np.linalg.norm(t)

def xsim(x):  # methods.md §8: SSIM in native ppm, 5³ uniform window truncated at the borders
    c1, c2 = 1e-4, 1e-6
    ones = np.ones_like(x)
    n = ndimage.uniform_filter(ones, 5, mode="constant")
    mean = lambda a: ndimage.uniform_filter(a, 5, mode="constant") / n
    mx, my = mean(x), mean(truth)
    vx, vy, cxy = mean(x * x) - mx**2, mean(truth * truth) - my**2, mean(x * truth) - mx * my
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    return float(s[mask].mean())

print(f"{'chain':27} {'NRMSE %':>8} {'XSIM':>6} {'seconds':>8} {'peak predicted MiB':>19} {'measured MiB':>13} {'peak RSS MiB':>13}")
for name in rows:
    rep = json.load(open(f"{work}/{name}/report.json"))
    chi = nib.load(f"{work}/{name}/chi.nii.gz").get_fdata()
    secs = sum(s["seconds"] for s in rep["stages"])
    rss = int(open(f"{work}/{name}.rss").read().split()[-1]) / 1024
    label = ("scan only, " if name.startswith("own") else "true mask, ") + name.split("-", 1)[1]
    print(f"{label:27} {nrmse(chi):8.1f} {xsim(chi):6.3f} {secs:8.2f} {rep['predicted_peak_bytes']/2**20:19.1f} "
          f"{rep['measured_peak_bytes']/2**20:13.1f} {rss:13.1f}")
PY
