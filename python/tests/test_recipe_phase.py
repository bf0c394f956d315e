"""Recipe tests (issue #19) of the networks that take wrapped phase: iQSM, iQFM (sunhongfu/iQSM)
and iQSM+ (sunhongfu/iQSM_Plus). Each transcribes its authors' pre- and post-processing in NumPy
(cited beside it) and compares it with what qsmcore's wrapper fed the graph and returned.
recipe_util.py says how.

The phase has three echoes with different TEs and a magnitude that differs between echoes and
across the brain (mag·TE² and (mag·TE)² weights then give different maps); the grid is odd (each
padding total to 16 is odd: which side gets the extra voxel shows); the phase is non-zero
outside the brain; the mask is a probability map with values on both sides of 0.5 (the authors
binarise at > 0.5). iQSM+'s phantom sits off-centre in a wider grid, so its crop to the eroded
brain's bounding box ± 16 cuts real, non-zero phase away."""

import numpy as np
import pytest
from scipy.ndimage import binary_erosion

import qsmcore
from recipe_util import assert_close, centred_pad, run_recorded, tensor_volume, twin_paths

TES = (0.0061, 0.0137, 0.0223)  # s
B0 = 3.0  # T


def _probability_mask(brain):
    # 0.9 in the brain, 0.45 on a slab of it (out: ≤ 0.5), 0.6 on a few voxels just outside it
    # (in: > 0.5), 0.2 elsewhere.
    prob = np.where(brain, 0.9, 0.2)
    prob[brain & (np.arange(brain.shape[0])[:, None, None] > brain.shape[0] * 0.7)] = 0.45
    outside = ~brain & np.roll(brain, 1, axis=1)
    prob[outside] = 0.6
    return prob


def _phantom(shape, seed):
    ph = qsmcore.physics.head_phantom(shape=shape, b0=B0, te=TES)
    brain = ph["mask"] > 0
    rng = np.random.default_rng(seed)
    # Magnitude: the phantom's (T2*-decaying) times a per-echo random field, so the echoes'
    # weights differ from voxel to voxel and from echo to echo.
    mag = ph["magnitude"] * rng.uniform(0.3, 1.7, ph["magnitude"].shape) + 0.01
    return {"phase": ph["phase"], "mag": mag, "prob": _probability_mask(brain)}


def _sphere(radius):
    # sunhongfu/iQSM inference.py `_make_sphere` (and iQSM_Plus inference.py, the same).
    c = np.arange(-radius, radius + 1)
    x, y, z = np.meshgrid(c, c, c, indexing="ij")
    return (x ** 2 + y ** 2 + z ** 2) <= radius ** 2


def _eroded(prob):
    # sunhongfu/iQSM inference.py run_iqsm (iQSM_Plus inference.py step 3c, the same):
    # `binary_erosion(mask > 0.5, structure=_make_sphere(eroded_rad))`, eroded_rad = 3 by default
    # (scipy's border_value 0: the grid's edge counts as outside).
    return binary_erosion(prob > 0.5, structure=_sphere(3)).astype(np.float64)


def _border(shape):
    # The LoT layer's LG() (sunhongfu/iQSM models/unet_blocks.py; iQSM_Plus's inference.py builds
    # its model from the same LoTLayer) zeroes the Laplacian conv's outer 1-voxel shell of the padded volume:
    # `out[:, :, [0, h - 1], :, :] = 0` etc. The graph takes that shell as an input, `border`.
    b = np.zeros(shape)
    b[1:-1, 1:-1, 1:-1] = 1.0
    return b


def _named(twins, id, run):
    """A graph run's inputs by the graph's input names."""
    names = [v.name for v in qsmcore.OnnxModel(twin_paths(twins, id)[0], threads=1).inputs]
    assert len(names) == len(run["inputs"])
    return dict(zip(names, run["inputs"]))


