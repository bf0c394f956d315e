"""The χ estimate qsmcore-invnet corrects (its input channel 0), computed as the C++ wrapper does.

`tkd`: thresholded k-space division (synth.tkd, qsmcore's physics::tkd; the shipped network).
`tv`:  TV-ADMM with its defaults (qsmcore.invert_dipole(method="tv"), docs/methods.md §6.3) —
       issue 53's experiment: TV's errors (staircase, shrunken contrast, smoothed small
       structures) are local, where TKD's streaks along the magic-angle cone are not, and a
       U-Net's ≈ 40-voxel receptive field can only correct local errors.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "build", "python"))

KINDS = ("tkd", "tv")


def tv(field, mask, voxel_mm, b0_dir, threads=1):
    """TV-ADMM's χ with its defaults: float32, 0 outside the mask."""
    import qsmcore

    r = qsmcore.invert_dipole(np.asarray(field, np.float64), np.asarray(mask, np.float64), method="tv",
                              voxel_size=[float(v) for v in voxel_mm], b0_dir=[float(v) for v in b0_dir],
                              threads=threads)
    return (np.asarray(r["chi"], dtype=np.float32) * np.asarray(mask, np.float32)).astype(np.float32)


def estimate(s, kind):
    """Channel 0 for sample `s` (synth.Sample): float32, 0 outside the mask."""
    if kind == "tkd":
        return s.tkd
    if kind != "tv":
        raise ValueError(f"unknown prior {kind!r}: expected one of {KINDS}")
    return tv(s.field, s.mask, s.voxel_mm, s.b0_dir)
