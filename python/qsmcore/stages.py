"""The phase-to-χ stages of the engine on NumPy arrays and nibabel images: a scan from files or
arrays, the brain mask, phase unwrapping, the total field from the echoes, background field
removal, dipole inversion, R2*/T2*/SWI, and the whole field pipeline in one call (what
``qsm pipeline`` runs). Each function is a thin conversion around the C++ stage.

Conventions (as :mod:`qsmcore.physics`):

* Arrays are in NIfTI index order ``(nx, ny, nz)``, echoes on a fourth, last axis. Results are
  float64, Fortran-ordered; masks are 0/1 float64 (uint8 in images).
* Units: phase in rad, TE in s, B0 in T, fields and χ in ppm, a name ending ``_hz`` in Hz,
  voxel sizes in mm. A mask is "inside" above 0.5.
* A nibabel image may stand for any array: its affine and voxel size are used (unless
  ``voxel_size``/``affine`` are given) and every volume result comes back as an image on that
  affine. Every image of a call must be on the first one's grid.
* ``b0_dir`` is B0's direction in voxel axes; ``None`` takes it from the affine (as
  ``qsm pipeline`` does), which is (0, 0, 1) without one.
* ``threads``: None or 0 = the CPUs this process may use; the GIL is released while the
  engine runs. ``progress(fraction, stage)`` is called as the engine works; an exception it
  raises is raised once the engine returns.
* Bad input raises :class:`qsmcore.InvalidInputError` naming the argument; a run over
  ``mem_budget`` raises :class:`qsmcore.BudgetError` before it allocates.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _qsmcore
from ._util import MemBudget, parse_mem_budget

_s = _qsmcore.stages

Progress = Callable[[float, str], None]
Vec3 = Sequence[float]
#: A NumPy array (or anything ``numpy.asarray`` takes) or a nibabel image.
ArrayLike = Any
PathLike = Union[str, "os.PathLike[str]"]
EchoTimes = Union[float, Sequence[float]]

ROMEO_WEIGHTS: Tuple[str, ...] = ("phase_coherence", "phase_gradient_coherence", "phase_linearity",
                                  "magnitude_coherence")
BFR_METHODS: Tuple[str, ...] = ("vsharp", "sharp", "resharp", "ismv", "pdf", "lbv")
INVERSION_METHODS: Tuple[str, ...] = ("tv", "tkd", "tikhonov", "rts", "ilsqr")


def _invalid(message: str) -> Exception:
    return _qsmcore.InvalidInputError(message)


def _is_image(x: Any) -> bool:
    return hasattr(x, "affine") and hasattr(x, "get_fdata") and hasattr(x, "header")


def _choice(value: Any, allowed: Sequence[str], what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise _invalid(f"{what}: {value!r} is not one of " + ", ".join(repr(a) for a in allowed))
    return value


def _echo_times(te: Optional[EchoTimes], what: str = "te") -> List[float]:
    """TEs in s as a list, checked as the engine checks a scan's: finite, in (0, 1], increasing."""
    if te is None:
        raise _invalid(f"{what}: the echo times (s) are needed")
    try:
        values = [] if isinstance(te, str) else np.atleast_1d(np.asarray(te, dtype=np.float64)).ravel().tolist()
    except (TypeError, ValueError):
        values = []
    if not values:
        raise _invalid(f"{what}: expected echo times in seconds, got {te!r}")
    for i, t in enumerate(values):
        if not math.isfinite(t) or t <= 0.0:
            raise _invalid(f"{what}: echo {i + 1}'s time {t} must be finite and positive (s)")
        if t > 1.0:
            raise _invalid(f"{what}: echo {i + 1}'s time {t} is above 1 s: echo times are in seconds, not ms")
        if i > 0 and not t > values[i - 1]:
            raise _invalid(f"{what}: echo times must increase strictly, in echo order ({values[i - 1]}, {t})")
    return [float(t) for t in values]


