"""run_network / run_network_nifti: registry networks on arrays and nibabel images."""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _qsmcore
from ._util import MemBudget, parse_mem_budget

Progress = Callable[[float, str], None]
Vec3 = Sequence[float]


def _primary_role(needs: Dict[str, Any]) -> str:
    # The network's primary input, as the CLI's --in: its field (or phase), else its magnitude,
    # else its R2*, else a χ map.
    for role in ("field", "magnitude", "r2star", "qsm"):
        if needs[role]:
            return role
    raise _qsmcore.InvalidInputError("the network declares no volume input")


def _binary_mask(mask: Any) -> np.ndarray:
    # As `qsm run --mask`: above 0.5 is brain (the authors' binarisation); an empty mask is refused.
    m = (np.asarray(mask) > 0.5).astype(np.float64)
    if not m.any():
        raise _qsmcore.InvalidInputError("mask: the mask is empty (no voxel is above 0.5)")
    return m


def _te_list(te: Union[None, float, Sequence[float]]) -> list:
    if te is None:
        return []
    tes = [float(t) for t in (te if isinstance(te, (list, tuple, np.ndarray)) else [te])]
    for t in tes:
        if not 0.0 < t <= 1.0:
            raise _qsmcore.InvalidInputError(f"te: echo times are in seconds and must lie in (0, 1], got {t}")
    return tes


def _check_needs(spec: Any, arrays: Dict[str, Any], tes: list, b0: Optional[float]) -> None:
    needs = spec.needs
    missing = [f"{role} (the {needs['field_kind'] or role})" if role == "field" else role
               for role in ("field", "magnitude", "r2star", "r2prime", "qsm", "mask")
               if needs[role] and arrays.get(role) is None]
    if needs["te"] and not tes:
        missing.append("te (echo time in s)")
    if needs["b0"] and b0 is None:
        missing.append("b0 (field strength in T)")
    if missing:
        raise _qsmcore.InvalidInputError(f"{spec.id} ({spec.name}) needs " + ", ".join(missing))


def run_network(id: str, field: Any, mask: Any = None, voxel_size: Vec3 = (1.0, 1.0, 1.0),
                b0: Optional[float] = None, b0_dir: Optional[Vec3] = None,
                te: Union[None, float, Sequence[float]] = None, *, affine: Any = None,
                magnitude: Any = None, r2star: Any = None, r2prime: Any = None, qsm: Any = None,
                unit: Optional[str] = None, threads: Optional[int] = None, mem_budget: MemBudget = None,
                residency: str = "full", backend: str = "onednn", precision: str = "f32",
                tile: Union[None, int, Sequence[int]] = None, halo: int = -1,
                test_time_flips: bool = True, hdbet_mirroring: bool = False, phase_sign: float = -1.0,
                ignore_domain: bool = False, progress: Optional[Progress] = None,
                model_paths: Optional[Sequence[Union[str, os.PathLike]]] = None, verify: bool = True,
                allow_download: bool = True, return_info: bool = False, record_graph_runs: bool = False,
                spill: bool = True, spill_dir: Optional[Union[str, os.PathLike]] = None) -> Any:
    """Runs registry network ``id`` as ``qsm run`` does, on arrays in NIfTI index order (nx, ny, nz).

    ``field`` is the network's primary input: the local or total field (ppm unless ``unit``), the
    wrapped phase in rad for iQSM/iQFM/iQSM+ (4-D: one frame per echo, one ``te`` each), else the
    magnitude (HD-BET, SynthSeg, RS2-Net) or R2* (R2PRIMEnet); ``qsmcore.model(id).needs`` lists
    what a network takes. ``affine`` (4×4, voxel -> scanner mm) gives B0's direction unless
    ``b0_dir`` (voxel axes) is given. ``progress(fraction, stage)`` is called during the run. The
    weights are found like ``qsm fetch`` (``$QSM_MODEL_DIR_<ID>``, ``$QSM_MODEL_DIR``, the cache,
    a download) unless ``model_paths`` names the ONNX files.

    Returns ``{output name: float64 array}`` (e.g. ``"chi"`` in ppm), or ``(outputs, info)`` with
    ``return_info``: units, predicted and measured peak bytes, tiles, stage times, warnings, and
    with ``record_graph_runs`` a copy of what each run of the ONNX graph(s) was fed and returned
    (``info["graph_runs"]``: ``{"file", "inputs", "outputs"}`` in call order). Over
    ``mem_budget`` the whole volume still runs, its activations spilled to a file in ``spill_dir``
    ($TMPDIR, else /tmp) and read back exactly (``info["spill"]`` says what moved); ``spill=False``
    refuses instead. Bad input raises InvalidInputError, a run that cannot fit BudgetError, before
    anything runs. ``precision="bf16"`` (opt-in) runs the convolutions on bfloat16 inputs and
    weights with f32 sums, as ``qsm run --precision bf16`` (``OnnxModel``'s ``precision``).
    """
    spec = _qsmcore.model(id)
    primary = _primary_role(spec.needs)
    arrays = {"field": None, "magnitude": magnitude, "r2star": r2star, "r2prime": r2prime, "qsm": qsm,
              "mask": None if mask is None else _binary_mask(mask)}
    if primary != "field" and arrays[primary] is not None:
        raise _qsmcore.InvalidInputError(
            f"{primary} and field both name the primary input of {id} ({primary}); give it once, as field")
    arrays[primary] = field
    tes = _te_list(te)
    _check_needs(spec, arrays, tes, b0)
    phase_net = spec.needs["field_kind"] == "wrapped phase"
    if unit is None:
        unit = "rad" if phase_net else "ppm"
    if model_paths is None:
        paths = _qsmcore.resolve_weights(id, verify, allow_download)
    else:
        paths = [os.fspath(p) for p in model_paths]
    physics = {"voxel_size": tuple(float(v) for v in voxel_size), "affine": affine, "unit": unit, "b0": b0,
               "b0_dir": b0_dir, "te": tes}
    engine = {"threads": 0 if threads is None else int(threads), "mem_budget": parse_mem_budget(mem_budget),
              "residency": residency, "backend": backend, "precision": precision, "halo": int(halo),
              "tile": None if tile is None else ([int(tile)] if np.isscalar(tile) else [int(t) for t in tile]),
              "test_time_flips": test_time_flips, "hdbet_mirroring": hdbet_mirroring,
              "phase_sign": float(phase_sign), "ignore_domain": ignore_domain,
              "record_graph_runs": bool(record_graph_runs), "spill": bool(spill),
              "spill_dir": None if spill_dir is None else os.fspath(spill_dir)}
    outputs, info = _qsmcore._run_network(id, paths, {k: v for k, v in arrays.items() if v is not None},
                                          physics, engine, progress)
    for w in info["warnings"]:
        warnings.warn(f"qsmcore: {w}", stacklevel=2)
    result = {name: array for name, _, array in outputs}
    if not return_info:
        return result
    info["units"] = {name: u for name, u, _ in outputs}
    return result, info