def _check_echo_inputs(twins, id, run, phase_e, te, eroded):
    """The inputs of one graph run against the authors' per-echo network call."""
    x = _named(twins, id, run)
    fed_phase, _ = centred_pad(-1.0 * phase_e, 16, extra_before=False)  # phase_sign = −1, _zero_pad
    fed_mask, _ = centred_pad(eroded, 16, extra_before=False)
    assert_close(tensor_volume(x["phase"]), fed_phase, f"{id}: phase fed (× phase_sign −1, padded /16)")
    assert_close(tensor_volume(x["mask"]), fed_mask, f"{id}: eroded mask fed")
    assert_close(tensor_volume(x["border"]), _border(fed_phase.shape), f"{id}: border (1 inside, 0 on the shell)")
    assert_close(x["te"].reshape(-1), [te], f"{id}: te (s)")
    assert_close(x["b0"].reshape(-1), [B0], f"{id}: b0 (T)")
    assert set(x) == {"phase", "mask", "te", "b0", "border"}


@pytest.fixture(scope="module")
def iqsm_case():
    return _phantom((23, 25, 21), seed=1)  # pads 9, 7, 11: all odd


# iQSM / iQFM: sunhongfu/iQSM inference.py run_iqsm (one echo): phase × phase_sign (−1); the mask
# binarised (> 0.5) and eroded with a radius-3 sphere; `_zero_pad(…, 16)` with
# `before = total // 2`; `iqsm(phase_t, mask_t, te_t, b0_t) * mask_t`; `_zero_remove`. More echoes:
# each echo through the network with its own TE (the MATLAB iQSM.m / iQFM_multi_echo.m in
# sunhongfu/iQSM_Plus, whose Inference_iQSMSeries.py loops `iQSM(tmp_img, mask, TE[ii], B0)`),
# then `chi(:,:,:,e) = TE(e) .* chi(:,:,:,e)` and `echofit(chi, mag, TE)` =
# Σₑ magₑ·TEₑ·(TEₑ·χₑ) / (Σₑ magₑ·TEₑ² + eps): weights magₑ·TEₑ².
@pytest.mark.parametrize("id,out_name", [("iqsm", "chi"), ("iqfm", "local_field")])
def test_iqsm_iqfm_multi_echo(twins, iqsm_case, id, out_name):
    c = iqsm_case
    out, _, runs = run_recorded(twins, id, c["phase"], mask=c["prob"], te=list(TES), b0=B0, magnitude=c["mag"])
    assert len(runs) == len(TES)
    eroded = _eroded(c["prob"])
    _, where = centred_pad(eroded, 16, extra_before=False)
    chis = []
    for e, run in enumerate(runs):
        _check_echo_inputs(twins, id, run, c["phase"][..., e], TES[e], eroded)
        chis.append(tensor_volume(run["outputs"][0])[where] * eroded)  # × mask_t, _zero_remove
    chi = np.stack(chis, axis=-1)
    te = np.asarray(TES)
    ph = te * chi  # iQSM.m: TE(e) .* chi(:,:,:,e)
    fitted = (c["mag"] * ph * te).sum(-1) / ((c["mag"] * te * te).sum(-1) + np.finfo(float).eps)  # echofit.m
    assert_close(out[out_name], fitted, f"{id}: echo-fitted {out_name}")


# Single echo without a magnitude: sunhongfu/iQSM inference.py run_iqsm exactly (one network call,
# output × eroded mask, `_zero_remove`).
def test_iqsm_single_echo(twins, iqsm_case):
    c = iqsm_case
    phase = c["phase"][..., 1]
    out, _, runs = run_recorded(twins, "iqsm", phase, mask=c["prob"], te=TES[1], b0=B0)
    assert len(runs) == 1
    eroded = _eroded(c["prob"])
    _, where = centred_pad(eroded, 16, extra_before=False)
    _check_echo_inputs(twins, "iqsm", runs[0], phase, TES[1], eroded)
    assert_close(out["chi"], tensor_volume(runs[0]["outputs"][0])[where] * eroded, "iqsm: χ")


