"""ModelSpec.network_input_shape and the tile budget from Python (qsmcore/tiling.h, memory.md §4):
the padded shape against the padding rules written out by hand, the shape the wrapper really
feeds (through run_network's on_graph_run record), and the host's tiles-in-flight formula."""

import math
import os

import numpy as np
import pytest

import qsmcore


def test_input_shape_follows_the_padding_rules():
    assert qsmcore.model("qsmnet").network_input_shape((181, 217, 181)) == [192, 224, 192]
    assert qsmcore.model("bfrnet").network_input_shape((33, 37, 35)) == [40, 40, 40]
    # HD-BET: window (x, y, z) = (192, 192, 96) capped at the 1 mm crop rounded up to (32, 32, 16),
    # in the graph's (z, y, x) order.
    assert qsmcore.model("hd-bet").network_input_shape((150, 210, 70)) == [80, 192, 160]
    assert qsmcore.model("modl-qsm").network_input_shape((33, 38, 35)) == [32, 38, 34]
    with pytest.raises(qsmcore.InvalidInputError, match="fixed patch"):
        qsmcore.model("autoqsm").network_input_shape((64, 64, 64))
    assert qsmcore.model("autoqsm").network_input_shape((90, 90, 90), fixed_patch=(64, 64, 64)) == [64, 64, 64]


def test_peak_bytes_of_the_input_shape_counts_the_padding():
    spec = qsmcore.model("xqsm")
    shape = spec.network_input_shape((181, 217, 181))
    mem = spec.to_dict()["memory"]
    assert spec.inference_bytes(shape) == mem["inference_fixed_bytes"] + mem["inference_bytes_per_voxel"] * 184 * 224 * 184
    assert math.prod(shape) > 181 * 217 * 181


