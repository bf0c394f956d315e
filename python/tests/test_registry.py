"""qsmcore.models() / model(): the registry as `qsm models --json` prints it, and the memory
figures recomputed from the measured coefficients."""

import json
import math
import subprocess

import pytest

import qsmcore


def test_models_are_the_cli_registry(qsm_bin):
    cli = json.loads(subprocess.run([str(qsm_bin), "models", "--json"], check=True, capture_output=True,
                                    text=True).stdout)
    assert qsmcore.models() == cli
    assert len(cli) == 21 and qsmcore.model("xqsm").to_dict() == next(m for m in cli if m["id"] == "xqsm")


def test_memory_figures_follow_the_measured_coefficients():
    spec = qsmcore.model("xqsm")
    mem = spec.to_dict()["memory"]
    for shape in [(64, 64, 64), (160, 192, 144)]:
        voxels = math.prod(shape)
        assert spec.inference_bytes(shape) == mem["inference_fixed_bytes"] + mem["inference_bytes_per_voxel"] * voxels
        assert spec.peak_bytes(shape) == mem["resident_bytes"] + spec.inference_bytes(shape)
    with pytest.raises(qsmcore.InvalidInputError, match="heap"):
        spec.peak_bytes((8, 8, 8), heap="gpu")
    # Tiled: the padded patch ceil((core + 2 halo) / d) * d per axis; from the patch of core 32 up,
    # the native line: fixed + bytes/voxel times its voxels.
    d = max([spec.size_divisor] + list(spec.pad_multiple))
    patch = math.ceil((96 + 2 * 8) / d) * d
    assert spec.tiled
    t = spec.to_dict()
    assert spec.tile_bytes(core=96, halo=8) == t["native_tile_fixed_bytes"] + t["native_tile_bytes_per_voxel"] * patch**3
    assert spec.native_tile_bytes_per_voxel == t["native_tile_bytes_per_voxel"]


def test_unknown_model_raises_lookup_error():
    with pytest.raises(qsmcore.NotFoundError, match="'XQSM' not in model registry") as e:
        qsmcore.model("XQSM")
    assert isinstance(e.value, LookupError) and e.value.kind == "NotFound"
