"""QSM physics from the engine: the dipole kernel, the forward field model, TKD, the QSM-CI
metrics and the analytic head phantom. Arrays are in NIfTI index order (nx, ny, nz); χ and field
in ppm, TE in s, B0 in T, voxels in mm. Results are float64 arrays.

Kernel variants (``variant``): ``"corner"`` (= ``"lpcnn"``/``"modl"``: DC at index 0, D(0) = 0),
``"nextqsm"`` (centred grid, b̂ as given, ε in the denominator) and ``"qsm_forward"`` (D(0) = 1/3).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np

from . import _qsmcore

_p = _qsmcore.physics
GAMMA_BAR_HZ_PER_T: float = _p.GAMMA_BAR_HZ_PER_T
hz_per_ppm = _p.hz_per_ppm
phase_to_ppm = _p.phase_to_ppm
ppm_to_phase = _p.ppm_to_phase
wrap_phase = _p.wrap_phase

Vec3 = Sequence[float]


def b0_dir_from_affine(affine: Any) -> tuple:
    """Unit B0 direction (scanner z) in voxel axes, from a 4×4 affine's direction cosines."""
    return tuple(_p.b0_dir_from_affine(np.asarray(affine, dtype=np.float64)))


def dipole_kernel(shape: Sequence[int], voxel_size: Vec3 = (1.0, 1.0, 1.0), b0_dir: Vec3 = (0.0, 0.0, 1.0),
                  variant: str = "corner", dc_value: Optional[float] = None) -> np.ndarray:
    """D(k) = 1/3 − (k·b̂)²/|k|² on the FFT grid of ``shape`` (kᵢ = mᵢ/(Nᵢ·Δxᵢ), DC at index 0),
    so ``ifftn(D * fftn(chi))`` is the periodic forward model."""
    return _p.dipole_kernel([int(s) for s in shape], voxel_size, b0_dir, variant, dc_value)


def forward_field(chi: Any, b0_dir: Vec3 = (0.0, 0.0, 1.0), voxel_size: Vec3 = (1.0, 1.0, 1.0),
                  variant: str = "qsm_forward", padding: str = "corner") -> np.ndarray:
    """field = real(ifftn(D · fftn(χ))) on the padded grid, cropped to χ's: ``padding`` "none"
    (periodic), "zero" (2N, zeros) or "corner" (2N, filled with χ[-1,-1,-1]: qsm-forward's)."""
    return _p.forward_field(chi, b0_dir, voxel_size, variant, padding)


def tkd(field: Any, mask: Any, b0_dir: Vec3 = (0.0, 0.0, 1.0), voxel_size: Vec3 = (1.0, 1.0, 1.0),
        threshold: float = 0.19, variant: str = "corner", padding: str = "none") -> np.ndarray:
    """Thresholded k-space division: χ = ifftn(fftn(field·mask) / D_t)·mask, D_t = sign(D)·max(|D|, t),
    0 at k = 0."""
    return _p.tkd(field, mask, b0_dir, voxel_size, float(threshold), variant, padding)


def metrics(pred: Any, ref: Any, roi: Any = None) -> Dict[str, Any]:
    """QSM-CI's metrics (rmse, nrmse in %, hfen, mad, xsim, cc, gxe) of ``pred`` against ``ref``
    in the ROI (default: pred ≠ 0), as QSM-CI's metrics.py computes them."""
    return _p.metrics(pred, ref, roi)


def head_phantom(shape: Sequence[int] = (128, 128, 128), voxel_size: Vec3 = (1.0, 1.0, 1.0), b0: float = 7.0,
                 b0_dir: Vec3 = (0.0, 0.0, 1.0), te: Sequence[float] = (0.004, 0.012, 0.020, 0.028),
                 tr: float = 0.05, flip: float = 15.0, calcification: Optional[float] = None,
                 background: bool = True, shim: bool = True, phase_offset: bool = True, demean: bool = False,
                 snr: Optional[float] = None, seed: int = 0, extracerebral: bool = False,
                 air_outside: bool = False) -> Dict[str, np.ndarray]:
    """The analytic head phantom (``qsm phantom``): ``chi``, ``total_field``, ``local_field`` (ppm),
    ``mask``, ``magnitude`` and ``phase`` (one frame per echo, last axis) and the ``affine``.

    ``extracerebral`` adds CSF between brain and skull and a scalp, both with signal (the receiver
    phase offset then covers them too); ``air_outside`` fills everything outside the head with air
    (+9.2 ppm, no signal), so the total field holds the air/tissue interface's field. χ, the mask
    and the local field stay the brain's."""
    return _p.head_phantom({"shape": [int(s) for s in shape], "voxel_size": voxel_size, "b0": float(b0),
                            "b0_dir": b0_dir, "te": [float(t) for t in te], "tr": float(tr), "flip": float(flip),
                            "calcification": calcification, "background": background, "shim": shim,
                            "phase_offset": phase_offset, "demean": demean, "snr": snr, "seed": int(seed),
                            "extracerebral": bool(extracerebral), "air_outside": bool(air_outside)})
