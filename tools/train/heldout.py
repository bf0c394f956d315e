"""Held-out evaluation heads for qsmcore-invnet (issue 53): the project's blind test.

Built ONLY from the Colin27-derived files of Debian's mricron-data — `ch2bet.nii.gz` (the
skull-stripped Colin27 T1, 181×217×181, 1 mm, MNI space) and `aal.nii.gz` (AAL, drawn on
Colin27) — plus seeded procedural pieces. Nothing here is read by training: synth.py uses no
file, synth_anatomy.py refuses ch2*/aal*/brodmann* by name, and train.py imports neither this
file nor its outputs.

  /usr/bin/python3 tools/train/heldout.py --out build/heldout [--seeds 1 2] [--variants z tilt aniso]

Per head (folder OUT/<variant>_s<seed>): chi.nii.gz (truth, ppm, 0 outside the mask),
mask.nii.gz, field.nii.gz (local field, ppm, masked), meta.json (voxel, B0 direction, seed).

Anatomy and χ (ppm; physics.md §4.3 values, each drawn per seed within ±15 %):
  - mask: ch2bet > 0, holes filled, largest component;
  - cortex, white matter and CSF with their partial volume from the T1 intensity itself:
    χ is piecewise linear in the T1 value between the CSF, grey- and white-matter peaks of the
    histogram (30, 87, 113), so folding and the sulcal CSF are Colin27's own;
  - caudate, putamen, pallidum, thalamus, hippocampus/amygdala from AAL (edges blurred σ 0.6 mm);
  - substantia nigra, red nucleus, dentate: ellipsoids at their MNI positions;
  - veins: the superior sagittal sinus 4 mm under the midline convexity (r 2 mm, +0.19), the
    internal cerebral veins (r 1.2 mm), and 6 seeded cortical veins within 5 mm of the surface
    (r 0.7–1.2 mm), +0.30 (venous blood, Y ≈ 0.78);
  - one calcification (sphere r 2.5 mm, −0.2…−0.5 ppm) at a seeded white-matter position.
Variants: `z` (1 mm, B0 along z), `tilt` (1 mm, B0 25° off z at a seeded azimuth), `aniso`
(1×1×2 mm: the truth and mask averaged over slice pairs, B0 along z). The field is
synth.forward_field's model (2N padding with the corner value, D(0) = 1/3, fftfreq grid), here
computed in complex64 to fit memory (equal to synth's within float32 rounding); noise-free.
"""
import argparse
import json
import os

import nibabel as nib
import numpy as np
from scipy import fft as sfft
from scipy import ndimage

TEMPLATES = "/usr/share/mricron/templates"
# physics.md §4.3 (Ridani/NeuroPoly via qsm-forward), ppm.
CHI = dict(gm=0.020, wm=-0.030, csf=0.0, caudate=0.044, putamen=0.038, pallidum=0.131, thalamus=0.020,
           hippo=0.020, nigra=0.111, red=0.100, dentate=0.152, sinus=0.19, vein=0.30)
AAL = dict(caudate=(71, 72), putamen=(73, 74), pallidum=(75, 76), thalamus=(77, 78), hippo=(37, 38, 41, 42))
T1_PEAKS = (30.0, 87.0, 113.0)  # CSF, GM, WM peaks of ch2bet's in-mask histogram


def load(name):
    img = nib.load(os.path.join(TEMPLATES, name))
    return np.asarray(img.dataobj), img.affine


def forward_field(chi, voxel, b0):
    """synth.forward_field's model (same kernel on numpy's fftfreq grid, corner padding) in
    complex64 with a broadcast kernel, to fit a 362×434×362 grid in memory."""
    n = chi.shape
    pad = np.full([2 * s for s in n], chi[-1, -1, -1], np.float32)
    pad[: n[0], : n[1], : n[2]] = chi
    N = pad.shape
    b = np.asarray(b0, np.float64) / np.linalg.norm(b0)
    k = [np.fft.fftfreq(m, d=v).astype(np.float32) for m, v in zip(N, voxel)]
    kx, ky, kz = k[0][:, None, None], k[1][None, :, None], k[2][None, None, :]
    F = sfft.fftn(pad, workers=1)
    del pad
    with np.errstate(invalid="ignore", divide="ignore"):
        D = np.float32(1.0 / 3.0) - (kx * b[0] + ky * b[1] + kz * b[2]).astype(np.float32) ** 2 / (kx**2 + ky**2 + kz**2)
    D[0, 0, 0] = 1.0 / 3.0
    F *= D
    del D
    f = sfft.ifftn(F, workers=1, overwrite_x=True)
    return np.real(f[: n[0], : n[1], : n[2]]).astype(np.float32)


