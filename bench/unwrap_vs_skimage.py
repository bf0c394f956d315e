#!/usr/bin/env python3
"""qsm unwrap (ROMEO) against scikit-image's unwrap_phase (3-D, Herráez et al. 2002 quality-guided
path) on the same wrapped volumes; driven by bench/unwrap_vs_skimage.sh, which prints its table.

Correct = on the most common 2π multiple of (unwrapped − truth) over the mask (the global constant
removed), in % of mask voxels. Seconds = the unwrapping alone: what `qsm unwrap` reports for its
own work (files excluded) and the unwrap_phase call, on the same machine, one after the other.
"""
import json
import os
import re
import subprocess
import sys
import time

import nibabel as nib
import numpy as np
from skimage.restoration import unwrap_phase

GAMMA_BAR = 42.58e6  # Hz/T, as qsmcore's physics.h


def percent_correct(unwrapped, truth, mask):
    k = np.rint((unwrapped - truth) / (2 * np.pi))[mask].astype(np.int64)
    _, counts = np.unique(k, return_counts=True)
    return 100.0 * counts.max() / mask.sum()


def run_ours(qsm, threads, args):
    out = subprocess.run([qsm, "unwrap", *args, "--threads", str(threads)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"qsm unwrap failed: {out.stderr}")
    m = re.search(r": ([0-9.]+) s$", out.stdout.strip())
    return float(m.group(1))


def run_skimage(wrapped, mask):
    data = np.ma.masked_array(wrapped, ~mask) if mask is not None and not mask.all() else wrapped
    t = time.perf_counter()
    u = unwrap_phase(data)
    return np.ma.getdata(u), time.perf_counter() - t


def save(path, array, affine=np.eye(4)):
    nib.save(nib.Nifti1Image(array.astype(np.float32), affine), path)


def phantom_rows(qsm, threads, work):
    d = os.path.join(work, "phantom")
    meta = json.load(open(os.path.join(d, "phantom.json")))
    te = meta["EchoTime"]
    field = nib.load(os.path.join(d, "total_field.nii.gz")).get_fdata()
    mask = nib.load(os.path.join(d, "mask.nii.gz")).get_fdata() > 0.5
    phase_file = os.path.join(d, "phase.nii.gz")
    last = len(te)
    wrapped = nib.load(phase_file).get_fdata()[..., last - 1]
    truth = 2 * np.pi * GAMMA_BAR * meta["MagneticFieldStrength"] * 1e-6 * te[-1] * field
    sk, sk_s = run_skimage(wrapped, mask)
    sk_pct = percent_correct(sk, truth, mask)
    out = os.path.join(work, "ours_phantom.nii.gz")
    grid = "x".join(str(n) for n in mask.shape)
    rows = []
    for label, extra in (
        ("phase + mask", []),
        (f"+ magnitude, echo {last - 1} (TEs)",
         ["--mag", os.path.join(d, "magnitude.nii.gz"), "--te", ",".join(str(t) for t in te)]),
    ):
        s = run_ours(qsm, threads, ["--phase", phase_file, "--echo", str(last), "--mask",
                                    os.path.join(d, "mask.nii.gz"), "--out", out, *extra])
        pct = percent_correct(nib.load(out).get_fdata()[..., 0] if nib.load(out).ndim == 4
                              else nib.load(out).get_fdata(), truth, mask)
        rows.append((f"head phantom {grid}, echo {last} (SNR 100): ours {label}", pct, sk_pct, s, sk_s))
    return rows


def synthetic_field(shape, amplitude):
    """Three Gaussians and a quadratic in coordinates scaled to about −0.5..0.5: smooth, several wraps."""
    x, y, z = [np.linspace(-0.5, 0.5, n)[:, None, None].reshape([-1 if i == a else 1 for i in range(3)])
               for a, n in enumerate(shape)]

    def g(dx, dy, dz, s):
        return np.exp(-(dx * dx + dy * dy + dz * dz) / (2 * s * s))

    f = (1.0 * g(x - 0.15, y + 0.1, z, 0.18) - 0.8 * g(x + 0.2, y - 0.15, z + 0.1, 0.14)
         + 0.6 * g(x, y + 0.2, z - 0.2, 0.2) + 0.5 * x * x - 0.7 * x * y + 0.4 * z + 0.3 * y * z)
    return f * (amplitude / np.abs(f).max())


def synthetic_rows(qsm, threads, work, shape):
    rng = np.random.default_rng(2021)
    x, y, z = np.meshgrid(*[np.linspace(-1, 1, n) for n in shape], indexing="ij")
    ellipsoid = (x / 0.85) ** 2 + (y / 0.9) ** 2 + (z / 0.8) ** 2 <= 1.0
    # A magnitude falling from 1 at the centre to 0.25, and phase noise σ = 0.3/magnitude rad (0.3
    # … 1.2 rad), as a complex signal's noise makes it.
    mag = 0.25 + 0.75 * np.exp(-(x * x + y * y + z * z) / 0.5)
    grid = "x".join(str(n) for n in shape)
    mask_file = os.path.join(work, "synthetic_mask.nii.gz")
    save(mask_file, ellipsoid.astype(np.float32))
    rows = []
    for label, sigma, mask in (
        (f"smooth field {grid}, ±60 rad, no noise", None, None),
        (f"smooth field {grid}, ±60 rad, noise 0.3/magnitude rad, ellipsoid mask", 0.3 / mag, ellipsoid),
    ):
        truth = synthetic_field(shape, 60.0)
        noisy = truth + (rng.normal(0.0, 1.0, shape) * sigma if sigma is not None else 0.0)
        wrapped = np.angle(np.exp(1j * noisy))
        phase_file = os.path.join(work, "synthetic_phase.nii.gz")
        save(phase_file, wrapped)
        sel = np.ones(shape, bool) if mask is None else mask
        sk, sk_s = run_skimage(wrapped.astype(np.float32).astype(np.float64), mask)
        # Noise is part of the phase to recover: the truth per voxel is the noisy continuous phase.
        sk_pct = percent_correct(sk, noisy, sel)
        # Phase (and mask) alone for ours too: ROMEO's magnitude term compares neighbours' magnitudes,
        # which a smooth magnitude leaves near 1 everywhere, so it would change nothing here.
        out = os.path.join(work, "ours_synthetic.nii.gz")
        s = run_ours(qsm, threads, ["--phase", phase_file, "--out", out] + ([] if mask is None else ["--mask", mask_file]))
        rows.append((label, percent_correct(nib.load(out).get_fdata(), noisy, sel), sk_pct, s, sk_s))
    return rows


def main():
    qsm, threads, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rows = phantom_rows(qsm, threads, work)
    rows += synthetic_rows(qsm, threads, work, tuple(int(n) for n in sys.argv[4].split(",")))
    w = max(len(r[0]) for r in rows)
    print(f"{'volume':<{w}} | {'ours %':>9} {'skimage %':>9} | {'ours s':>7} {'skimage s':>9} | {'ratio':>6}")
    print("-" * (w + 51))
    for name, ours, sk, s, sk_s in rows:
        print(f"{name:<{w}} | {ours:9.4f} {sk:9.4f} | {s:7.2f} {sk_s:9.2f} | {sk_s / s:5.1f}x")


if __name__ == "__main__":
    main()