def test_both_tile_costs_and_the_host_formula():
    xqsm = qsmcore.model("xqsm").to_dict()
    # The seed's field is the wasm32 figure; the native one has its own names.
    assert xqsm["tile_bytes_per_voxel"] == xqsm["wasm_tile_bytes_per_voxel"] == qsmcore.model("xqsm").tile_bytes_per_voxel
    assert xqsm["native_tile_bytes_per_voxel"] > 0 and xqsm["native_tile_fixed_bytes"] >= 0
    patch = math.ceil((48 + 2 * 8) / 8) * 8
    run = xqsm["wasm_tiled_run"]  # the whole tiled run's tile line where measured, else the slope
    tile = (run["tile_fixed_bytes"] + run["tile_bytes_per_voxel"] * patch**3 if run
            else xqsm["wasm_tile_bytes_per_voxel"] * patch**3)
    assert qsmcore.model("xqsm").wasm_tile_bytes(core=48, halo=8) == tile
    assert qsmcore.model("xqsm").wasm_tiles_in_flight(48, 8, 64) == max(1, 1_500_000_000 // tile)
    spec = qsmcore.model("qsmnet")
    d = spec.to_dict()
    if d["wasm_tile_bytes_per_voxel"] is None:  # not measured in wasm32 yet: the native figure budgets
        patch = math.ceil((48 + 2 * 8) / 16) * 16
        native = d["native_tile_fixed_bytes"] + d["native_tile_bytes_per_voxel"] * patch**3
        assert spec.wasm_tiles_in_flight(48, 8, 64) == max(1, 1_500_000_000 // native)
    voxels = 100**3
    wrapper = spec.tiled_wrapper_bytes(voxels)
    assert wrapper == 2 * 8 * voxels + 4096  # the output and the field's copy in ppm
    assert spec.tiled_wrapper_bytes(voxels, field_copy=False) == 8 * voxels + 4096
    held = d["memory"]["resident_bytes"] + d["memory"]["inference_fixed_bytes"] + wrapper
    per = spec.tile_bytes(core=48, halo=8)
    assert spec.tile_concurrency(48, 8, held + 3 * per + 1, 8, wrapper) == 3
    assert spec.tile_concurrency(48, 8, held + 3 * per + 1, 2, wrapper) == 2
    assert qsmcore.model("hd-bet").to_dict()["wasm_tile_bytes_per_voxel"] is None


def test_the_wasm32_tiled_runs_estimate():
    # memory.md §4.6: held part + the larger of the TKD step and the wrapper's volumes + the tiles,
    # written out from to_dict(); tiles in flight under a budget by the same terms.
    for name in ("xqsm", "qsmcore-invnet"):
        spec = qsmcore.model(name)
        d = spec.to_dict()
        run = d["wasm_tiled_run"]
        if run is None:
            with pytest.raises(LookupError):
                spec.wasm_tiled_peak_bytes(32, 8, (80, 80, 80), 2)
            continue
        assert spec.wasm_tiled_run == run
        patch = spec.network_input_shape((48, 48, 48))[0]
        tile = run["tile_fixed_bytes"] + run["tile_bytes_per_voxel"] * patch**3
        wrapper = spec.tiled_wrapper_bytes(80**3, field_copy=False)
        prepare = spec.tiled_prepare_bytes((80, 80, 80), field_copy=False)
        held = run["held_bytes"]
        peak = held + max(wrapper + 3 * tile, prepare)
        assert spec.wasm_tiled_peak_bytes(32, 8, (80, 80, 80), 3, field_copy=False) == peak
        room = held + wrapper + 2 * tile
        assert spec.wasm_tiles_in_flight(32, 8, 8, room, wrapper) == 2
        assert spec.wasm_tiles_in_flight(32, 8, 8, room - 1, wrapper) == 1
        # Below the line's first patch (core 24: 40³) a tile costs its measured point, not the line.
        p24 = spec.network_input_shape((40, 40, 40))[0]
        small = run["tile_small"]
        assert small and small[0][0] == p24**3 and small[-1][0] == patch**3
        assert spec.wasm_tile_bytes(core=24, halo=8) == small[0][1]


INVNET = os.path.join(os.path.dirname(__file__), "..", "..", "models", "qsmcore-invnet.onnx")


def test_a_hosts_estimate_of_a_tiled_run_covers_the_run():
    # qsmcore-invnet ships, and its registry figures were measured on this very file: the host's
    # estimate from them (tiled_peak_bytes with tile_concurrency's tiles in flight) lies within
    # +5 %/-0 % of the accounted peak the run itself measures (memory.md §4.4). A 48x128x128 field
    # in tiles of core 16 (halo 8), masked to one row of three tiles: the TKD prior on the whole
    # volume before the tiles sets the peak there (on a smaller volume the figures' fixed 1 MiB
    # allowance alone would be over 5 % of the run).
    spec = qsmcore.model("qsmcore-invnet")
    rng = np.random.default_rng(2)
    field = rng.uniform(-0.02, 0.02, (48, 128, 128))
    mask = np.zeros_like(field)
    mask[:, :16, :16] = 1.0
    _, info = qsmcore.run_network("qsmcore-invnet", field, mask, b0=3.0, model_paths=[INVNET], threads=2,
                                  tile=16, halo=8, mem_budget=0, return_info=True)
    n = min(spec.tile_concurrency(16, 8, 0, 2), info["tiles"])
    assert info["tiles_in_flight"] == n
    estimate = spec.tiled_peak_bytes(16, 8, field.shape, n, field_copy=False)
    measured = info["measured_peak_bytes"]
    assert measured > 0 and measured <= estimate <= 1.05 * measured, (estimate, measured)
    assert spec.tiled_prepare_bytes(field.shape) > spec.tiled_prepare_bytes(field.shape, field_copy=False) > 0
    assert qsmcore.model("xqsm").tiled_prepare_bytes(field.shape) == 0


def test_input_shape_is_what_the_wrapper_feeds(twins):
    spec = qsmcore.model("qsmnet")
    rng = np.random.default_rng(1)
    field = rng.uniform(-0.02, 0.02, (33, 37, 35))
    mask = np.ones_like(field)
    _, info = qsmcore.run_network("qsmnet", field, mask, model_paths=[twins / "qsmnet.onnx"], threads=2,
                                  return_info=True, record_graph_runs=True)
    runs = info["graph_runs"]
    assert runs and all(list(np.shape(r["inputs"][0])[2:]) == spec.network_input_shape(field.shape) for r in runs)
