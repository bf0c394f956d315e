"""Recipe tests (issue #19) of the networks that take a field and give one map: xQSM, QSMnet,
QSMnet+, IR2QSM, BFRnet and qsmcore's own InvNet. Each transcribes its authors' pre- and
post-processing in NumPy (cited beside it) and compares it with what qsmcore's wrapper fed the
graph and returned. recipe_util.py says how.

The phantom is on an odd grid (each padding total is odd: which side gets the extra voxel shows),
its field is non-zero outside the brain, and its mask is a probability map with values on both
sides of 0.5 (the authors binarise at > 0.5)."""

import sys
import warnings

import numpy as np
import pytest

import qsmcore
from conftest import ROOT
from recipe_util import assert_close, centred_pad, run_recorded, tensor_volume

SHAPE = (19, 21, 17)


@pytest.fixture(scope="module")
def case():
    ph = qsmcore.physics.head_phantom(shape=SHAPE, b0=3.0, te=(0.02,))
    brain = ph["mask"] > 0
    # A probability map: 0.9 in the brain, 0.4 on a shell just inside its edge (out: ≤ 0.5) and
    # 0.2 outside where the field is still non-zero.
    prob = np.where(brain, 0.9, 0.2)
    edge = brain & ~np.roll(brain, 1, axis=0)
    prob[edge] = 0.4
    field = ph["local_field"] + 0.01 * (~brain)  # not zero outside the brain
    return {"field": field, "prob": prob, "mask": prob > 0.5, "total": ph["total_field"] + 0.01 * (~brain)}


def _field_net(twins, case, id, multiple, extra_before, scale_in=1.0, scale_out=1.0):
    out, info, runs = run_recorded(twins, id, case["field"], mask=case["prob"])
    m = case["mask"]
    assert len(runs) == 1 and len(runs[0]["inputs"]) == 1
    fed, where = centred_pad(case["field"] * m / scale_in, multiple, extra_before)
    assert_close(tensor_volume(runs[0]["inputs"][0]), fed, f"{id}: the field fed to the graph")
    y = tensor_volume(runs[0]["outputs"][0])
    assert_close(out["chi"], y[where] * scale_out * m, f"{id}: χ from the graph's output")
    return info


# xQSM (sunhongfu/deepMRI xQSM/python/eval/run_demo.py): ZeroPadding(Field, 8) puts the volume at
# pos_init = ceil((UpSize - ImSize) / 2) (the odd voxel before; matlab/eval/ZeroPadding.m the
# same), the field in ppm as it is; mask = Field != 0 (a field zero outside the brain, so the
# input is field × mask); Recon = ZeroRemoving(Recon, pos) * mask.
def test_xqsm(twins, case):
    _field_net(twins, case, "xqsm", 8, extra_before=True)


# QSMnet / QSMnet+ (SNU-LIST/QSMnet: V-SHARP local field in ppm, masked; test.py normalises by the
# training field's std and de-normalises the output by the training χ's: QSMnet 0.01 / 0.0317,
# QSMnet+ 0.0205 / 0.0734, means 0; models.md §5), padded to 16, centred, the odd voxel after.
@pytest.mark.parametrize("id,std_in,std_out", [("qsmnet", 0.01, 0.0317), ("qsmnet-plus", 0.0205, 0.0734)])
def test_qsmnet(twins, case, id, std_in, std_out):
    _field_net(twins, case, id, 16, extra_before=False, scale_in=std_in, scale_out=std_out)


# IR2QSM (sunhongfu/deepMRI IR2QSM: the iQSM_Plus Save_Input glue, field × mask in ppm), padded to
# 8 with the odd voxel before (ZeroPadding as xQSM's).
def test_ir2qsm(twins, case):
    _field_net(twins, case, "ir2qsm", 8, extra_before=True)


# BFRnet (sunhongfu/deepMRI BFRnet: total field × mask in ppm, ZeroPadding's centring, the odd
# voxel before); the network predicts the background field, the local field is total − background,
# masked.
def test_bfrnet(twins, case):
    out, _, runs = run_recorded(twins, "bfrnet", case["total"], mask=case["prob"])
    m = case["mask"]
    fed, where = centred_pad(case["total"] * m, 8, extra_before=True)
    assert_close(tensor_volume(runs[0]["inputs"][0]), fed, "bfrnet: the total field fed to the graph")
    bg = tensor_volume(runs[0]["outputs"][0])[where]
    assert_close(out["local_field"], (case["total"] - bg) * m, "bfrnet: local field = total − background")


def _tkd(field, mask):
    # The TKD the network was trained on is tools/train/synth.py's tkd() itself (1 mm, B0 along z).
    sys.path.insert(0, str(ROOT / "tools" / "train"))
    try:
        import synth
    finally:
        sys.path.pop(0)
    return synth.tkd(field, mask, (1.0, 1.0, 1.0), (0.0, 0.0, 1.0)).astype(np.float64)


# qsmcore's InvNet (tools/train/model.py, synth.py): channels [TKD χ, masked field, mask], padded
# to 4, centred with the odd voxel after; χ = output × mask.
def test_qsmcore_invnet(twins, case):
    out, _, runs = run_recorded(twins, "qsmcore-invnet", case["field"], mask=case["prob"])
    m = case["mask"].astype(np.float64)
    x = runs[0]["inputs"][0]
    assert x.shape[1] == 3
    for ch, (want, what) in enumerate([(_tkd(case["field"], m), "TKD prior"), (case["field"] * m, "masked field"),
                                       (m, "mask")]):
        fed, where = centred_pad(want, 4, extra_before=False)
        assert_close(tensor_volume(x, ch), fed, f"qsmcore-invnet: channel {ch} ({what})", atol=1e-5)
    assert_close(out["chi"], tensor_volume(runs[0]["outputs"][0])[where] * m, "qsmcore-invnet: χ")


# xQSM's authors resample anisotropic voxels to isotropic ones and back around the network
# (#19 item 4); qsmcore does not resample, and says so rather than silently running off-design.
def test_xqsm_warns_on_anisotropic_voxels(twins, case):
    with pytest.warns(UserWarning, match="trained on isotropic voxels"):
        run_recorded(twins, "xqsm", case["field"], mask=case["prob"], voxel_size=(1.0, 1.0, 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_recorded(twins, "xqsm", case["field"], mask=case["prob"], voxel_size=(0.8, 0.8, 0.8))
