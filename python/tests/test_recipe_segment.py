"""Recipe tests (issue #19) of the magnitude networks: HD-BET and RS2-Net (brain extraction,
nnU-Net-style sliding windows) and SynthSeg 1.0/2.0 (segmentation). Each transcribes its authors'
pre- and post-processing in NumPy (cited beside it) and compares it with what qsmcore's wrapper fed
the graph and returned. recipe_util.py says how.

Every case is on the network's own voxel size (1 mm; RS2-Net 0.16 × 0.25 × 0.2 mm), where no
resampling happens: the resamplers (nnU-Net's skimage-style cubic/linear, SynthSeg's blur + linear
and nearest back) are not transcribed here. The magnitudes have zeros around an odd-sized non-zero
box (the crop shows), several echoes of different amplitude (qsmcore's echo combination: the root
sum of squares, models.md §5; the authors take one image), and odd extents so that every padding
total is odd. SynthSeg gets an affine that permutes and flips the axes (the RAS alignment shows).
"""

import itertools

import numpy as np
import pytest
from scipy import ndimage

from recipe_util import assert_close, run_recorded, tensor_volume


def _magnitude(shape, box_origin, box_size, echoes=(1.0, 0.6, 0.35), seed=0):
    """Echo magnitudes (last axis) non-zero exactly on a box: a smooth positive pattern."""
    rng = np.random.default_rng(seed)
    base = ndimage.gaussian_filter(rng.random(box_size), 1.5) + 0.2 * rng.random(box_size) + 0.05
    mag = np.zeros(tuple(shape) + (len(echoes),))
    sl = tuple(slice(o, o + s) for o, s in zip(box_origin, box_size))
    for e, a in enumerate(echoes):
        mag[sl + (e,)] = a * base ** (1 + 0.3 * e)
    return mag


def _rss(mag):
    return np.sqrt(np.sum(mag ** 2, axis=-1))


# ---- nnU-Net v2 (HD-BET) and RS2-Net's nnU-Net copy ---------------------------------------------

def _nnunet_prep(img, transpose):
    """nnunetv2/preprocessing/preprocessors/default_preprocessor.py run_case_npy: transpose_forward
    of the SimpleITK (z, y, x) array, crop_to_nonzero (cropping.py: bbox of data != 0, holes filled,
    which leaves the bbox as is), ZScoreNormalization without mask (default_normalization_schemes.py:
    (x − mean) / max(std, 1e-8)) before any resampling. `img` is (x, y, z); returns the normalised
    crop in the network's axis order, the bbox slices (x, y, z) and the axis permutation used."""
    nz = np.argwhere(img != 0)
    lo, hi = nz.min(0), nz.max(0) + 1
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    c = img[box]
    c = (c - c.mean()) / max(c.std(), 1e-8)
    sitk = np.transpose(c, (2, 1, 0))  # SimpleITK GetArrayFromImage: (z, y, x)
    return np.transpose(sitk, transpose), box


