#!/usr/bin/env bash
# qsm unwrap (ROMEO, Dymerska 2021) against scikit-image's unwrap_phase (3-D quality-guided path
# following, Herráez 2002; Debian's python3-skimage, installed here if missing) on the same wrapped
# volumes: the head phantom's last echo at 181×217×181 (qsm phantom, SNR 100, without the phase
# offset bowl so that its true phase is the field's: 2π·γ̄·B0·TE·field) inside its mask, and two
# synthetic smooth fields (one clean and whole-volume; one in an ellipsoid mask with phase noise
# 0.3/magnitude rad). Prints ONE table: % of mask voxels on the right 2π multiple (global constant
# removed), the unwrapping's own seconds (files excluded), and skimage's time over ours. Same
# thread count for both (skimage's unwrap is serial). The phantom is run twice for ours: phase +
# mask alone (what skimage sees) and with the magnitude and the previous echo, as ROMEO is meant to
# be used; skimage's figures repeat on that pair of rows.
# Usage: bench/unwrap_vs_skimage.sh [THREADS=2] [SYNTHETIC_GRID=181,217,181]
#   QSM=path/to/qsm to measure another build.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
grid=${2:-181,217,181}
qsm=${QSM:-build/qsm}
work=.cache/bench/unwrap
mkdir -p "$work"
py=/usr/bin/python3
if ! "$py" -c "import skimage.restoration" 2>/dev/null; then
  apt-get install -y python3-skimage >/dev/null
fi
"$py" -c "import nibabel" 2>/dev/null || apt-get install -y python3-nibabel >/dev/null
[ -x "$qsm" ] || { echo "no $qsm: build it first (ninja -C build qsm)" >&2; exit 1; }
if [ ! -f "$work/phantom/phase.nii.gz" ]; then
  "$qsm" phantom --out "$work/phantom" --size 181,217,181 --snr 100 --no-phase-offset >/dev/null
fi
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
"$py" bench/unwrap_vs_skimage.py "$qsm" "$threads" "$work" "$grid"
