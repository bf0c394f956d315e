"""run_network / run_network_nifti on the reduced twins: the same bytes as `qsm run` on the same
files, the affine kept, progress reported, errors raised before anything runs."""

import math
import re
import subprocess

import nibabel as nib
import numpy as np
import pytest

import qsmcore
from conftest import assert_same_bytes

B0 = 3.0
TES = (0.004, 0.012)


def _affine(voxel=(1.0, 1.0, 1.0)):
    # Rotated 10° in plane (B0 stays along voxel z) and moved off the origin: outputs must carry
    # this affine, not a default one.
    c, s = math.cos(math.radians(10)), math.sin(math.radians(10))
    a = np.eye(4)
    a[:3, :3] = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) * np.array(voxel)
    a[:3, 3] = (-12.5, 18.0, -9.75)
    return a


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A 16³ phantom written as NIfTI files (float32 volumes, uint8 mask), as the CLI tests do."""
    d = tmp_path_factory.mktemp("head")
    ph = qsmcore.physics.head_phantom(shape=(16, 16, 16), b0=B0, te=TES)
    aff = _affine()
    files = {}
    for name, data, dtype in (("local_field", ph["local_field"], np.float32), ("phase", ph["phase"], np.float32),
                              ("mask", ph["mask"], np.uint8)):
        img = nib.Nifti1Image(data.astype(dtype), aff)
        img.set_sform(aff, 1)
        img.set_qform(aff, 1)
        files[name] = d / f"{name}.nii.gz"
        nib.save(img, files[name])
    return files


def _weights_from_twins(monkeypatch, twins, id):
    var = "QSM_MODEL_DIR_" + "".join(ch.upper() if ch.isalnum() else "_" for ch in id)
    monkeypatch.setenv(var, str(twins))


CASES = {
    "xqsm": (["--in", "local_field", "--mask", "mask"], {}),
    "iqsm": (["--in", "phase", "--mask", "mask", "--te", ",".join(map(str, TES)), "--b0", str(B0)],
             {"te": TES, "b0": B0}),
}


@pytest.mark.parametrize("id", sorted(CASES))
def test_nifti_run_matches_qsm_run(twins, qsm_bin, head, tmp_path, monkeypatch, isolated_weights, id):
    _weights_from_twins(monkeypatch, twins, id)
    cli_args, kw = CASES[id]
    args = [a if a not in head else str(head[a]) for a in cli_args]
    subprocess.run([str(qsm_bin), "run", id, *args, "--out", str(tmp_path / "cli.nii.gz"), "--no-verify",
                    "--threads", "1", "--quiet"], check=True, capture_output=True)
    cli = nib.load(tmp_path / "cli.nii.gz")
    primary = nib.load(head[cli_args[1]])
    out = qsmcore.run_network_nifti(id, primary, mask=nib.load(head["mask"]), threads=1, verify=False, **kw)
    assert list(out) == ["chi"]
    img = out["chi"]
    assert_same_bytes(np.asanyarray(img.dataobj), np.asanyarray(cli.dataobj))
    np.testing.assert_array_equal(img.affine, primary.affine)
    np.testing.assert_allclose(img.affine, _affine(), atol=1e-6)
    # The image survives a file round trip with its affine and values.
    nib.save(img, tmp_path / "py.nii.gz")
    back = nib.load(tmp_path / "py.nii.gz")
    np.testing.assert_array_equal(back.affine, img.affine)
    assert_same_bytes(np.asanyarray(back.dataobj), np.asanyarray(img.dataobj))


def test_arrays_match_images_and_report(twins, head, monkeypatch, isolated_weights):
    _weights_from_twins(monkeypatch, twins, "xqsm")
    field, mask = nib.load(head["local_field"]), nib.load(head["mask"])
    calls = []
    out, info = qsmcore.run_network("xqsm", field.get_fdata(), mask=mask.get_fdata(), voxel_size=(1, 1, 1),
                                    affine=field.affine, threads=1, verify=False, return_info=True,
                                    progress=lambda f, stage: calls.append((f, stage)))
    chi = out["chi"]
    assert chi.shape == (16, 16, 16) and chi.dtype == np.float64 and np.isfinite(chi).all()
    assert np.all(chi[mask.get_fdata() == 0] == 0) and np.abs(chi[mask.get_fdata() != 0]).max() > 0  # masked
    images = qsmcore.run_network_nifti("xqsm", field, mask=mask, threads=1, verify=False)
    assert_same_bytes(chi.astype(np.float32), np.asanyarray(images["chi"].dataobj))
    assert info["units"] == {"chi": "ppm"}
    assert 0 < info["predicted_peak_bytes"] and 0 < info["measured_peak_bytes"] <= info["predicted_peak_bytes"]
    assert calls and calls[-1] == (1.0, "done") and all(0.0 <= f <= 1.0 for f, _ in calls)


def test_progress_callback_error_propagates(twins, head, monkeypatch, isolated_weights):
    _weights_from_twins(monkeypatch, twins, "xqsm")
    field = nib.load(head["local_field"]).get_fdata()

    def stop(fraction, stage):
        raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        qsmcore.run_network("xqsm", field, mask=field != 0, threads=1, verify=False, progress=stop)


def test_errors_before_running(twins, head, monkeypatch, isolated_weights):
    _weights_from_twins(monkeypatch, twins, "xqsm")
    field = nib.load(head["local_field"]).get_fdata()
    mask = nib.load(head["mask"]).get_fdata()
    with pytest.raises(qsmcore.InvalidInputError, match="needs mask"):
        qsmcore.run_network("xqsm", field, threads=1, verify=False)
    with pytest.raises(qsmcore.InvalidInputError, match="empty"):
        qsmcore.run_network("xqsm", field, mask=np.zeros_like(mask), threads=1, verify=False)
    with pytest.raises(qsmcore.Error, match="grid|dim|shape"):
        qsmcore.run_network("xqsm", field, mask=mask[:8], threads=1, verify=False)
    with pytest.raises(qsmcore.InvalidInputError, match="te"):
        qsmcore.run_network("iqsm", field, mask=mask, b0=B0, threads=1, verify=False)
    with pytest.raises(qsmcore.BudgetError) as e:
        qsmcore.run_network("xqsm", field, mask=mask, threads=1, verify=False, mem_budget=4096)
    assert isinstance(e.value, MemoryError)
    bad = field.copy()
    bad[3, 3, 3] = np.nan
    with pytest.raises(qsmcore.InvalidInputError, match="NaN|finite"):
        qsmcore.run_network("xqsm", bad, mask=mask, threads=1, verify=False)
    with pytest.raises(qsmcore.NotFoundError):
        qsmcore.run_network("no-such-net", field)


def test_over_the_budget_the_inputs_wait_on_disk_and_come_back(twins, monkeypatch, isolated_weights, tmp_path):
    """Over its budget a run parks the volumes it was given in the spill directory while the graph
    runs (#16): at the least budget a refusal names, the χ is the unbudgeted one bit for bit, and
    info["spill"] says what parked."""
    _weights_from_twins(monkeypatch, twins, "xqsm")
    ph = qsmcore.physics.head_phantom(shape=(32, 32, 32), b0=B0, te=TES)  # volumes large enough to park
    field, mask = ph["local_field"], ph["mask"]
    free, info = qsmcore.run_network("xqsm", field, mask=mask, threads=2, verify=False, return_info=True)
    assert info["spill"]["parked_bytes"] == 0
    # The budget counts what the process holds already (the weights, this test's arrays): the first
    # refusal naming a least whole run, over budgets from 1 MiB in steps of 256 KiB.
    least = None
    for kib in range(1024, 16384, 256):
        try:
            qsmcore.run_network("xqsm", field, mask=mask, threads=2, verify=False, mem_budget=kib << 10)
            break
        except qsmcore.BudgetError as e:
            m = re.search(r"the whole run (\d+)", str(e))
            if m:
                assert "parked in the spill directory" in str(e)
                least = int(m.group(1))
                break
    assert least is not None, "no refusal named the least budget"
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    chi, info = qsmcore.run_network("xqsm", field, mask=mask, threads=2, verify=False, mem_budget=least,
                                    spill_dir=spill_dir, return_info=True)
    assert info["tiles"] == 1
    assert info["spill"]["parked_bytes"] >= 2 * 32**3 * 8  # the field and the mask, in whole pages
    assert info["spill"]["parked_between_bytes"] == 0  # xQSM holds nothing between graph runs to send away
    assert info["measured_peak_bytes"] <= least
    np.testing.assert_array_equal(chi["chi"], free["chi"])
    assert list(spill_dir.iterdir()) == []
