"""Recipe tests (issue #19) of the χ-separation networks and their R2′ generator: SUSEP-Net, χ-sepnet
and R2PRIMEnet. Each transcribes its authors' pre- and post-processing in NumPy (cited beside it) —
z-scoring, masking, end padding, the overlapping sliding window and its uniform blending — and
compares it with what qsmcore's wrapper fed the graph and returned. recipe_util.py says how.

The sliding window is checked window by window: the authors' windows are enumerated here, each
recorded graph run is matched to the authors' patch it was fed (so the check does not depend on the
order qsmcore runs them in), and the recorded outputs are blended back at the authors' positions.
``tile=16`` makes the windows small; the ALIGNED grid needs three windows along x and y (overlaps
of 1, 2 and 4 windows) and one padded window along z; on the ODD grid x is not a multiple of 16.

The inputs are non-zero outside the brain, the mask is a probability map with values on both sides
of 0.5 (the authors binarise at > 0.5), and the values are large enough that the twins' random
weights drive some de-normalised outputs below zero (where the authors' clipping rules act)."""

import numpy as np
import pytest

from recipe_util import assert_close, run_recorded

ALIGNED = (32, 32, 11)
ODD = (37, 13, 11)
TILE = 16
DR = 114.0  # Hz/ppm, SNU-LIST/chi_sepnet Code/test_params.py "Dr = 114"


def _case(shape, seed):
    rng = np.random.default_rng(seed)
    idx = np.indices(shape).astype(np.float64)
    c = [(s - 1) / 2 for s in shape]
    r = np.sqrt(sum(((idx[a] - c[a]) / (0.45 * shape[a])) ** 2 for a in range(3)))
    # A probability map: 0.9 in the "brain", 0.4 on a shell (out: ≤ 0.5), 0.2 outside.
    prob = np.where(r < 0.8, 0.9, np.where(r < 1.0, 0.4, 0.2))
    return {
        "prob": prob,
        "mask": (prob > 0.5).astype(np.float64),
        "field": rng.normal(0.0, 0.1, shape),  # local field, ppm (non-zero everywhere)
        "qsm": rng.normal(0.0, 0.25, shape),  # χ_total, ppm
        "r2prime": rng.uniform(0.0, 60.0, shape),  # Hz
        "r2star": rng.uniform(5.0, 120.0, shape),  # Hz
    }


@pytest.fixture(scope="module")
def aligned():
    return _case(ALIGNED, 1)


@pytest.fixture(scope="module")
def odd():
    return _case(ODD, 2)


# ---- the authors' sliding window ------------------------------------------------------------


# SNU-LIST window starts as run on the published χ-sepnet / R2PRIMEnet ONNX graphs: QSMxT/QSM-CI
# algorithms/chisepnet/recon.py and algorithms/r2primenet/recon.py, _starts(): 0, s, 2s, … ≤ size −
# patch with s = int(0.75·patch), plus a flush start at size − patch (QSM.rs src/utils/sliding.rs,
# which models.md §4 cites, is the same).
def _starts(size, patch):
    if size <= patch:
        return [0]
    st = list(range(0, size - patch + 1, int(patch * 0.75)))
    if st[-1] != size - patch:
        st.append(size - patch)
    return st


def _authors_windows(chans, patch):
    """recon.py main(): the masked, z-scored channels (C, X, Y, Z) end-padded to max(size, patch)
    per axis — `pad = [max(0, PATCH[k] - (X, Y, Z)[k])]`, np.pad after — and cut into patches at
    the _starts() positions. Returns (padded shape, [(start, patch array (C, px, py, pz))])."""
    shape = chans.shape[1:]
    pad = [max(0, patch[k] - shape[k]) for k in range(3)]
    volp = np.pad(chans, ((0, 0), (0, pad[0]), (0, pad[1]), (0, pad[2])))
    P = volp.shape[1:]
    wins = []
    for x0 in _starts(P[0], patch[0]):
        for y0 in _starts(P[1], patch[1]):
            for z0 in _starts(P[2], patch[2]):
                wins.append(((x0, y0, z0), volp[:, x0:x0 + patch[0], y0:y0 + patch[1], z0:z0 + patch[2]]))
    return P, wins