@pytest.fixture(scope="module")
def plus_case():
    # The phantom placed off-centre along x in a wider grid; outside it, random wrapped phase and
    # a small magnitude.
    inner = _phantom((23, 25, 21), seed=2)
    shape = (47, 25, 21)
    x0 = 20
    rng = np.random.default_rng(3)
    phase = rng.uniform(-np.pi, np.pi, shape + (len(TES),))
    mag = rng.uniform(0.01, 0.05, shape + (len(TES),))
    prob = np.full(shape, 0.2)
    phase[x0:x0 + 23] = inner["phase"]
    mag[x0:x0 + 23] = inner["mag"]
    prob[x0:x0 + 23] = inner["prob"]
    return {"phase": phase, "mag": mag, "prob": prob}


def _brain_bbox(mask, pad=16):
    # sunhongfu/iQSM_Plus inference.py `_brain_bbox`: the non-zero (> 0.5) voxels' bounding box,
    # ± pad, clamped to the grid.
    nz = np.argwhere(mask > 0.5)
    lo, hi = nz.min(axis=0), nz.max(axis=0)
    return tuple(slice(max(0, int(l) - pad), min(int(s), int(h) + 1 + pad)) for l, h, s in zip(lo, hi, mask.shape))


def _iqsm_plus_expected(twins, id, c, runs, b_dir, z_prjs_fed):
    """sunhongfu/iQSM_Plus inference.py run_iqsm_plus, transcribed: phase × phase_sign (−1) (3a);
    erosion (3c); if |b_y| > |b_z|, y and z exchanged in phase, magnitude, mask and B0's direction
    (3d); crop to `_brain_bbox(mask, pad=16)` (3e); `_zero_pad(…, 16)` (3f); per echo
    `model(phase_e, mask, TE_e, b0, z_prjs)`; `pred_chi * mask_t`; `_zero_remove`, pasted back
    into the grid (5a); weights `(mag_echo * te_bc) ** 2`, `denom[denom == 0] = 1` (5b); y and z
    exchanged back (5c). The Python port transposes the mask with (1, 0, 2) in 3d, i.e. x and y,
    which gives a mask of the wrong shape whenever nx ≠ ny; the MATLAB original
    (legacy/matlab/iQSM_plus.m) permutes phase, mask and magnitude alike with [1, 3, 2]: that is
    what is transcribed here. Checks the graph's inputs; returns the expected map."""
    phase = -1.0 * c["phase"]
    mag = c["mag"]
    mask = _eroded(c["prob"])
    b = np.asarray(b_dir, dtype=np.float64) / np.linalg.norm(b_dir)
    permute = abs(b[1]) > abs(b[2])
    if permute:
        b[[1, 2]] = b[[2, 1]]
        phase = np.transpose(phase, (0, 2, 1, 3))
        mag = np.transpose(mag, (0, 2, 1, 3))
        mask = np.transpose(mask, (0, 2, 1))
    bbox = _brain_bbox(mask)
    # The crop must matter: it cuts the grid on at least one axis.
    assert any(s.stop - s.start < n for s, n in zip(bbox, mask.shape)), bbox
    mask_crop = mask[bbox]
    fed_mask, where = centred_pad(mask_crop, 16, extra_before=False)
    assert len(runs) == len(TES)
    chi = np.zeros(phase.shape)
    for e, run in enumerate(runs):
        x = _named(twins, id, run)
        fed_phase, _ = centred_pad(phase[bbox + (e,)], 16, extra_before=False)
        assert_close(tensor_volume(x["phase"]), fed_phase, f"{id}: echo {e} phase fed (cropped, padded /16)")
        assert_close(tensor_volume(x["mask"]), fed_mask, f"{id}: eroded mask fed (cropped, padded /16)")
        assert_close(tensor_volume(x["border"]), _border(fed_phase.shape), f"{id}: border")
        assert_close(x["te"].reshape(-1), [TES[e]], f"{id}: te (s)")
        assert_close(x["b0"].reshape(-1), [B0], f"{id}: b0 (T)")
        assert x["z_prjs"].shape == (1, 1, 3)
        assert_close(x["z_prjs"].reshape(-1), z_prjs_fed(b), f"{id}: z_prjs")
        chi[bbox + (e,)] = tensor_volume(run["outputs"][0])[where] * mask_crop
    te = np.asarray(TES)
    w = (mag * te) ** 2
    denom = w.sum(-1)
    denom[denom == 0] = 1.0
    fitted = (w * chi).sum(-1) / denom
    return np.transpose(fitted, (0, 2, 1)) if permute else fitted