def _positive(value: Any, what: str, unit: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise _invalid(f"{what}: expected a number ({unit}), got {value!r}") from None
    if not math.isfinite(v) or v <= 0.0:
        raise _invalid(f"{what}: {v} must be positive and finite ({unit})")
    return v


def _vec3(value: Any, what: str) -> Tuple[float, float, float]:
    try:
        v = tuple(float(x) for x in value)
    except (TypeError, ValueError):
        raise _invalid(f"{what}: expected three numbers, got {value!r}") from None
    if len(v) != 3 or not all(math.isfinite(x) for x in v):
        raise _invalid(f"{what}: expected three finite numbers, got {value!r}")
    return v  # type: ignore[return-value]


def _threads(threads: Optional[int]) -> int:
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
        raise _invalid(f"threads: expected None or a count >= 0, got {threads!r}")
    return int(threads)


def _or0(value: Optional[float]) -> float:
    # The engine's options take 0 as "the method's default".
    return 0.0 if value is None else float(value)


class _Call:
    """One call's inputs: arrays as given, images unpacked; the first image gives the grid, and
    volume results go back as images on it."""

    def __init__(self, voxel_size: Optional[Vec3], affine: Any) -> None:
        self._voxel_size = voxel_size
        self._affine = affine
        self.like: Any = None
        self._like_name = ""

    def take(self, x: Any, what: str, optional: bool = False, frames: bool = False) -> Optional[np.ndarray]:
        if x is None:
            if optional:
                return None
            raise _invalid(f"{what}: missing")
        if _is_image(x):
            data = np.asarray(x.get_fdata(dtype=np.float64))
            if self.like is None:
                self.like, self._like_name = x, what
            elif data.shape[:3] != self.like.shape[:3] or not np.allclose(x.affine, self.like.affine, atol=1e-4):
                raise _invalid(f"{what}: the image is not on {self._like_name}'s grid "
                               f"({data.shape[:3]} vs {self.like.shape[:3]}, or the affines differ)")
        else:
            data = np.asarray(x)
            if data.dtype == object or not (np.issubdtype(data.dtype, np.number) or data.dtype == bool):
                raise _invalid(f"{what}: expected a numeric array or a nibabel image, got {type(x).__name__}")
        if not frames and data.ndim == 4 and data.shape[3] == 1:
            data = data[..., 0]  # a one-frame 4-D image (as some tools save masks)
        return data

    def voxel_size(self) -> Tuple[float, float, float]:
        if self._voxel_size is not None:
            return _vec3(self._voxel_size, "voxel_size")
        if self.like is not None:
            return tuple(float(z) for z in self.like.header.get_zooms()[:3])  # type: ignore[return-value]
        return (1.0, 1.0, 1.0)

    def affine(self) -> Optional[np.ndarray]:
        if self._affine is not None:
            return np.asarray(self._affine, dtype=np.float64)
        if self.like is not None:
            return np.asarray(self.like.affine, dtype=np.float64)
        return None

    def geometry(self) -> Dict[str, Any]:
        return {"voxel_size": self.voxel_size(), "affine": self.affine()}

    def b0_dir(self, b0_dir: Optional[Vec3]) -> Tuple[float, float, float]:
        if b0_dir is not None:
            return _vec3(b0_dir, "b0_dir")
        a = self.affine()
        if a is None:
            return (0.0, 0.0, 1.0)
        return tuple(_qsmcore.physics.b0_dir_from_affine(a))  # type: ignore[return-value]

    def out(self, array: np.ndarray, mask: bool = False) -> Any:
        """The result as given (no image came in) or as an image on the input's affine."""
        if self.like is None:
            return array
        return _image(array, self.like, self.affine(), mask)


def _image(array: np.ndarray, like: Any, affine: np.ndarray, mask: bool) -> Any:
    import nibabel as nib
    data = (np.asarray(array) > 0.5).astype(np.uint8) if mask else np.asarray(array)
    header = like.header.copy() if isinstance(like.header, nib.Nifti1Header) else None
    img = nib.Nifti1Image(data, affine, header)
    img.set_data_dtype(data.dtype)
    img.header.set_slope_inter(1.0, 0.0)
    if header is not None:
        _, scode = like.header.get_sform(coded=True)
        _, qcode = like.header.get_qform(coded=True)
        img.set_sform(affine, int(scode) or 1)
        img.set_qform(affine, int(qcode) or 1)
    return img


def _four_d(array: np.ndarray) -> np.ndarray:
    return array if array.ndim == 4 else array[..., np.newaxis]


def _paths(value: Any, what: str) -> List[str]:
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    try:
        paths = [os.fspath(v) for v in value]
    except TypeError:
        raise _invalid(f"{what}: expected a file path or a list of paths (one per echo), got {value!r}") from None
    if not paths:
        raise _invalid(f"{what}: no file given")
    return paths


def _overrides(te: Optional[EchoTimes], b0: Optional[float], b0_dir: Optional[Vec3],
               phase_scale: Optional[float]) -> Dict[str, Any]:
    if phase_scale is not None:
        ps = float(phase_scale)
        if not math.isfinite(ps) or ps == 0.0:
            raise _invalid(f"phase_scale: {phase_scale!r} must be a non-zero number (rad per raw unit)")
    return {"te": None if te is None else _echo_times(te),
            "b0": None if b0 is None else _positive(b0, "b0", "T"),
            "b0_dir": None if b0_dir is None else _vec3(b0_dir, "b0_dir"),
            "phase_scale": None if phase_scale is None else float(phase_scale)}


def _scan_result(d: Dict[str, Any], call: Optional[_Call] = None) -> Dict[str, Any]:
    d["magnitude"] = _four_d(d["magnitude"])
    d["phase"] = _four_d(d["phase"])
    if call is not None:
        d["magnitude"] = call.out(d["magnitude"])
        d["phase"] = call.out(d["phase"])
    return d


# --- the scan -------------------------------------------------------------------------------------

def read_scan(magnitude: Union[PathLike, Sequence[PathLike]], phase: Union[PathLike, Sequence[PathLike]],
              te: Optional[EchoTimes] = None, b0: Optional[float] = None, b0_dir: Optional[Vec3] = None,
              phase_scale: Optional[float] = None) -> Dict[str, Any]:
    """Reads and checks a multi-echo scan from NIfTI files, as ``qsm pipeline --mag --phase``.

    ``magnitude``/``phase``: one 4-D file each (frames = echoes), or a list of 3-D files, one per
    echo in echo order. TEs (s) and B0 (T) come from each file's JSON sidecar (``EchoTime``,
    ``MagneticFieldStrength``) unless ``te``/``b0`` are given; B0's direction from ``b0_dir``
    (voxel axes), else the sidecar's ``B0_dir``, else the affine. Phase in radians or vendor
    integers is detected and brought to rad in (−π, π]; ``phase_scale`` (rad per raw unit)
    overrides the detection.

    Returns a dict: ``magnitude`` and ``phase`` (rad) as ``(nx, ny, nz, echoes)`` float64 arrays,
    ``te`` (s), ``b0`` (T), ``b0_dir``, where each came from (``te_source``, ``b0_source``,
    ``b0_dir_source``), ``affine``, ``voxel_size`` (mm), ``notes`` (what was assumed),
    ``phase_scaling`` (``factor``, ``raw_offset``, ``assumed``, ``raw_min``, ``raw_max``: rad =
    wrap((raw + raw_offset)·factor)) and ``files``. Bad files raise InvalidInputError (IoError
    for unreadable ones) naming the file.
    """
    kw = _overrides(te, b0, b0_dir, phase_scale)
    kw["magnitude"] = _paths(magnitude, "magnitude")
    kw["phase"] = _paths(phase, "phase")
    return _scan_result(_s.read_scan(kw))


def make_scan(magnitude: ArrayLike, phase: ArrayLike, te: EchoTimes, b0: float, b0_dir: Optional[Vec3] = None,
              voxel_size: Optional[Vec3] = None, affine: Any = None,
              phase_scale: Optional[float] = None) -> Dict[str, Any]:
    """The checks of :func:`read_scan` on arrays (or images) already in memory: magnitude and phase
    with one frame per echo on one grid, finite, the phase an angle (rad, or vendor integers,
    detected, or scaled by ``phase_scale``), ``te`` one per echo (s, increasing), ``b0`` (T).
    Returns the same dict as :func:`read_scan` (``magnitude``/``phase`` images when images came in).
    """
    call = _Call(voxel_size, affine)
    kw = _overrides(_echo_times(te), _positive(b0, "b0", "T"), b0_dir, phase_scale)
    kw["magnitude"] = call.take(magnitude, "magnitude", frames=True)
    kw["phase"] = call.take(phase, "phase", frames=True)
    kw.update(call.geometry())
    return _scan_result(_s.make_scan(kw), call)


# --- the mask -------------------------------------------------------------------------------------

def brain_mask(magnitude: ArrayLike, phase: ArrayLike, te: EchoTimes, voxel_size: Optional[Vec3] = None,
               affine: Any = None, method: str = "quality", dilate: int = 1, fill_holes: float = 0.05,
               erode: int = 1, largest_component: bool = True, threads: Optional[int] = None,
               progress: Optional[Progress] = None) -> Any:
    """A brain mask (0/1) from the scan itself, as QSMxT's default: an Otsu threshold of ROMEO's
    phase quality (``method="quality"``: echo 1, echo 2 as the second phase, the magnitude) or of
    the echoes' root-sum-of-squares magnitude (``"magnitude"``), then ``dilate`` voxels, holes up
    to ``fill_holes`` of the volume filled (0: none, ≥ 1: any), ``erode`` voxels, and the largest
    6-connected component (``largest_component``). ``magnitude`` and ``phase`` (rad) have one
    frame per echo; ``te`` in s.
    """
    call = _Call(voxel_size, affine)
    kw = {"magnitude": call.take(magnitude, "magnitude", frames=True),
          "phase": call.take(phase, "phase", frames=True), "te": _echo_times(te),
          "method": _choice(method, ("quality", "magnitude"), "method"), "dilate": int(dilate),
          "erode": int(erode), "fill_holes": float(fill_holes), "largest_component": bool(largest_component),
          "threads": _threads(threads), "progress": progress}
    if kw["dilate"] < 0 or kw["erode"] < 0:
        raise _invalid("dilate, erode: voxels must be >= 0")
    kw.update(call.geometry())
    return call.out(_s.brain_mask(kw), mask=True)


# --- unwrapping ----------------------------------------------------------------------------------

def _weights(weights: Optional[Sequence[str]]) -> List[str]:
    if weights is None:
        return list(ROMEO_WEIGHTS)
    if isinstance(weights, str):
        weights = [weights]
    return [_choice(w, ROMEO_WEIGHTS, "weights") for w in weights]


def _romeo_kw(call: _Call, phase: ArrayLike, magnitude: ArrayLike, mask: ArrayLike, echo: int,
              te: Optional[EchoTimes], second_echo: Optional[int], weights: Optional[Sequence[str]],
              threads: Optional[int]) -> Dict[str, Any]:
    kw = {"phase": call.take(phase, "phase", frames=True),
          "magnitude": call.take(magnitude, "magnitude", optional=True, frames=True),
          "mask": call.take(mask, "mask", optional=True), "echo": int(echo),
          "te": None if te is None else _echo_times(te),
          "second_echo": None if second_echo is None else int(second_echo),
          "weights": _weights(weights), "threads": _threads(threads)}
    kw.update(call.geometry())
    return kw


def romeo_unwrap(phase: ArrayLike, magnitude: ArrayLike = None, mask: ArrayLike = None, *, echo: int = 0,
                 te: Optional[EchoTimes] = None, second_echo: Optional[int] = None,
                 weights: Optional[Sequence[str]] = None, max_seeds: int = 1, voxel_size: Optional[Vec3] = None,
                 affine: Any = None, threads: Optional[int] = None, progress: Optional[Progress] = None) -> Any:
    """ROMEO's quality-guided region growing (Dymerska et al. 2021) on one echo: frame ``echo`` of
    ``phase`` (rad; 3-D, or 4-D with echoes last). The result differs from the input by a whole
    multiple of 2π in every voxel it reaches, and is 0 outside ``mask`` (above 0.5 = inside) and
    where the phase is not finite; without a mask every connected region grows from its own seed.

    Edge weights: ``weights`` names the terms used (default all of :data:`ROMEO_WEIGHTS`); the
    magnitude term needs ``magnitude`` (3-D, or one frame per echo), and with ``te`` (one per
    echo of ``phase``) the ``second_echo`` (default the next echo, the previous for the last)
    feeds the gradient-coherence term and the seed's 2π class. ``max_seeds`` > 1 lets ROMEO plant
    new seeds when the remaining edges get poor.
    """
    call = _Call(voxel_size, affine)
    kw = _romeo_kw(call, phase, magnitude, mask, echo, te, second_echo, weights, threads)
    kw.update({"max_seeds": int(max_seeds), "progress": progress})
    return call.out(_s.romeo_unwrap(kw))


def romeo_voxel_quality(phase: ArrayLike, magnitude: ArrayLike = None, mask: ArrayLike = None, *, echo: int = 0,
                        te: Optional[EchoTimes] = None, second_echo: Optional[int] = None,
                        weights: Optional[Sequence[str]] = None, voxel_size: Optional[Vec3] = None,
                        affine: Any = None, threads: Optional[int] = None) -> Any:
    """ROMEO's voxel quality in [0, 1]: the mean weight of each voxel's 6 edges (edges leaving the
    volume or the mask count 0). Arguments as :func:`romeo_unwrap`. QSMxT masks with its Otsu
    threshold (:func:`brain_mask`)."""
    call = _Call(voxel_size, affine)
    return call.out(_s.romeo_voxel_quality(_romeo_kw(call, phase, magnitude, mask, echo, te, second_echo, weights,
                                                     threads)))


def unwrap_echoes(phase: ArrayLike, te: EchoTimes, magnitude: ArrayLike = None, mask: ArrayLike = None,
                  template: int = 0, individual: bool = False, *, weights: Optional[Sequence[str]] = None,
                  max_seeds: int = 1, voxel_size: Optional[Vec3] = None, affine: Any = None,
                  threads: Optional[int] = None, progress: Optional[Progress] = None) -> Any:
    """Every echo of ``phase`` (rad, ``(nx, ny, nz, echoes)``) unwrapped: the ``template`` echo by
    ROMEO, every other echo temporally from its unwrapped neighbour,
    φ_e − 2π·round((φ_e − φ_r·TE_e/TE_r)/2π) — which assumes φ ∝ TE, so remove the receiver
    phase offset first (:func:`map_field` does). ``individual``: each echo by ROMEO on its own,
    then shifted by whole turns to match the previous one. ``te`` in s, one per echo;
    ``magnitude`` 3-D or one frame per echo. Returns the 4-D unwrapped phase (rad), 0 outside
    ``mask``."""
    call = _Call(voxel_size, affine)
    kw = {"phase": call.take(phase, "phase", frames=True), "te": _echo_times(te),
          "magnitude": call.take(magnitude, "magnitude", optional=True, frames=True),
          "mask": call.take(mask, "mask", optional=True), "template": int(template),
          "individual": bool(individual), "weights": _weights(weights), "max_seeds": int(max_seeds),
          "threads": _threads(threads), "progress": progress}
    kw.update(call.geometry())
    return call.out(_s.unwrap_echoes(kw))


def laplacian_unwrap(phase: ArrayLike, mask: ArrayLike = None, congruent: bool = False, *, echo: int = 0,
                     voxel_size: Optional[Vec3] = None, affine: Any = None, threads: Optional[int] = None,
                     progress: Optional[Progress] = None) -> Any:
    """Laplacian unwrapping (Schofield & Zhu 2003) of frame ``echo`` of ``phase`` (rad), in its
    least-squares form: smooth, equal to the truth plus a constant multiple of 2π per connected
    piece on a residue-free phase, but not congruent with the input unless ``congruent`` (then
    φ + 2π·round((estimate − φ)/2π)). 0 outside ``mask``."""
    call = _Call(voxel_size, affine)
    kw = {"phase": call.take(phase, "phase", frames=True), "mask": call.take(mask, "mask", optional=True),
          "congruent": bool(congruent), "echo": int(echo), "threads": _threads(threads), "progress": progress}
    kw.update(call.geometry())
    return call.out(_s.laplacian_unwrap(kw))


# --- the total field -------------------------------------------------------------------------------

def map_field(magnitude: ArrayLike, phase: ArrayLike, te: EchoTimes, mask: ArrayLike, *, unwrap: str = "romeo",
              offset_correction: bool = True, offset_echoes: Tuple[int, int] = (0, 1), offset_sigma: float = 7.0,
              weighting: str = "snr", template: int = 0, individual: bool = False, max_seeds: int = 1,
              return_phase_offset: bool = True, voxel_size: Optional[Vec3] = None, affine: Any = None,
              threads: Optional[int] = None, progress: Optional[Progress] = None) -> Dict[str, Any]:
    """The total field from a multi-echo scan: the receiver phase offset removed (MCPC-3D-S on
    ``offset_echoes``, smoothed with a Gaussian of ``offset_sigma`` mm; skipped for one echo or
    with ``offset_correction=False``), every echo unwrapped (``unwrap="romeo"``: ROMEO on the
    ``template`` echo, the others temporally; ``"laplacian"``), and the field fitted over the
    echoes, B0 = Σ w_e·φ_e/(2π·TE_e) / Σ w_e with ``weighting`` ``"snr"`` (w = mag·TE),
    ``"variance"`` (mag²·TE²), ``"average"`` (1) or ``"te"`` (TE).

    ``magnitude`` and ``phase`` (rad, wrapped) have one frame per echo, ``te`` in s, ``mask`` above
    0.5 = inside. Returns ``total_field_hz`` (Hz, 0 outside the mask), ``noise_hz`` (the field's
    standard error from the magnitudes' noise, Hz), ``phase_offset`` (rad, the removed offset;
    with ``return_phase_offset``) and ``notes`` (what was assumed).
    """
    call = _Call(voxel_size, affine)
    kw = {"magnitude": call.take(magnitude, "magnitude", frames=True),
          "phase": call.take(phase, "phase", frames=True), "te": _echo_times(te), "mask": call.take(mask, "mask"),
          "unwrap": _choice(unwrap, ("romeo", "laplacian"), "unwrap"), "offset_correction": bool(offset_correction),
          "offset_echoes": [int(e) for e in offset_echoes], "offset_sigma": float(offset_sigma),
          "weighting": _choice(weighting, ("snr", "variance", "average", "te"), "weighting"),
          "template": int(template), "individual": bool(individual), "max_seeds": int(max_seeds),
          "return_phase_offset": bool(return_phase_offset), "threads": _threads(threads), "progress": progress}
    if not kw["offset_sigma"] >= 0.0:
        raise _invalid(f"offset_sigma: {offset_sigma!r} must be >= 0 (mm)")
    kw.update(call.geometry())
    d = _s.map_field(kw)
    for k in ("total_field_hz", "noise_hz", "phase_offset"):
        if k in d:
            d[k] = call.out(d[k])
    return d


# --- background removal and inversion ---------------------------------------------------------------

def default_bfr_method() -> str:
    """The background removal the pipeline uses when none is named (the measured best)."""
    return _s.default_bfr_method()


def remove_background(total_field: ArrayLike, mask: ArrayLike, method: Optional[str] = None,
                      voxel_size: Optional[Vec3] = None, b0_dir: Optional[Vec3] = None,
                      radii: Optional[Sequence[float]] = None, threshold: float = 0.05,
                      lambda_: Optional[float] = None, tolerance: Optional[float] = None,
                      max_iterations: Optional[int] = None, weights: ArrayLike = None, *, affine: Any = None,
                      threads: Optional[int] = None, progress: Optional[Progress] = None) -> Dict[str, Any]:
    """Removes the background field (of sources outside ``mask``, harmonic inside it) from
    ``total_field`` (any unit — the methods are linear — e.g. Hz or ppm).

    ``method``: ``"vsharp"``, ``"sharp"``, ``"resharp"``, ``"ismv"`` (the SHARP family: the mask is
    eroded by the sphere's radius), ``"pdf"`` or ``"lbv"`` (the whole mask kept); None = the
    pipeline's default (:func:`default_bfr_method`). ``radii`` in mm (V-SHARP: all of them, default
    12…1 mm; the others the first); ``threshold``: (V-)SHARP's deconvolution threshold;
    ``lambda_``: RESHARP's Tikhonov weight; ``tolerance``/``max_iterations``: the iterative
    methods' (None: the method's default); ``weights``: PDF's data weights (e.g. 1/noise).
    ``b0_dir`` is used by PDF's dipole kernel.

    Returns ``local_field`` (the input's unit, 0 outside the returned ``mask``), ``mask`` (where it
    is valid: the input mask, eroded by the SHARP family), ``eroded_voxels``, ``iterations`` and
    ``residual`` (iterative methods' final relative residual).
    """
    call = _Call(voxel_size, affine)
    name = default_bfr_method() if method is None else _choice(method, BFR_METHODS, "method")
    kw = {"total_field": call.take(total_field, "total_field"), "mask": call.take(mask, "mask"),
          "weights": call.take(weights, "weights", optional=True), "method": name,
          "radii": [] if radii is None else [float(r) for r in np.atleast_1d(radii)], "threshold": float(threshold),
          "lambda": _or0(lambda_), "tolerance": _or0(tolerance),
          "max_iterations": 0 if max_iterations is None else int(max_iterations),
          "threads": _threads(threads), "progress": progress}
    kw.update(call.geometry())
    kw["b0_dir"] = call.b0_dir(b0_dir)
    d = _s.remove_background(kw)
    d["local_field"] = call.out(d["local_field"])
    d["mask"] = call.out(d["mask"], mask=True)
    return d


def invert_dipole(local_field: ArrayLike, mask: ArrayLike, method: str = "tv", voxel_size: Optional[Vec3] = None,
                  b0_dir: Optional[Vec3] = None, *, threshold: Optional[float] = None,
                  lambda_: Optional[float] = None, rho: Optional[float] = None, mu: Optional[float] = None,
                  tolerance: Optional[float] = None, max_iterations: Optional[int] = None,
                  lsmr_iterations: Optional[int] = None, tikhonov_prior: str = "identity",
                  laplacian_weights: bool = False, pad: int = 0, reference: Union[str, ArrayLike] = "mask",
                  affine: Any = None, threads: Optional[int] = None,
                  progress: Optional[Progress] = None, masked_data: bool = True,
                  data_erode: int = 0) -> Dict[str, Any]:
    """χ (ppm) from the local field (ppm) inside ``mask``: ``method`` ``"tv"`` (TV-ADMM, Bilgic et
    al. 2014), ``"tkd"`` (thresholded k-space division), ``"tikhonov"`` (D/(D² + λΓ), Γ =
    ``tikhonov_prior`` ``"identity"`` or ``"gradient"``), ``"rts"`` (Kames et al. 2018) or
    ``"ilsqr"`` (Li et al. 2015). Options left None take the method's default: ``threshold`` (TKD's
    |D| threshold, RTS's δ), ``lambda_``, ``rho`` (ADMM penalty), ``mu`` (RTS), ``tolerance``,
    ``max_iterations``, ``lsmr_iterations`` (RTS); ``laplacian_weights`` (iLSQR); ``pad`` zero
    voxels per axis before the FFT grid is rounded up to a fast size (−1: the volume's own grid).
    ``masked_data`` (TV): the data term inside the mask only (default); False is Bilgic et al.'s
    closed form, which fits a field of 0 outside it (docs/methods.md §6.3); ``data_erode`` (TV with
    ``masked_data``): the data term's mask eroded by that many voxels, χ still on the whole mask
    (``qsm pipeline`` uses 2: a pipeline's local field is least right at the brain's edge).
    ``reference``: ``"mask"`` (subtract the mean inside the mask), ``"none"``, or a region mask
    whose mean is subtracted (e.g. CSF).

    Returns ``chi`` (ppm, 0 outside the mask), ``iterations``, ``final_change`` (the last relative
    change of an iterative method) and ``predicted_peak_bytes`` (the engine's memory prediction).
    """
    call = _Call(voxel_size, affine)
    region = None
    if isinstance(reference, str):
        _choice(reference, ("mask", "none"), "reference")
    else:
        region = call.take(reference, "reference")
    kw = {"local_field": call.take(local_field, "local_field"), "mask": call.take(mask, "mask"),
          "method": _choice(method, INVERSION_METHODS, "method"), "threshold": _or0(threshold),
          "lambda": _or0(lambda_), "rho": _or0(rho), "mu": _or0(mu), "tolerance": _or0(tolerance),
          "max_iterations": 0 if max_iterations is None else int(max_iterations),
          "lsmr_iterations": 0 if lsmr_iterations is None else int(lsmr_iterations),
          "tikhonov_prior": _choice(tikhonov_prior, ("identity", "gradient"), "tikhonov_prior"),
          "laplacian_weights": bool(laplacian_weights), "pad": int(pad), "masked_data": bool(masked_data),
          "data_erode": int(data_erode),
          "reference": reference if isinstance(reference, str) else "region", "reference_region": region,
          "threads": _threads(threads), "progress": progress}
    kw.update(call.geometry())
    kw["b0_dir"] = call.b0_dir(b0_dir)
    d = _s.invert_dipole(kw)
    d["chi"] = call.out(d["chi"])
    return d


# --- R2*, T2*, SWI ----------------------------------------------------------------------------------

def _relaxometry(magnitude: ArrayLike, te: EchoTimes, mask: ArrayLike, method: str, weighting: str,
                 simpson_correction: bool, max_r2star: float, voxel_size: Optional[Vec3], affine: Any,
                 threads: Optional[int], progress: Optional[Progress], t2star: bool) -> Any:
    call = _Call(voxel_size, affine)
    kw = {"magnitude": call.take(magnitude, "magnitude", frames=True), "te": _echo_times(te),
          "mask": call.take(mask, "mask", optional=True),
          "method": _choice(method, ("loglinear", "arlo"), "method"),
          "weighting": _choice(weighting, ("signal_squared", "unweighted"), "weighting"),
          "simpson_correction": bool(simpson_correction), "max_r2star": _positive(max_r2star, "max_r2star", "Hz"),
          "t2star": t2star, "threads": _threads(threads), "progress": progress}
    kw.update(call.geometry())
    return call.out(_s.r2star(kw))


def r2star(magnitude: ArrayLike, te: EchoTimes, mask: ArrayLike = None, method: str = "loglinear", *,
           weighting: str = "signal_squared", simpson_correction: bool = True, max_r2star: float = 500.0,
           voxel_size: Optional[Vec3] = None, affine: Any = None, threads: Optional[int] = None,
           progress: Optional[Progress] = None) -> Any:
    """R2* in Hz (1/s) from the magnitudes (one frame per echo; ``te`` in s), inside ``mask``
    (None = everywhere), 0 outside: ``method="loglinear"`` (least squares of ln S against TE,
    ``weighting`` ``"signal_squared"`` — S² weights, one refit — or ``"unweighted"``; ≥ 2 echoes) or
    ``"arlo"`` (Pei et al. 2015; ≥ 3 equally spaced echoes; ``simpson_correction`` makes it exact
    on noise-free decays). Estimates are clamped to [0, ``max_r2star``]. A voxel whose magnitude
    is not positive in some echo is fitted on the echoes before it."""
    return _relaxometry(magnitude, te, mask, method, weighting, simpson_correction, max_r2star, voxel_size,
                        affine, threads, progress, False)


def t2star(magnitude: ArrayLike, te: EchoTimes, mask: ArrayLike = None, method: str = "loglinear", *,
           weighting: str = "signal_squared", simpson_correction: bool = True, max_r2star: float = 500.0,
           voxel_size: Optional[Vec3] = None, affine: Any = None, threads: Optional[int] = None,
           progress: Optional[Progress] = None) -> Any:
    """T2* in s = 1/R2* (0 where R2* is 0); arguments as :func:`r2star`."""
    return _relaxometry(magnitude, te, mask, method, weighting, simpson_correction, max_r2star, voxel_size,
                        affine, threads, progress, True)


def swi(magnitude: ArrayLike, field_hz: ArrayLike, mask: ArrayLike, te: EchoTimes, *,
        highpass_sigma: Vec3 = (4.0, 4.0, 0.0), scaling: str = "tanh", strength: float = 4.0, phase_echo: int = -1,
        mip_slices: int = 7, voxel_size: Optional[Vec3] = None, affine: Any = None, threads: Optional[int] = None,
        progress: Optional[Progress] = None) -> Dict[str, Any]:
    """A susceptibility-weighted image (CLEAR-SWI's recipe, Eckstein et al. 2021) from the
    magnitude (3-D, or one frame per echo: combined by root-sum-of-squares) and a field map in Hz
    (e.g. :func:`map_field`'s ``total_field_hz``) inside ``mask``: the field high-passed (Gaussian
    of ``highpass_sigma`` voxels per axis, 0 = that axis not smoothed), turned into a phase mask
    (``scaling="tanh"``: scale-free, CLEAR-SWI's default; ``"classic"``: Haacke's (1 − φ/π)^strength
    with φ at ``phase_echo``, from 0, −1 = the last) and multiplied in. Returns ``swi`` (the
    magnitude's units, 0 outside the mask) and ``mip`` (its minimum over ``mip_slices`` slices
    along z)."""
    call = _Call(voxel_size, affine)
    kw = {"magnitude": call.take(magnitude, "magnitude", frames=True), "field_hz": call.take(field_hz, "field_hz"),
          "mask": call.take(mask, "mask"), "te": _echo_times(te), "highpass_sigma": _vec3(highpass_sigma,
                                                                                          "highpass_sigma"),
          "scaling": _choice(scaling, ("tanh", "classic"), "scaling"), "strength": float(strength),
          "phase_echo": int(phase_echo), "mip_slices": int(mip_slices), "threads": _threads(threads),
          "progress": progress}
    kw.update(call.geometry())
    d = _s.swi(kw)
    return {k: call.out(v) for k, v in d.items()}


# --- the whole pipeline -------------------------------------------------------------------------------

def network_inversion_ids() -> Tuple[str, ...]:
    """The registry networks ``field_pipeline(inversion=…)`` may name: those mapping a local field
    or the wrapped phase to χ."""
    return tuple(_s.network_inversion_ids())


def field_pipeline(magnitude: ArrayLike, phase: ArrayLike, te: EchoTimes, b0: float,
                   voxel_size: Optional[Vec3] = None, affine: Any = None, b0_dir: Optional[Vec3] = None,
                   mask: ArrayLike = None, mask_method: str = "quality", unwrap: str = "romeo",
                   bfr: Optional[str] = None, inversion: str = "tv", threads: Optional[int] = 0,
                   mem_budget: MemBudget = None, progress: Optional[Progress] = None, *,
                   offset_correction: bool = True, weighting: str = "snr",
                   bfr_radii: Optional[Sequence[float]] = None, tkd_threshold: float = 0.15,
                   phase_scale: Optional[float] = None,
                   mask_net_files: Optional[Sequence[PathLike]] = None,
                   inversion_files: Optional[Sequence[PathLike]] = None, r2star: bool = False,
                   reference: Union[bool, ArrayLike] = True, consistency: bool = True,
                   field_beyond_mask: bool = True, precision: str = "f32",
                   local_field: Optional[str] = None) -> Dict[str, Any]:
    """From a multi-echo scan's magnitude and phase to its local field (and with
    ``inversion=`` one of INVERSION_METHODS: χ) in one call, as ``qsm pipeline``: the scan checked as
    :func:`make_scan` does (phase in rad or vendor integers, ``phase_scale`` overriding), the
    brain mask (``mask`` given, else from the data by ``mask_method`` ``"quality"`` or
    ``"magnitude"``, or ``"hd-bet"``: the registry's HD-BET on the echoes' root-sum-of-squares,
    its weights found as :func:`qsmcore.resolve_weights` does unless ``mask_net_files``), the
    total field (:func:`map_field` with ``unwrap``, ``offset_correction``, ``weighting``), the
    background removed (``bfr``: a method of :func:`remove_background`, None = the measured best;
    ``bfr_radii`` in mm), then optionally a dipole inversion (TKD's threshold ``tkd_threshold``):
    one of INVERSION_METHODS, or a registry network that maps a field to χ
    (:func:`network_inversion_ids`: ``"qsmcore-invnet"``, ``"xqsm"``, …, run as
    :func:`run_network` runs it, its weights found as :func:`qsmcore.resolve_weights` does unless
    ``inversion_files``; ``"iqsm"``/``"iqsm-plus"`` take the wrapped phase and replace the field
    map and background removal, as their authors run them; after a network on the local field,
    ``consistency=True`` adds the data-consistency stage of ``qsm pipeline``, docs/methods.md §6.7).
    χ is referenced to the mask's mean
    (``reference=True``), not at all (``False``), or to the mean inside a region (an array or
    image on the scan's grid, above 0.5 = in, e.g. CSF). ``r2star=True`` adds R2* (s⁻¹, log-linear
    fit of the magnitudes inside the brain mask; 2 echoes or more). With a ``mask`` given or from
    HD-BET, ``field_beyond_mask=True`` runs the field map, background removal and inversion also
    where the data's own mask reaches beyond it, and cuts every output back to the mask (χ at the
    brain's edge is more accurate so, docs/methods.md §5.1); ``False``: on the mask alone.
    ``precision="bf16"`` (opt-in) runs the networks' convolutions on bfloat16, as ``--precision``.
    ``local_field``: after TV-ADMM (None or ``"chi"``) the local field returned is the field χ makes
    inside the mask, nearer the truth at the brain's edge than the background removal's
    (docs/methods.md §5.2); ``"removal"``: the background removal's, as every other inversion
    returns it.

    Every stage's peak memory is predicted before anything runs; with ``mem_budget`` (bytes, a
    size such as ``"2GiB"``, ``"none"``/0, or None for what the process may use) a run that
    cannot fit raises BudgetError before the arrays are copied into the engine.

    Returns a dict: ``total_field_hz`` (Hz, in the brain mask), ``local_field`` (ppm),
    ``mask`` (where the local field is valid), ``brain_mask`` (before background removal),
    ``chi`` (ppm, unless ``inversion="none"``), ``r2star`` (s⁻¹, with ``r2star=True``; the
    fields are absent after a phase network), ``eroded_voxels``, ``stages`` (one dict per stage: ``stage``,
    ``method``, ``seconds``, ``predicted_peak_bytes``, ``measured_peak_bytes`` — accounted bytes
    above the pipeline's start — ``held_at_start_bytes`` and the stage's figures),
    ``predicted_peak_bytes`` and ``measured_peak_bytes`` (the whole call's, the engine's copy of
    the scan included, as the command counts the scan it reads), ``stages_predicted_peak_bytes``,
    ``stages_measured_peak_bytes``, ``notes``, and the scan's ``te``, ``b0``, ``b0_dir``,
    ``b0_dir_source``, ``phase_scaling``. Volumes are images when images came in.
    """
    call = _Call(voxel_size, affine)
    kw = _overrides(_echo_times(te), _positive(b0, "b0", "T"), b0_dir, phase_scale)
    kw.update({"magnitude": call.take(magnitude, "magnitude", frames=True),
               "phase": call.take(phase, "phase", frames=True), "mask": call.take(mask, "mask", optional=True),
               "mask_method": _choice(mask_method, ("quality", "magnitude", "hd-bet"), "mask_method"),
               "mask_net_files": [], "unwrap": _choice(unwrap, ("romeo", "laplacian"), "unwrap"),
               "offset_correction": bool(offset_correction),
               "weighting": _choice(weighting, ("snr", "variance", "average", "te"), "weighting"),
               "bfr": None if bfr is None else _choice(bfr, BFR_METHODS, "bfr"),
               "bfr_radii": [] if bfr_radii is None else [float(r) for r in np.atleast_1d(bfr_radii)],
               "inversion": _choice(inversion, ("none",) + INVERSION_METHODS + network_inversion_ids(),
                                    "inversion"),
               "inversion_files": [], "r2star": bool(r2star), "consistency": bool(consistency),
               "field_beyond_mask": bool(field_beyond_mask),
               "local_field": None if local_field is None else _choice(local_field, ("chi", "removal"), "local_field"),
               "reference": True, "reference_region": None,
               "tkd_threshold": float(tkd_threshold), "threads": _threads(threads),
               "mem_budget": parse_mem_budget(mem_budget), "progress": progress,
               "precision": _choice(precision, ("f32", "bf16"), "precision")})
    if kw["mask"] is None and mask_method == "hd-bet":
        kw["mask_net_files"] = ([os.fspath(p) for p in mask_net_files] if mask_net_files is not None
                                else _qsmcore.resolve_weights("hd-bet", True, True))
    if inversion in network_inversion_ids():
        kw["inversion_files"] = ([os.fspath(p) for p in inversion_files] if inversion_files is not None
                                 else _qsmcore.resolve_weights(inversion, True, True))
    if isinstance(reference, bool):
        kw["reference"] = reference
    else:
        kw["reference_region"] = call.take(reference, "reference", optional=False)
    kw.update(call.geometry())
    d = _s.field_pipeline(kw)
    for k in ("total_field_hz", "local_field", "chi", "r2star"):
        if k in d:
            d[k] = call.out(d[k])
    for k in ("mask", "brain_mask"):
        d[k] = call.out(d[k], mask=True)
    return d


#: ``qsmcore.pipeline``: the scan-to-χ pipeline (:func:`field_pipeline`; its default inversion is TV-ADMM).
pipeline = field_pipeline

__all__ = [
    "read_scan", "make_scan", "brain_mask", "romeo_unwrap", "romeo_voxel_quality", "unwrap_echoes",
    "laplacian_unwrap", "map_field", "default_bfr_method", "remove_background", "invert_dipole", "r2star",
    "t2star", "swi", "field_pipeline", "pipeline", "network_inversion_ids", "ROMEO_WEIGHTS", "BFR_METHODS", "INVERSION_METHODS",
]