def _fed_and_blended(id, runs, chans, patch, out_channels, rtol=1e-6):
    """Checks that the graph was run once per authors' window, each fed the authors' patch (all
    graph inputs concatenated along the channel axis), and returns the recorded outputs blended as
    recon.py does: `acc[:, sl] += out; wsum[sl] += 1; acc /= max(wsum, 1)`, cropped to the volume."""
    P, wins = _authors_windows(chans, patch)
    fed = [np.concatenate(r["inputs"], axis=1)[0] for r in runs]
    got = [np.concatenate(r["outputs"], axis=1)[0] for r in runs]
    n_fed, n_wins = len(fed), len(wins)
    assert n_fed == n_wins, (f"{id}: {n_fed} windows of {fed[0].shape[1:]} run; the authors run {n_wins} of "
                             f"{tuple(patch)} at {[s for s, _ in wins]} (padded {P})")
    scale = max(float(np.abs(chans).max()), 1e-30)
    free = list(range(len(fed)))
    acc = np.zeros((out_channels,) + P)
    wsum = np.zeros(P)
    for start, want in wins:
        hit = [j for j in free
               if fed[j].shape == want.shape and np.allclose(fed[j], want, rtol=rtol, atol=rtol * scale)]
        assert hit, (f"{id}: no graph run was fed the authors' {want.shape[1:]} patch at {start} "
                     f"(fed shapes {sorted({f.shape for f in fed})})")
        j = hit[0]
        free.remove(j)
        assert_close(fed[j], want, f"{id}: window at {start}", rtol=rtol, atol=rtol * scale)
        sl = tuple(slice(s, s + p) for s, p in zip(start, patch))
        assert got[j].shape == (out_channels,) + tuple(patch)
        acc[(slice(None),) + sl] += got[j]
        wsum[sl] += 1.0
    acc /= np.maximum(wsum, 1.0)
    X, Y, Z = chans.shape[1:]
    return acc[:, :X, :Y, :Z]