def _pad_nd(data, patch):
    """acvl_utils pad_nd_image(data, patch, 'constant', 0): each axis to at least the patch, the
    difference // 2 before. Returns the padded array and the slices of the data inside it."""
    pads = [((max(p - s, 0)) // 2, max(p - s, 0) - max(p - s, 0) // 2) for s, p in zip(data.shape, patch)]
    return np.pad(data, pads), tuple(slice(b, b + s) for (b, _), s in zip(pads, data.shape))


def _steps(size, patch, step=0.5):
    """nnunetv2/inference/sliding_window_prediction.py compute_steps_for_sliding_window."""
    out = []
    for i, k in zip(size, patch):
        n = int(np.ceil((i - k) / (k * step))) + 1
        actual = (i - k) / (n - 1) if n > 1 else 99999999999
        out.append([int(np.round(actual * j)) for j in range(n)])
    return out


def _gaussian(patch, scale):
    """compute_gaussian: a delta at i // 2 through scipy gaussian_filter(σ = T/8, mode constant),
    divided by its max, × value_scaling_factor, zeros replaced by the smallest non-zero value. (The
    authors then cast it to float16; the comparison here is in float64.)"""
    tmp = np.zeros(patch)
    tmp[tuple(p // 2 for p in patch)] = 1
    g = ndimage.gaussian_filter(tmp, [p / 8 for p in patch], 0, mode="constant", cval=0)
    g = g / g.max() * scale
    g[g == 0] = g[g != 0].min()
    return g


def _windows(data, patch):
    """The slicers of get_sliding_window_slicers (axis 0 outermost) and the patches they cut."""
    st = _steps(data.shape, patch)
    sls = [tuple(slice(s, s + p) for s, p in zip(starts, patch)) for starts in itertools.product(*st)]
    return sls, [data[sl] for sl in sls]


def _match_windows(runs, patches, what, per_window=1):
    """Each recorded run (groups of `per_window` runs: the flips of one window) is one of the
    authors' windows, each window once. Returns the window index of each group."""
    assert len(runs) == per_window * len(patches), f"{what}: {len(runs)} graph runs, expected " \
                                                   f"{per_window} × {len(patches)} windows"
    used, order = set(), []
    for g in range(len(patches)):
        x = tensor_volume(runs[g * per_window]["inputs"][0])
        hit = [i for i, p in enumerate(patches) if i not in used and p.shape == x.shape
               and np.allclose(x, p, rtol=1e-6, atol=1e-6 * np.abs(p).max())]
        assert hit, f"{what}: graph run {g * per_window} is none of the authors' windows " \
                    f"(shape {x.shape}; windows {sorted({p.shape for p in patches})})"
        used.add(hit[0])
        order.append(hit[0])
    return order


def _blend(shape, sls, outs, g):
    """predict_sliding_window_return_logits: predicted_logits[sl] += pred·g, n_predictions[sl] += g,
    predicted_logits /= n_predictions."""
    acc = np.zeros((outs[0].shape[0],) + tuple(shape))
    n = np.zeros(shape)
    for sl, o in zip(sls, outs):
        acc[(slice(None),) + sl] += o * g
        n[sl] += g
    return acc / n


def _assert_mask(mask, expected, margin, what):
    """Equal wherever the deciding margin (|fg − bg| logit) is not a float32 rounding tie."""
    assert mask.shape == expected.shape, (mask.shape, expected.shape)
    decided = np.abs(margin) > 1e-5 * max(float(np.abs(margin).max()), 1e-30)
    bad = (mask != expected) & decided
    assert not bad.any(), f"{what}: {int(bad.sum())} of {mask.size} voxels differ"
    assert decided.mean() > 0.99


HDBET_ZYX = (16, 32, 32)  # the patch as set with tile=(32, 32, 16): (x, y, z) → nnU-Net's (z, y, x)


# HD-BET (MIC-DKFZ/HD-BET HD_BET/hd_bet_prediction.py get_hdbet_predictor: nnUNetPredictor with
# tile_step_size 0.5, use_gaussian True, use_mirroring = use_tta; predict_from_files). nnU-Net v2
# (nnunetv2/inference/predict_from_raw_data.py predict_sliding_window_return_logits): the
# preprocessed (z, y, x) array padded to at least the patch, windows at compute_steps_for_
# sliding_window, Gaussian-weighted average (compute_gaussian(patch, 1/8, value_scaling_factor=10));
# export_prediction.py convert_predicted_logits_to_segmentation_with_correct_shape: revert the
# padding, resample to the cropped shape (none here), softmax + argmax (fg where its logit beats
# the background's), put into the bbox in zeros, transpose back; no connected-component step.
# The case is chosen where qsmcore's frame and nnU-Net's agree (see the xfail below): a patch set
# through `tile`, an x extent (64) and a z extent (32) that are multiples of it, a y extent (27)
# below it (padded 2 before, 3 after).
def test_hdbet_windows_and_mask(twins):
    mag = _magnitude((67, 30, 35), (1, 2, 2), (64, 27, 32))
    out, _, runs = run_recorded(twins, "hd-bet", mag, tile=(32, 32, 16))
    data, box = _nnunet_prep(_rss(mag), (0, 1, 2))
    padded, inside = _pad_nd(data, HDBET_ZYX)
    sls, patches = _windows(padded, HDBET_ZYX)
    order = _match_windows(runs, patches, "hd-bet")
    assert order == list(range(len(patches))), "hd-bet: windows not in nnU-Net's order"
    outs = [r["outputs"][0][0].astype(np.float64) for r in runs]
    logits = _blend(padded.shape, [sls[i] for i in order], outs, _gaussian(HDBET_ZYX, 10.0))
    logits = logits[(slice(None),) + inside]
    seg = np.zeros(_rss(mag).shape[::-1])
    seg[box[::-1]] = np.argmax(logits, axis=0)  # softmax is monotone: argmax of the logits
    margin = np.full_like(seg, np.abs(logits[1] - logits[0]).max())  # outside the bbox: decided, 0
    margin[box[::-1]] = logits[1] - logits[0]
    _assert_mask(out["mask"], seg.transpose(2, 1, 0), margin.transpose(2, 1, 0), "hd-bet: mask")


# HD-BET with test-time mirroring (hd_bet_prediction.py use_tta → nnUNetPredictor use_mirroring;
# predict_from_raw_data.py _internal_maybe_mirror_and_predict: the network on the window flipped
# along every non-empty combination of the spatial axes (allowed mirroring axes (0, 1, 2)), each
# output flipped back, summed with the plain run and divided by 8). One window, padded on all axes.
def test_hdbet_mirroring(twins):
    mag = _magnitude((23, 27, 16), (2, 1, 1), (19, 23, 13), seed=1)
    out, _, runs = run_recorded(twins, "hd-bet", mag, tile=(32, 32, 16), hdbet_mirroring=True)
    data, box = _nnunet_prep(_rss(mag), (0, 1, 2))
    padded, inside = _pad_nd(data, HDBET_ZYX)
    assert padded.shape == HDBET_ZYX and len(runs) == 8
    combos = [()] + [c for n in (1, 2, 3) for c in itertools.combinations((0, 1, 2), n)]
    seen, acc = [], 0.0
    for r in runs:
        x = tensor_volume(r["inputs"][0])
        hit = [c for c in combos if c not in seen and np.array_equal(x, np.flip(padded, c).astype(np.float32))]
        assert hit, "hd-bet: a mirrored run is no flip of the window"
        seen.append(hit[0])
        acc = acc + np.flip(r["outputs"][0][0].astype(np.float64), [a + 1 for a in hit[0]])
    logits = (acc / 8)[(slice(None),) + inside]
    seg = np.zeros(_rss(mag).shape[::-1])
    seg[box[::-1]] = np.argmax(logits, axis=0)
    margin = np.full_like(seg, np.abs(logits[1] - logits[0]).max())  # outside the bbox: decided, 0
    margin[box[::-1]] = logits[1] - logits[0]
    _assert_mask(out["mask"], seg.transpose(2, 1, 0), margin.transpose(2, 1, 0), "hd-bet (mirrored): mask")


# HD-BET's window and frame (nnunetv2 predict_sliding_window_return_logits): the preprocessed
# array is padded only up to the patch (pad_nd_image) and windows of the full patch slide over
# it, so an extent below the patch is fed padded to the full patch ((96, 192, 192) by default),
# and an extent above it is not padded at all (37 with patch 32: windows at 0 and 5).
# qsmcore padded the frame to the (32, 32, 16) multiple as well (windows 0, 16, 32 on 37); fixed (#19).
# An extent below the default patch is qsmcore's choice (docs/recipes.md): the window shrinks to the
# volume rounded up to the multiple instead of running a full (96, 192, 192) patch of padding.
@pytest.mark.parametrize("tile,shape,patch", [
    pytest.param(None, (37, 29, 23), (96, 192, 192), marks=pytest.mark.xfail(
        strict=True, reason="qsmcore's choice (docs/recipes.md): below the patch the HD-BET window shrinks to the "
                            "volume rounded up to (32, 32, 16); nnU-Net runs the full (96, 192, 192) patch")),
    ((32, 32, 16), (37, 21, 13), HDBET_ZYX)])
def test_hdbet_frame(twins, tile, shape, patch):
    mag = _magnitude(shape, (0, 0, 0), shape, seed=2)
    _, _, runs = run_recorded(twins, "hd-bet", mag, tile=tile)
    data, _ = _nnunet_prep(_rss(mag), (0, 1, 2))
    padded, _ = _pad_nd(data, patch)
    _match_windows(runs, _windows(padded, patch)[1], "hd-bet")


# RS2-Net (VitoLin21/Rodent-Skull-Stripping RS2/inference/predict.py predict_from_raw_data with
# RS2/jsons/plans.json: transpose_forward [1, 0, 2] of the SimpleITK (z, y, x) array, i.e. (y, z, x);
# spacing (0.25, 0.2, 0.16) mm in that order; ZScoreNormalization without mask; the network's
# fixed patch (here the twin's [16, 32, 32]); RS2/inference/sliding_window_prediction.py: padded to
# at least the patch (pad_nd_image), compute_steps_for_sliding_window at 0.5). The input on the
# network's spacing, y (40) and x (45) above the patch, z (27) below it.
RS2_YZX = (16, 32, 32)


def _rs2_case(twins, **kw):
    mag = _magnitude((47, 43, 30), (1, 2, 1), (45, 40, 27), seed=3)
    out, _, runs = run_recorded(twins, "rs2-net", mag, voxel_size=(0.16, 0.25, 0.2), **kw)
    data, box = _nnunet_prep(_rss(mag), (1, 0, 2))
    padded, inside = _pad_nd(data, RS2_YZX)
    return mag, out, runs, box, padded, inside


def test_rs2net_windows(twins):
    _, _, runs, _, padded, _ = _rs2_case(twins, test_time_flips=False)
    _match_windows(runs, _windows(padded, RS2_YZX)[1], "rs2-net")


# RS2-Net's blending and mask (predict.py: use_gaussian=True always, the precomputed
# compute_gaussian(patch) (σ = T/8, peak 1); sliding_window_prediction.py: Σ g·pred / Σ g over the
# windows, padding reverted; export_prediction.py export_prediction_from_sigmoid: resample (none
# here), one sigmoid head thresholded at 0.5 (logit > 0), into the bbox, transpose_backward). This
# is the --disable_tta run; the CLI's default also mirrors (next test).
def test_rs2net_mask(twins):
    mag, out, runs, box, padded, inside = _rs2_case(twins, test_time_flips=False)
    sls, patches = _windows(padded, RS2_YZX)
    order = _match_windows(runs, patches, "rs2-net")
    outs = [r["outputs"][0][0].astype(np.float64) for r in runs]
    logit = _blend(padded.shape, [sls[i] for i in order], outs, _gaussian(RS2_YZX, 1.0))[0][inside]
    seg = np.zeros(_rss(mag).shape)  # (x, y, z): (y, z, x) → transpose back
    seg[box] = np.transpose(logit > 0, (2, 0, 1))
    margin = np.full_like(seg, np.abs(logit).max())  # outside the bbox: decided, 0
    margin[box] = np.transpose(logit, (2, 0, 1))
    _assert_mask(out["mask"], seg, margin, "rs2-net: mask")


# RS2-Net's CLI (predict.py predict_entry_point: use_mirroring = not --disable_tta, "Not
# recommended" to disable; load_what_we_need: inference_allowed_mirroring_axes (0, 1, 2);
# maybe_mirror_and_predict: 8 runs per window, averaged).
def test_rs2net_mirroring(twins):
    # One window ((y, z, x) extent within the patch): its 8 runs are the window flipped along each
    # subset of its axes, and the mask follows from their average (logit > 0).
    mag = _magnitude((30, 14, 30), (1, 1, 1), (28, 12, 28), seed=4)
    out, _, runs = run_recorded(twins, "rs2-net", mag, voxel_size=(0.16, 0.25, 0.2))
    assert len(runs) == 8
    x0 = runs[0]["inputs"][0][0, 0]
    fed = [r["inputs"][0][0, 0] for r in runs]
    for axes in [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]:
        want = np.flip(x0, axes) if axes else x0
        assert sum(np.array_equal(f, want) for f in fed) == 1, f"rs2-net: no single run fed the flip {axes}"
    mean = np.mean([np.flip(r["outputs"][0][0, 0], _flip_axes(x0, r["inputs"][0][0, 0])) for r in runs], axis=0)
    data, box = _nnunet_prep(_rss(mag), (1, 0, 2))
    padded, inside = _pad_nd(data, RS2_YZX)
    logit = mean[inside]
    seg = np.zeros(_rss(mag).shape)
    seg[box] = np.transpose(logit > 0, (2, 0, 1))
    margin = np.full_like(seg, np.abs(logit).max())
    margin[box] = np.transpose(logit, (2, 0, 1))
    _assert_mask(out["mask"], seg, margin, "rs2-net (mirrored): mask")


def _flip_axes(x0, x):
    for axes in [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]:
        if np.array_equal(np.flip(x0, axes) if axes else x0, x):
            return axes
    raise AssertionError("rs2-net: a run was fed no flip of the window")


# ---- SynthSeg -----------------------------------------------------------------------------------

# FreeSurfer label lists (SynthSeg data/labels_classes_priors/synthseg_segmentation_labels[_2.0].npy,
# sorted as predict_synthseg.py's get_flip_indices / np.unique leave them) and left ↔ right pairs.
SS_LABELS = {32: [0, 2, 3, 4, 5, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 26, 28, 41, 42, 43, 44, 46, 47, 49, 50,
                  51, 52, 53, 54, 58, 60]}
SS_LABELS[33] = sorted(SS_LABELS[32] + [24])
LEFT_RIGHT = [(2, 41), (3, 42), (4, 43), (5, 44), (7, 46), (8, 47), (10, 49), (11, 50), (12, 51), (13, 52),
              (17, 53), (18, 54), (26, 58), (28, 60)]
# synthseg_topological_classes[_2.0].npy per label (binary .npy files not readable here: these are
# the class values as qsmcore's segment_nets.cpp lists them, data rather than recipe).
SS_TOPOLOGY = {32: [0, 4, 4, 4, 4, 5, 5, 6, 7, 8, 9, 1, 2, 3, 10, 11, 12, 13, 14, 14, 14, 14, 15, 15, 16, 17, 18, 19,
                    20, 21, 22, 23],
               33: [0, 4, 4, 4, 4, 5, 5, 6, 7, 8, 9, 1, 2, 3, 10, 11, 0, 12, 13, 14, 14, 14, 14, 15, 15, 16, 17, 18,
                    19, 20, 21, 22, 23]}
SS_AFFINE = np.array([[0.0, -1.0, 0.0, 10.0],   # voxel axis 1 runs right → left
                      [0.0, 0.0, 1.0, -20.0],   # voxel axis 2 runs posterior → anterior
                      [-1.0, 0.0, 0.0, 30.0],   # voxel axis 0 runs superior → inferior
                      [0.0, 0.0, 0.0, 1.0]])
SS_SHAPE = (21, 19, 23)


def _ras_axes(aff):
    """ext/lab2im/edit_volumes.py get_ras_axes."""
    img_ras_axes = np.argmax(np.abs(np.linalg.inv(aff)[:3, :3]), axis=0)
    for i in range(3):
        if i not in img_ras_axes:
            unique, counts = np.unique(img_ras_axes, return_counts=True)
            incorrect = unique[np.argmax(counts)]
            img_ras_axes[np.where(img_ras_axes == incorrect)[0][-1]] = i
    return img_ras_axes


def _align(volume, aff, aff_ref):
    """ext/lab2im/edit_volumes.py align_volume_to_ref (swap axes to the reference's, then flip
    those whose direction opposes it)."""
    aff_flo = aff.copy()
    ras_ref, ras_flo = _ras_axes(aff_ref), _ras_axes(aff_flo)
    aff_flo[:, ras_ref] = aff_flo[:, ras_flo]
    for i in range(3):
        if ras_flo[i] != ras_ref[i]:
            volume = np.swapaxes(volume, ras_flo[i], ras_ref[i])
            j = np.where(ras_flo == ras_ref[i])[0][0]
            ras_flo[j], ras_flo[i] = ras_flo[i], ras_flo[j]
    dots = np.sum(aff_flo[:3, :3] * aff_ref[:3, :3], axis=0)
    for i in range(3):
        if dots[i] < 0:
            volume = np.flip(volume, axis=i)
            aff_flo[:, i] = -aff_flo[:, i]
    return volume


def _synthseg_input(img, aff):
    """SynthSeg/predict_synthseg.py preprocess (1 mm: no resampling; no crop): align to RAS;
    edit_volumes.rescale_volume(0, 1, 0.5, 99.5): np.percentile of all voxels, clip, rescale;
    pad (edit_volumes.pad_volume, floor of the margin before) to max(ceil32(shape), 128)
    (min_pad = 128 in predict()). Returns the padded volume and the slices of the image in it."""
    im = _align(img, aff, np.eye(4))
    lo, hi = np.percentile(im, 0.5), np.percentile(im, 99.5)
    im = (np.clip(im, lo, hi) - lo) / (hi - lo)
    pad = [max(-(-s // 32) * 32, 128) for s in im.shape]
    before = [(p - s) // 2 for s, p in zip(im.shape, pad)]
    padded = np.pad(im, [(b, p - s - b) for b, s, p in zip(before, im.shape, pad)])
    return padded, tuple(slice(b, b + s) for b, s in zip(before, im.shape))


@pytest.fixture(scope="module", params=["synthseg", "synthseg-2.0"])
def synthseg_case(request, twins):
    rng = np.random.default_rng(4)
    img = ndimage.gaussian_filter(rng.random(SS_SHAPE), 1.0) * 100 + rng.random(SS_SHAPE)
    img[rng.random(SS_SHAPE) < 0.02] *= 5  # outliers above the 99.5 percentile
    out, _, runs = run_recorded(twins, request.param, img, affine=SS_AFFINE)
    return request.param, img, out, runs


# SynthSeg's input (predict_synthseg.py preprocess, above) and its flipped twin
# (build_model: layers.RandomFlip(axis=0, prob=1) on the input image, the first spatial axis).
def test_synthseg_input(synthseg_case):
    id, img, _, runs = synthseg_case
    padded, _ = _synthseg_input(img, SS_AFFINE)
    assert len(runs) == 2
    for r, want, what in [(runs[0], padded, "image"), (runs[1], padded[::-1], "flipped image")]:
        x = r["inputs"][0]
        assert x.shape == (1,) + padded.shape + (1,), (x.shape, padded.shape)
        assert_close(x[0, ..., 0], want, f"{id}: {what} fed to the graph")


def _lcc(mask):
    """edit_volumes.get_largest_connected_component: scipy label (6-connected), argmax bincount."""
    comp, n = ndimage.label(mask)
    return comp == np.argmax(np.bincount(comp.flat)[1:]) + 1 if n > 0 else mask.copy()


def _blur(post):
    """ext/lab2im/layers.py GaussianBlur(sigma=0.5) (gaussian_kernel: window 3, normalised taps),
    tf.nn.convolution 'same' (zeros outside) along each spatial axis of the whole tensor; float32
    as the model's tensors are."""
    x = np.arange(3) - 1.0
    k = np.exp(-x ** 2 / (2 * 0.25))
    k = (k / k.sum()).astype(np.float32)
    for a in range(3):
        post = ndimage.correlate1d(post, k, axis=a, mode="constant", cval=0.0)
    return post


# SynthSeg's output (predict_synthseg.py build_model: GaussianBlur(0.5) on the network's output on
# the padded tensor, then the flipped run flipped back, its channels re-ordered left ↔ right
# (get_flip_indices) and 0.5·(plain + flipped); postprocess with topology classes, not fast: on the
# still padded posteriors, the foreground (Σ_{c≥1} > 0.25) largest component, then per topology
# class the largest component of "any member > 0.25"; then the padding cropped, posteriors
# renormalised, argmax → label list; align_volume_to_ref back to the input's orientation).
# qsmcore blurs and cleans up on the un-padded RAS grid instead (zeros outside it): that changes
# labels near the edge of the image where the graph's outputs in the padding matter. With this
# phantom and the twins' weights SynthSeg 1.0's labels happen to come out the same, 2.0's do not.
def test_synthseg_labels(synthseg_case, request):
    id, img, out, runs = synthseg_case
    if id == "synthseg-2.0":
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "qsmcore's choice (docs/recipes.md): it blurs the posteriors and runs the topology clean-up on the "
            "un-padded RAS grid; SynthSeg blurs inside the model on the padded tensor and cleans up before "
            "cropping the padding")))
    L = runs[0]["outputs"][0].shape[-1]
    labels = np.array(SS_LABELS[L])
    flip_idx = np.arange(L)
    for a, b in LEFT_RIGHT:
        ia, ib = np.where(labels == a)[0][0], np.where(labels == b)[0][0]
        flip_idx[ia], flip_idx[ib] = ib, ia
    seg = _blur(runs[0]["outputs"][0][0])
    flipped = _blur(runs[1]["outputs"][0][0])[::-1][..., flip_idx]
    post = 0.5 * (seg + flipped)
    del seg, flipped
    fg = _lcc(np.sum(post[..., 1:], axis=-1) > 0.25)
    post[..., 1:] *= fg[..., None]
    classes = np.array(SS_TOPOLOGY[L])
    above = post > 0.25
    for tc in np.unique(classes)[1:]:
        idx = np.where(classes == tc)[0]
        keep = _lcc(np.any(above[..., idx], axis=-1))
        for i in idx:
            post[..., i] *= keep
    _, inside = _synthseg_input(img, SS_AFFINE)
    post = post[inside]
    post /= np.sum(post, axis=-1)[..., None]
    top2 = np.sort(post, axis=-1)[..., -2:]
    want = labels[np.argmax(post, axis=-1)]
    # back to the input's orientation: the inverse of _align for this permutation + flips
    back = _align_back(want, SS_AFFINE)
    margin = _align_back(top2[..., 1] - top2[..., 0], SS_AFFINE)
    decided = margin > 1e-5  # not a float32 rounding tie
    bad = (out["labels"] != back) & decided
    assert decided.mean() > 0.99
    assert not bad.any(), f"{id}: {int(bad.sum())} of {bad.size} labels differ"


def _align_back(volume, aff):
    """postprocess: align_volume_to_ref(seg, aff=np.eye(4), aff_ref=aff)."""
    return _align(volume, np.eye(4), aff)