# iQSM+ with an oblique B0 closer to z than to y (no exchange): sunhongfu/iQSM_Plus inference.py
# run_iqsm_plus (see _iqsm_plus_expected); `z_prjs` = the unit B0 direction in voxel axes, as given
# (`b0_dir / np.linalg.norm(b0_dir)`), shape (1, 1, 3).
def test_iqsm_plus_oblique(twins, plus_case):
    b = (0.3, -0.25, 0.9)
    out, _, runs = run_recorded(twins, "iqsm-plus", plus_case["phase"], mask=plus_case["prob"], te=list(TES),
                                b0=B0, b0_dir=b, magnitude=plus_case["mag"])
    want = _iqsm_plus_expected(twins, "iqsm-plus", plus_case, runs, b, lambda u: u)
    assert_close(out["chi"], want, "iqsm-plus: (mag·TE)²-weighted χ, pasted back")


# iQSM+ with B0 closer to y than to z: the authors exchange y and z around the network
# (sunhongfu/iQSM_Plus inference.py 3d/5c; legacy/matlab/iQSM_plus.m `if (abs(B0_dir(3)) <
# abs(B0_dir(2)))` … permute(…, [1, 3, 2, 4])), B0's y and z components with them; the grid is
# not cubic (ny ≠ nz), so a missing or wrong exchange shows.
def test_iqsm_plus_y_z_exchange(twins, plus_case):
    b = (0.2, 0.85, 0.45)
    with pytest.warns(UserWarning, match="closer to y than to z"):
        out, _, runs = run_recorded(twins, "iqsm-plus", plus_case["phase"], mask=plus_case["prob"], te=list(TES),
                                    b0=B0, b0_dir=b, magnitude=plus_case["mag"])
    want = _iqsm_plus_expected(twins, "iqsm-plus", plus_case, runs, b, lambda u: u)
    assert_close(out["chi"], want, "iqsm-plus: χ with y and z exchanged around the network")


def _rot_x(deg):
    t = np.deg2rad(deg)
    return np.array([[1, 0, 0], [0, np.cos(t), -np.sin(t)], [0, np.sin(t), np.cos(t)]])


# iQSM+ on a volume whose voxel z axis points down scanner z (an affine with a negative z column,
# slightly oblique). The authors take B0's direction in voxel axes (inference.py `b0_dir`, "the
# same as B0_dir in MEDI toolbox", legacy/matlab/iQSM_plus.m): here b̂ = the scanner-z row of the
# affine's normalised rotation, whose z component is negative; they feed it to the network as it
# is. qsmcore's decision (phase_nets.cpp, #19 item 5), tested here as such and not the authors':
# iQSM+ was trained on directions with z ≥ 0 and the dipole field is the same for b̂ and −b̂
# ((k·b̂)²), so −b̂ is fed. Everything else (sign, erosion, crop, padding, weights) as the authors'.
def test_iqsm_plus_b0_pointing_down_voxel_z(twins, plus_case):
    rot = _rot_x(12.0) @ np.diag([1.0, 1.0, -1.0])
    affine = np.eye(4)
    affine[:3, :3] = rot
    # B0 (scanner z) in voxel axes: b_c = affine[2, c] / |affine[:, c]|, normalised.
    cols = affine[:3, :3]
    b_vox = cols[2] / np.linalg.norm(cols, axis=0)
    b_vox /= np.linalg.norm(b_vox)
    assert b_vox[2] < 0 and abs(b_vox[1]) < abs(b_vox[2])
    out, _, runs = run_recorded(twins, "iqsm-plus", plus_case["phase"], mask=plus_case["prob"], te=list(TES),
                                b0=B0, affine=affine, magnitude=plus_case["mag"])
    want = _iqsm_plus_expected(twins, "iqsm-plus", plus_case, runs, b_vox, lambda u: -u)
    assert_close(out["chi"], want, "iqsm-plus: χ with B0 given as −b̂")