def brain_mask(t1):
    m = ndimage.binary_fill_holes(t1 > 0)
    lab, n = ndimage.label(m)
    sizes = ndimage.sum(m, lab, range(1, n + 1))
    return lab == (1 + int(np.argmax(sizes)))


def mni_grid(affine, shape):
    idx = [np.arange(n, dtype=np.float32) for n in shape]
    return [affine[a, a] * idx[a] + affine[a, 3] for a in range(3)]  # axis-aligned affines only


def ellipsoid(mni, centre, semi):
    x, y, z = mni
    return (((x[:, None, None] - centre[0]) / semi[0]) ** 2 + ((y[None, :, None] - centre[1]) / semi[1]) ** 2
            + ((z[None, None, :] - centre[2]) / semi[2]) ** 2) < 1


def tube(shape, pts, radius):
    """Voxels within `radius` (voxels) of the polyline `pts` (voxel coordinates)."""
    out = np.zeros(shape, bool)
    for p, q in zip(pts[:-1], pts[1:]):
        lo = np.maximum(np.floor(np.minimum(p, q) - radius - 1).astype(int), 0)
        hi = np.minimum(np.ceil(np.maximum(p, q) + radius + 2).astype(int), shape)
        if np.any(hi <= lo):
            continue
        g = np.stack(np.meshgrid(*[np.arange(a, b, dtype=np.float32) for a, b in zip(lo, hi)], indexing="ij"), -1)
        seg = q - p
        t = np.clip(((g - p) @ seg) / max(seg @ seg, 1e-9), 0, 1)
        d = np.linalg.norm(g - (p + t[..., None] * seg), axis=-1)
        out[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] |= d < radius
    return out


def t1_to_chi(t1, v):
    c, g, w = T1_PEAKS
    x = t1.astype(np.float32)
    return np.interp(x, [0.0, c, g, w, 255.0], [v["csf"], v["csf"], v["gm"], v["wm"], v["wm"]]).astype(np.float32)


def veins(rng, mask, depth, aff):
    """Sinus (along the midline convexity), internal cerebral veins, seeded cortical veins."""
    shape = mask.shape
    xm = int(round(-aff[0, 3] / aff[0, 0]))  # MNI x = 0
    pts = []
    for j in range(0, shape[1], 4):
        col = np.flatnonzero(mask[xm, j])
        if len(col) and col[-1] > shape[2] * 0.55:
            pts.append([xm, j, col[-1] - 4.0])
    pts = np.array(pts, np.float32)
    if len(pts) > 5:  # the convexity's 1 mm steps smoothed away (the sinus is a smooth arc)
        pts[2:-2, 2] = np.convolve(pts[:, 2], np.ones(5) / 5, mode="valid")
    sinus = tube(shape, pts, 2.0) & mask if len(pts) > 1 else np.zeros(shape, bool)
    to_vox = lambda p: (np.asarray(p, np.float32) - aff[:3, 3]) / np.diag(aff)[:3]
    icv = np.zeros(shape, bool)
    for sx in (-1, 1):
        icv |= tube(shape, np.array([to_vox((sx * 2.5, 2, 14)), to_vox((sx * 2.5, -25, 14)),
                                     to_vox((sx * 1, -38, 8))]), 1.2)
    cort = np.zeros(shape, bool)
    shell = np.argwhere(mask & (depth > 1) & (depth < 5))
    for _ in range(6):
        p = shell[rng.integers(len(shell))].astype(np.float32)
        d = rng.standard_normal(3).astype(np.float32)
        d /= np.linalg.norm(d)
        path = [p]
        for _ in range(rng.integers(10, 25)):
            q = path[-1] + 2.5 * d
            qi = np.clip(np.round(q).astype(int), 0, np.array(shape) - 1)
            if not (mask[tuple(qi)] and depth[tuple(qi)] < 7):  # bend back towards the surface shell
                d = -d + 0.5 * rng.standard_normal(3).astype(np.float32)
            else:
                d = d + 0.3 * rng.standard_normal(3).astype(np.float32)
                path.append(q)
            d /= np.linalg.norm(d)
        if len(path) > 2:
            cort |= tube(shape, np.array(path), float(rng.uniform(0.7, 1.2)))
    return sinus, (icv | cort) & mask & ~sinus


