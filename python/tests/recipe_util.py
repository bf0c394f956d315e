"""What the recipe tests share (issue #19): a run of one registry network on its reduced twin
with every graph run recorded, and comparisons that fail on a non-finite value.

A recipe test computes, independently of qsmcore's wrapper, what the network must be fed (a
NumPy transcription of its authors' pre-processing, the file and line cited beside it) and what
the user must get back from what the graph returned (their post-processing), and compares both
with what the wrapper fed the ONNX graph and returned (``record_graph_runs``). The twins' random
weights do not matter: the graph's own outputs are taken as recorded.
"""

import numpy as np

import qsmcore


def twin_paths(twins, id):
    """The network's ONNX files in the twins folder, in the registry's file order."""
    return [str(twins / f) for f in qsmcore.model(id).files]


def run_recorded(twins, id, field, **kw):
    """run_network on the twin, one thread (tiles then run in order), graph runs recorded.
    Returns (outputs, info, runs) where runs is info["graph_runs"]."""
    kw.setdefault("threads", 1)
    out, info = qsmcore.run_network(id, field, model_paths=twin_paths(twins, id), verify=False, return_info=True,
                                    record_graph_runs=True, **kw)
    return out, info, info["graph_runs"]


def assert_close(actual, expected, what, rtol=1e-6, atol=None):
    """Same shape; every value finite; |actual − expected| ≤ atol + rtol·|expected| with atol
    (default) 1e-6 of the largest |expected|: float32 rounding of the wrapper's f64 arithmetic."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    assert np.isfinite(actual).all(), f"{what}: non-finite values in what qsmcore gave"
    assert np.isfinite(expected).all(), f"{what}: non-finite values in the oracle"
    if atol is None:
        atol = 1e-6 * max(float(np.max(np.abs(expected))), 1e-30)
    diff = np.abs(actual - expected)
    bad = diff > atol + rtol * np.abs(expected)
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {bad.size} values differ, max |diff| {diff.max():.3g} "
                           f"at {np.unravel_index(np.argmax(diff), diff.shape)}")


def centred_pad(a, multiple, extra_before):
    """Zero-pads each of the first three axes of ``a`` up to a multiple of ``multiple``, centred;
    an odd total puts the extra voxel before (``extra_before``) or after. Returns (padded, slices
    of the original inside it)."""
    pads, where = [], []
    for s in a.shape[:3]:
        total = (-s) % multiple
        before = (total + 1) // 2 if extra_before else total // 2
        pads.append((before, total - before))
        where.append(slice(before, before + s))
    pads += [(0, 0)] * (a.ndim - 3)
    return np.pad(a, pads), tuple(where)


def tensor_volume(t, channel=0):
    """Channel ``channel`` of a recorded [1, C, X, Y, Z] tensor as an (X, Y, Z) array (qsmcore
    feeds volumes in x, y, z order: the NIfTI index order of the arrays)."""
    assert t.ndim == 5 and t.shape[0] == 1, t.shape
    return t[0, channel]