def _volume_of(img: Any, what: str) -> Tuple[np.ndarray, Tuple[float, float, float], np.ndarray]:
    import nibabel as nib
    if isinstance(img, (str, os.PathLike)):
        img = nib.load(os.fspath(img))
    data = np.asarray(img.get_fdata(dtype=np.float64))
    zooms = tuple(float(z) for z in img.header.get_zooms()[:3])
    if data.ndim < 3:
        raise _qsmcore.InvalidInputError(f"{what}: expected a 3-D image, got {data.ndim}-D")
    return data, zooms, np.asarray(img.affine, dtype=np.float64)


def _output_image(array: np.ndarray, unit: str, like: Any) -> Any:
    import nibabel as nib
    # As `qsm run` stores them: float32, or uint8 for integral labels in 0..255.
    if unit == "label" and np.all((array >= 0) & (array <= 255) & (array == np.floor(array))):
        data = array.astype(np.uint8)
    else:
        data = array.astype(np.float32)
    header = like.header.copy() if hasattr(like, "header") else None
    out = nib.Nifti1Image(data, like.affine, header)
    out.set_data_dtype(data.dtype)
    out.header.set_slope_inter(1.0, 0.0)
    if hasattr(like, "header"):
        _, scode = like.header.get_sform(coded=True)
        _, qcode = like.header.get_qform(coded=True)
        out.set_sform(like.affine, int(scode) or 1)
        out.set_qform(like.affine, int(qcode) or 1)
    return out


def run_network_nifti(id: str, img: Any, mask: Any = None, *, magnitude: Any = None, r2star: Any = None,
                      r2prime: Any = None, qsm: Any = None, return_info: bool = False, **options: Any) -> Any:
    """``run_network`` on nibabel images (or paths to .nii/.nii.gz): voxel size and affine come from
    ``img``; every other image must be on its grid. Returns ``{output name: nibabel.Nifti1Image}``
    on the input's affine, stored as ``qsm run`` writes them (float32; uint8 for labels)."""
    import nibabel as nib
    if isinstance(img, (str, os.PathLike)):
        img = nib.load(os.fspath(img))
    data, zooms, affine = _volume_of(img, "img")
    extra = {}
    for name, other in (("mask", mask), ("magnitude", magnitude), ("r2star", r2star), ("r2prime", r2prime),
                        ("qsm", qsm)):
        if other is None:
            continue
        odata, ozooms, oaffine = _volume_of(other, name)
        if odata.shape[:3] != data.shape[:3] or not np.allclose(oaffine, affine, atol=1e-4):
            raise _qsmcore.InvalidInputError(f"{name}: not on the grid of img ({data.shape[:3]}, affine differs)")
        extra[name] = odata
    result, info = run_network(id, data, voxel_size=zooms, affine=affine, return_info=True, **extra, **options)
    images = {name: _output_image(array, info["units"][name], img) for name, array in result.items()}
    return (images, info) if return_info else images