def build_truth(seed):
    """χ (ppm) and mask on Colin27's 1 mm grid, and the affine."""
    rng = np.random.default_rng(seed)
    t1, aff = load("ch2bet.nii.gz")
    aal, aff2 = load("aal.nii.gz")
    assert np.allclose(aff, aff2) and t1.shape == aal.shape
    v = {k: val * rng.uniform(0.85, 1.15) for k, val in CHI.items()}
    v["csf"] = rng.uniform(0.0, 0.019)
    mask = brain_mask(t1)
    chi = t1_to_chi(t1, v)
    mni = mni_grid(aff, t1.shape)
    structures = [(np.isin(aal, AAL[k]), k) for k in ("hippo", "thalamus", "caudate", "putamen", "pallidum")]
    for c, s, k in (((11, -17, -11), (4, 8, 3), "nigra"), ((5, -20, -8), (3.5, 3.5, 3.5), "red"),
                    ((15, -57, -35), (6, 8, 5), "dentate")):
        structures.append((ellipsoid(mni, c, s) | ellipsoid(mni, (-c[0], c[1], c[2]), s), k))
    for region, k in structures:
        w = ndimage.gaussian_filter(region.astype(np.float32), 0.6)
        chi = (1 - w) * chi + w * v[k]
    depth = ndimage.distance_transform_edt(mask)
    sinus, vein = veins(rng, mask, depth, aff)
    for region, val in ((sinus, v["sinus"]), (vein, v["vein"])):
        w = ndimage.gaussian_filter(region.astype(np.float32), 0.4)
        chi = (1 - w) * chi + w * val
    wm = np.argwhere(mask & (t1 > 108) & (depth > 12))
    c = wm[rng.integers(len(wm))]
    calc = ellipsoid([np.arange(n, dtype=np.float32) for n in t1.shape], c, (2.5, 2.5, 2.5))
    chi[calc] = rng.uniform(-0.5, -0.2)
    return (chi * mask).astype(np.float32), mask, aff, dict(calcification_voxel=c.tolist(),
                                                            chi_ppm={k: round(float(x), 4) for k, x in v.items()})


def variant(chi, mask, aff, name, seed):
    rng = np.random.default_rng(1000 + seed)
    voxel = np.array([1.0, 1.0, 1.0])
    b0 = np.array([0.0, 0.0, 1.0])
    if name == "tilt":
        t, az = np.deg2rad(25.0), rng.uniform(0, 2 * np.pi)
        b0 = np.array([np.sin(t) * np.cos(az), np.sin(t) * np.sin(az), np.cos(t)])
    elif name == "aniso":
        nz = chi.shape[2] // 2
        chi = chi[:, :, : 2 * nz].reshape(chi.shape[0], chi.shape[1], nz, 2).mean(-1)
        m = mask[:, :, : 2 * nz].reshape(mask.shape[0], mask.shape[1], nz, 2).mean(-1) >= 0.5
        chi = (chi * m).astype(np.float32)
        mask = m
        voxel = np.array([1.0, 1.0, 2.0])
        aff = aff.copy()
        aff[2, 2] *= 2.0
        aff[2, 3] += 0.5  # centre of the first slice pair
    field = forward_field(chi * mask, voxel, b0) * mask
    return chi, mask, field.astype(np.float32), aff, voxel, b0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--variants", nargs="+", default=["z", "tilt", "aniso"])
    a = ap.parse_args()
    for seed in a.seeds:
        chi0, mask0, aff0, info = build_truth(seed)
        for name in a.variants:
            chi, mask, field, aff, voxel, b0 = variant(chi0, mask0, aff0, name, seed)
            d = os.path.join(a.out, f"{name}_s{seed}")
            os.makedirs(d, exist_ok=True)
            for arr, fn in ((chi, "chi"), (mask.astype(np.uint8), "mask"), (field, "field")):
                img = nib.Nifti1Image(arr, aff)
                img.header.set_xyzt_units("mm")
                nib.save(img, os.path.join(d, fn + ".nii.gz"))
            meta = dict(seed=seed, variant=name, voxel_mm=voxel.tolist(), b0_dir=b0.tolist(), shape=list(chi.shape),
                        source="mricron-data ch2bet.nii.gz + aal.nii.gz (Colin27), held out", **info)
            json.dump(meta, open(os.path.join(d, "meta.json"), "w"), indent=1)
            print(d, chi.shape, f"mask {int(mask.sum())} vox, field rms {field[mask].std():.4f} ppm", flush=True)


if __name__ == "__main__":
    main()
