"""qsmcore: deep-learning QSM networks from ONNX files on CPUs, within a memory budget.

The Python face of the qsmcore engine (the same library as the ``qsm`` command)::

    import numpy as np, qsmcore
    m = qsmcore.OnnxModel("model.onnx", threads=2, mem_budget="2GiB")
    y = m.run({"x": np.zeros((1, 1, 64, 64, 64), np.float32)})["y"]

    chi = qsmcore.run_network("qsmcore-invnet", field, mask=mask, voxel_size=(1, 1, 1), b0=3.0)["chi"]

Engine errors are raised as :class:`qsmcore.Error` subclasses carrying the engine's message:
``InvalidInputError`` (also a ValueError), ``BudgetError`` (also a MemoryError), ``NotFoundError``
(also a LookupError), ``IoError``/``HttpError`` (OSError), ``UnsupportedError``
(NotImplementedError), ``InvalidModelError``/``ChecksumError`` (ValueError), ``InternalError``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

# OpenMP threads that sleep when they wait, as the qsm command's do (src/cli/omp_wait_policy.cpp):
# libgomp's default spins for ~ms at the end of every parallel region, which costs runs that share
# cores with other processes up to 9x. libgomp reads this once, when it loads: the engine's module
# below loads it unless something imported earlier (torch) did. A policy the user set is kept.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "passive"

from . import _qsmcore  # noqa: E402  (after the wait policy)
from ._qsmcore import (  # noqa: F401,E402  (re-exported)
    BudgetError,
    ChecksumError,
    Error,
    HttpError,
    InternalError,
    InvalidInputError,
    InvalidModelError,
    IoError,
    ModelSpec,
    NotFoundError,
    UnsupportedError,
)
from ._util import MemBudget, parse_mem_budget  # noqa: E402
from ._networks import run_network, run_network_nifti  # noqa: F401,E402
from . import physics  # noqa: F401,E402
from . import stages  # noqa: F401,E402
from .stages import (  # noqa: F401,E402  (re-exported)
    brain_mask,
    field_pipeline,
    invert_dipole,
    laplacian_unwrap,
    make_scan,
    map_field,
    network_inversion_ids,
    pipeline,
    r2star,
    read_scan,
    remove_background,
    romeo_unwrap,
    romeo_voxel_quality,
    swi,
    t2star,
    unwrap_echoes,
)

__all__ = [
    "OnnxModel", "ValueInfo", "models", "model", "resolve_weights", "run_network", "run_network_nifti",
    "physics", "Error", "InvalidInputError", "BudgetError", "NotFoundError", "IoError", "HttpError",
    "UnsupportedError", "InvalidModelError", "ChecksumError", "InternalError", "ModelSpec",
    "stages", "read_scan", "make_scan", "brain_mask", "romeo_unwrap", "romeo_voxel_quality", "unwrap_echoes",
    "laplacian_unwrap", "map_field", "remove_background", "invert_dipole", "r2star", "t2star", "swi",
    "field_pipeline", "pipeline", "network_inversion_ids",
]
__version__ = "0.1.0"


@dataclass(frozen=True)
class ValueInfo:
    """A graph input or output: name, shape (int, the dimension's name for a dynamic one, or None),
    and numpy dtype."""

    name: str
    shape: Optional[Tuple[Union[int, str, None], ...]]
    dtype: Any


class OnnxModel:
    """An ONNX file loaded by the engine: inspect, plan and run it.

    Args:
        path: the .onnx file (external data next to it is found as usual).
        threads: kernel threads; None = the CPUs this process may use (affinity, cgroup, SLURM).
        mem_budget: bytes (int), a size ("2GiB", "500MB"), "none"/0 for no budget, or None for what
            the process may use (cgroup, SLURM, MemAvailable, less a reserve). A run whose predicted
            peak exceeds it first spills activations to disk (exactly: the same output bits), and
            raises BudgetError before allocating when even that cannot fit.
        residency: where weights live: "full", "layerwise[:...]" or "stream[:...]" (as ``--residency``).
        backend: "onednn" or "reference".
        spill: False refuses a run over the budget instead of spilling its activations.
        spill_dir: directory of the spill file (None: $TMPDIR, else /tmp).
        precision: "f32", or "bf16" (opt-in): convolutions on bfloat16 inputs and weights with f32
            sums, about twice as fast on CPUs with avx512_bf16 or AMX, relative error about 1e-3
            per layer; raises UnsupportedError on other CPUs and backends.
    """

    def __init__(self, path: Union[str, os.PathLike], threads: Optional[int] = None,
                 mem_budget: MemBudget = None, residency: str = "full", backend: str = "onednn",
                 spill: bool = True, spill_dir: Optional[Union[str, os.PathLike]] = None,
                 precision: str = "f32") -> None:
        self._m = _qsmcore._OnnxModel(os.fspath(path), 0 if threads is None else int(threads),
                                      parse_mem_budget(mem_budget), residency, backend, bool(spill),
                                      "" if spill_dir is None else os.fspath(spill_dir), precision)

    @property
    def path(self) -> str:
        return self._m.path

    @property
    def inputs(self) -> List[ValueInfo]:
        """The graph inputs, in graph order."""
        return [ValueInfo(n, s, d) for n, s, d in self._m.inputs]

    @property
    def outputs(self) -> List[ValueInfo]:
        """The graph outputs, in graph order."""
        return [ValueInfo(n, s, d) for n, s, d in self._m.outputs]

    @property
    def threads(self) -> int:
        """Threads the kernels use (the default already resolved)."""
        return self._m.threads

    @property
    def precision(self) -> str:
        """The convolutions' precision: "f32" or "bf16"."""
        return self._m.precision

    @property
    def mem_budget(self) -> int:
        """The budget in bytes (0 = none), the default already resolved."""
        return self._m.mem_budget

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Runs the graph on ``{input name: array}``; returns ``{output name: array}``.

        An array that is C-contiguous and of the input's dtype (float32 for the QSM networks) is
        read in place, without a copy; other layouts are copied once. A wrong dtype raises
        InvalidInputError; the GIL is released while the engine runs.
        """
        return self._m.run(dict(feeds))

    def plan(self, shapes: Mapping[str, Sequence[int]]) -> Dict[str, int]:
        """Plans (without running) for ``{input name: shape}``: ``peak_bytes`` (the predicted peak
        of one run above the loaded model), ``least_peak_bytes`` (the same with every activation
        that can leave memory between its uses spilled: the smallest a budget can leave a run),
        ``arena_bytes``, ``packed_weight_bytes``, ... ."""
        return self._m.plan({k: [int(x) for x in v] for k, v in shapes.items()})

    def last_spill(self) -> Dict[str, Any]:
        """What the last run's activation spill did: ``spilled``, ``file_bytes``, ``written_bytes``,
        ``read_bytes``, ``io_seconds``, ``wait_seconds`` and ``dir`` (all zero when it fit)."""
        return self._m.last_spill()

    def residency_report(self) -> Dict[str, Any]:
        """The weight-residency report of the current plan (as ``--report``)."""
        import json
        return json.loads(self._m.residency_report_json())

    def clear_plans(self) -> None:
        """Drops cached plans and their packed weights."""
        self._m.clear_plans()

    def __repr__(self) -> str:
        return f"OnnxModel({self.path!r}, inputs={[i.name for i in self.inputs]})"


def models() -> List[Dict[str, Any]]:
    """The model registry, one dict per network (as ``qsm models show ID --json``)."""
    return _qsmcore.models()


def model(id: str) -> ModelSpec:
    """One registry network by id (exact, case-sensitive); NotFoundError for an unknown id.

    ``spec.inference_bytes((nx, ny, nz))``, ``spec.peak_bytes(shape, heap="native"|"wasm32")`` and
    ``spec.tile_bytes(core=128, halo=8)`` give its measured memory figures. ``shape`` is what the
    network sees after its wrapper's padding: ``spec.network_input_shape(volume_shape)`` (the
    wrappers pad with the same function; its docstring says what to pass for the networks that
    crop or resample first).
    """
    return _qsmcore.model(id)


def resolve_weights(id: str, verify: bool = True, allow_download: bool = True) -> List[str]:
    """Paths of a network's ONNX files, found (or downloaded) as ``qsm fetch`` does."""
    return _qsmcore.resolve_weights(id, verify, allow_download)