def _round_up(n, m):
    return -(-n // m) * m


# ---- χ-sepnet -------------------------------------------------------------------------------

# χ-sepnet (SNU-LIST/chi_sepnet Code/test.py inference(), custom_dataset.py test_dataset): the input
# is torch.cat((QSM, local field, R2′), 1), each z-scored by the training statistics and × mask;
# the field in ppm, R2′ in Hz divided by Dr = 114 (custom_dataset.py: r2prime_in_ppm = r2prime / Dr).
# Constants (the norm .mat is not public): as QSM.rs src/separation/chisepnet.rs ChiSepNetNorm
# records them from xsepnet_train_patch_norm_factor_inplane_largedegree_romeo_arlo.mat (models.md §5).
CHISEP = {"qsm": (-0.0013402086915448308, 0.031504031270742416),
          "field": (-0.0026045702397823334, 0.010849659331142902),
          "r2prime": (0.05141879618167877, 0.06977531313896179),
          "pos": (0.025912819430232048, 0.03526417911052704),
          "neg": (0.026700690388679504, 0.027936099097132683)}


def _chisep_channels(case, field_ppm=None):
    m = case["mask"]
    f = case["field"] if field_ppm is None else field_ppm
    z = lambda x, k: (x - CHISEP[k][0]) / CHISEP[k][1] * m  # noqa: E731
    return np.stack([z(case["qsm"], "qsm"), z(f, "field"), z(case["r2prime"] / DR, "r2prime")])


def _chisep_run(twins, case, **kw):
    return run_recorded(twins, "chi-sepnet", case["field"], mask=case["prob"], qsm=case["qsm"],
                        r2prime=case["r2prime"], **kw)


def _chisep_denorm(blend):
    # Code/test.py: pred_x_pos = pred[:, 0] * x_pos_std + x_pos_mean; pred_x_neg likewise (a
    # positive magnitude; qsmcore reports χ− as −magnitude, models.md §5).
    return blend[0] * CHISEP["pos"][1] + CHISEP["pos"][0], blend[1] * CHISEP["neg"][1] + CHISEP["neg"][0]


# Windows, blending, de-normalisation and masking (QSM-CI algorithms/chisepnet/recon.py main(), the
# sliding window over the ONNX graph), checked where the authors' zero-truncation does not act.
def test_chisepnet_windows(twins, aligned):
    out, _, runs = _chisep_run(twins, aligned, tile=TILE)
    blend = _fed_and_blended("chi-sepnet", runs, _chisep_channels(aligned), (TILE,) * 3, 2)
    pos, neg = _chisep_denorm(blend)
    m = aligned["mask"] > 0
    kept = m & (pos >= 0) & (neg >= 0)
    # The case must exercise the truncation (test_chisepnet_zero_truncation) as well.
    assert kept.sum() > 0.9 * m.sum() and (m & (neg < 0)).any()
    assert_close(out["chi_pos"][kept], pos[kept], "chi-sepnet: χ+")
    assert_close(out["chi_neg"][kept], -neg[kept], "chi-sepnet: χ− (≤ 0)")
    assert_close(out["chi_pos"][~m], np.zeros((~m).sum()), "chi-sepnet: χ+ outside the mask")
    assert_close(out["chi_neg"][~m], np.zeros((~m).sum()), "chi-sepnet: χ− outside the mask")


# SNU-LIST/chi_sepnet Code/test.py inference(), "### Zero-truncation ###": pred_x_pos[pred_x_pos < 0]
# = 0; pred_x_neg[pred_x_neg < 0] = 0; then × mask. (QSM-CI recon.py and QSM.rs keep the values
# unclipped; the authors' own inference code wins.)
def test_chisepnet_zero_truncation(twins, aligned):
    out, _, runs = _chisep_run(twins, aligned, tile=TILE)
    blend = _fed_and_blended("chi-sepnet", runs, _chisep_channels(aligned), (TILE,) * 3, 2)
    pos, neg = _chisep_denorm(blend)
    m = aligned["mask"]
    assert_close(out["chi_pos"], np.maximum(pos, 0) * m, "chi-sepnet: χ+ = max(x_pos, 0) · mask")
    assert_close(out["chi_neg"], -np.maximum(neg, 0) * m, "chi-sepnet: χ− = −max(x_neg, 0) · mask")


# custom_dataset.py test_dataset, INPUT_UNIT == 'Hz': field_in_ppm = field / CF * 1e6, CF the centre
# frequency in Hz (γ̄·B0; CODATA γ̄ = 42.577478 MHz/T here: rtol 1e-4 covers how qsmcore rounds γ̄).
def test_chisepnet_field_in_hz(twins, aligned):
    cf = 42.577478e6 * 3.0
    hz = dict(aligned, field=aligned["field"] * cf * 1e-6)
    _, _, runs = _chisep_run(twins, hz, tile=TILE, unit="Hz", b0=3.0)
    _fed_and_blended("chi-sepnet", runs, _chisep_channels(aligned, field_ppm=hz["field"] / cf * 1e6), (TILE,) * 3, 2,
                     rtol=1e-4)


# ---- R2PRIMEnet -----------------------------------------------------------------------------

# R2PRIMEnet (SNU-LIST/chi_sepnet Code/test.py: r2s_batch = (R2*/Dr − r2star_mean) / r2star_std × mask,
# custom_dataset.py r2star_in_ppm = r2star / Dr); the output is R2′/Dr z-scored by the r2prime stats
# that χ-sepnet's third channel uses (test.py feeds pred_r2p × mask to it as is). Windows, blending and
# de-normalisation as QSM-CI algorithms/r2primenet/recon.py main(): clip((acc · r2prime_std +
# r2prime_mean) · Dr, 0) × mask, in Hz.
R2S = (0.15865366160869598, 0.07501979172229767)


def _r2p_channels(case):
    return ((case["r2star"] / DR - R2S[0]) / R2S[1] * case["mask"])[None]


def test_r2primenet_windows(twins, aligned):
    out, _, runs = run_recorded(twins, "r2primenet", aligned["r2star"], mask=aligned["prob"], b0=3.0, tile=TILE)
    blend = _fed_and_blended("r2primenet", runs, _r2p_channels(aligned), (TILE,) * 3, 1)[0]
    r2p = (blend * CHISEP["r2prime"][1] + CHISEP["r2prime"][0]) * DR
    m = aligned["mask"]
    assert ((r2p < 0) & (m > 0)).any() and ((r2p > 0) & (m > 0)).any()  # the clip acts somewhere
    assert_close(out["r2prime"], np.clip(r2p, 0, None) * m, "r2primenet: R2′ (Hz)")


# ---- SUSEP-Net ------------------------------------------------------------------------------

# SUSEP-Net (YangGaoUQ SUSEP-Net test_demo.py, as QSMxT/QSM-CI algorithms/susep-net/recon.py
# transcribes it; the authors' repository is not in the index): model(QSM, R2′, LFS) — three inputs in
# that order, each z-scored by norm/all_mean_std.mat and × mask; QSM and the local field in ppm, R2′ in
# Hz (no Dr); end-padded to a multiple of 8, one whole-volume pass; χ± = out · std + mean, cropped,
# × mask; χ− a positive magnitude (qsmcore: −magnitude, χ_total = χ+ + χ−). Constants as QSM.rs
# src/separation/susep_net.rs SusepNetNorm.
SUSEP = {"qsm": (-6.0663105e-05, 0.023533047), "lfs": (-4.8702253e-05, 0.012554166),
         "r2prime": (4.7629275, 10.889079), "pos": (0.0089528897, 0.025519046), "neg": (0.0090135528, 0.019603666)}


def _susep_channels(case):
    m = case["mask"]
    z = lambda x, k: (x - SUSEP[k][0]) / SUSEP[k][1] * m  # noqa: E731
    return np.stack([z(case["qsm"], "qsm"), z(case["r2prime"], "r2prime"), z(case["field"], "lfs")])


def _susep_check(twins, case, patch, **kw):
    out, _, runs = run_recorded(twins, "susep-net", case["field"], mask=case["prob"], qsm=case["qsm"],
                                r2prime=case["r2prime"], **kw)
    assert all(len(r["inputs"]) == 3 and r["inputs"][0].shape[1] == 1 for r in runs)
    blend = _fed_and_blended("susep-net", runs, _susep_channels(case), patch, 2)
    m = case["mask"]
    pos = (blend[0] * SUSEP["pos"][1] + SUSEP["pos"][0]) * m
    neg = (blend[1] * SUSEP["neg"][1] + SUSEP["neg"][0]) * m
    assert_close(out["chi_pos"], pos, "susep-net: χ+")
    assert_close(out["chi_neg"], -neg, "susep-net: χ− (≤ 0)")
    assert_close(out["chi_total"], pos - neg, "susep-net: χ_total = χ+ − |χ−|")


# The authors' default: the whole volume, end-padded to a multiple of 8 (here 32, 16, 16).
def test_susepnet_whole_volume(twins, odd):
    _susep_check(twins, odd, tuple(_round_up(s, 8) for s in ODD))


# With a patch (QSM.rs src/separation/susep_net.rs SusepNetParams::patch, the 32-bit host's sliding
# window: the volume end-padded to max(size, patch), 0.75-stride starts, overlaps averaged).
def test_susepnet_windows(twins, aligned):
    _susep_check(twins, aligned, (TILE,) * 3, tile=TILE)


# ---- the frame and the default window -------------------------------------------------------

# recon.py (and QSM.rs chisepnet.rs / r2primenet.rs / susep_net.rs with a patch) end-pads each axis
# to max(size, patch) only: on an axis longer than the patch the flush window ends at the volume's
# last voxel (x = 37: starts 0, 12, 21). qsmcore rounded the frame up to the pooling multiple as well
# (48 for χ-sepnet/R2PRIMEnet, 40 for SUSEP-Net: windows 0, 12, 24, 32), so its last windows held zero
# padding where the authors' flush window holds the volume's last voxels (#19, fixed).
@pytest.mark.parametrize("id", ["chi-sepnet", "r2primenet", "susep-net"])
def test_window_frame_not_multiple(twins, odd, id):
    if id == "chi-sepnet":
        _, _, runs = _chisep_run(twins, odd, tile=TILE)
        _fed_and_blended(id, runs, _chisep_channels(odd), (TILE,) * 3, 2)
    elif id == "r2primenet":
        _, _, runs = run_recorded(twins, id, odd["r2star"], mask=odd["prob"], b0=3.0, tile=TILE)
        _fed_and_blended(id, runs, _r2p_channels(odd), (TILE,) * 3, 1)
    else:
        _susep_check(twins, odd, (TILE,) * 3, tile=TILE)


# recon.py's PATCH = (192, 192, 128) — the published graphs' fixed input shape — is always what the
# network sees: a smaller volume is end-padded up to it (one window). qsmcore caps the window at the
# volume rounded up to 16 ([O] in chisep_nets.cpp window_frame): the net sees a (48, 16, 16) patch, its
# convolutions' own zero padding starts at that border, where the authors' patch still holds zero input
# whose features (biases, batch-norm shifts) are not zero; a 4-pool U-Net's receptive field spans it.
@pytest.mark.xfail(strict=True, reason="qsmcore's choice (docs/recipes.md): the default window is capped at the "
                                       "volume rounded up to 16 (chisep_nets.cpp window_frame); the authors always "
                                       "run the (192, 192, 128) patch, end-padding a smaller volume up to it")
@pytest.mark.parametrize("id", ["chi-sepnet", "r2primenet"])
def test_default_patch(twins, odd, id):
    if id == "chi-sepnet":
        _, _, runs = _chisep_run(twins, odd)
    else:
        _, _, runs = run_recorded(twins, id, odd["r2star"], mask=odd["prob"], b0=3.0)
    assert len(runs) == 1
    assert tuple(runs[0]["inputs"][0].shape[2:]) == (192, 192, 128), \
        f"{id}: the graph was fed a {runs[0]['inputs'][0].shape[2:]} window, the authors' patch is (192, 192, 128)"
