"""Brain-like training data for qsmcore-invnet by domain randomization (issue 53).

Anatomy comes from the MNI152-space label atlases of Debian's mricron-data that are NOT drawn on
the Colin27 subject — Harvard-Oxford cortical (maxprob thr0, 1 mm), AICHAmc (2 mm) and the JHU
white-matter labels (1 mm) — plus procedural pieces of our own (sulcal CSF and the cortical ribbon
by distance from region boundaries and the surface, ventricles, cerebellum with folia, brainstem,
substantia nigra, red nucleus, dentate, veins, the superior sagittal sinus, calcifications,
haemorrhage). The held-out Colin27 files (ch2*, aal*, brodmann*) are refused by `_open_atlas`:
they are the blind test of tools/train/heldout.py and never feed training.

Per sample (make_sample): a random affine (rotation, per-axis scale, centre inside the brain) and
a smooth elastic displacement map the sample's voxel grid (random voxel size, 64³ by default)
into MNI millimetres; the canonical maps are looked up there (nearest neighbour), χ is drawn per
structure from literature-based ranges (physics.md §4.3, widened), texture and a
partial-volume blur are added; the mask may be eroded or dilated (as a background removal's mask
is); the field is synth.forward_field of χ·mask (the same forward model as synth.py and the
held-out heads), plus in some samples a residual background field (an incompletely removed
field of the sources just outside the mask and a low-order polynomial), noise, and B0 tilts.
Returns synth.Sample (so train.py handles both families alike).
"""
from __future__ import annotations

import os

import numpy as np
from scipy import ndimage

import synth

ATLAS_DIR = "/usr/share/mricron/templates"
HELD_OUT = ("ch2", "aal", "brodmann")  # Colin27 and the atlases drawn on it: never read here
CACHE = os.path.join(os.path.dirname(__file__), "..", "..", "build", "train-anatomy", "canon.npz")

# Canonical grid = the JHU 1 mm grid: MNI mm = index + ORIGIN, 182×218×182, x left→right.
SHAPE = (182, 218, 182)
ORIGIN = np.array([-91.0, -126.0, -72.0])

# Base codes of the canonical map.
OUT, CEREBRUM, CORTEX_REGION = 0, 1, 2
CAUDATE, PUTAMEN, PALLIDUM, THALAMUS, HIPPO = 3, 4, 5, 6, 7
TRACT_ASSOC, TRACT_STEM, TRACT_CALLOSUM, TRACT_CAPSULE = 8, 9, 10, 11

# Tissue codes of a sample (after the procedural pieces), used to draw χ.
T = dict(wm=1, gm=2, csf=3, caudate=4, putamen=5, pallidum=6, thalamus=7, hippo=8, t_assoc=9, t_stem=10,
         t_callosum=11, t_capsule=12, cb_gm=13, cb_wm=14, stem=15, nigra=16, red=17, dentate=18, vein=19,
         calc=20, haem=21)

# χ ranges in ppm (physics.md §4.3 values, widened for randomization; veins from Y 0.5–0.85).
CHI_RANGE = {
    "wm": (-0.06, -0.01), "gm": (-0.005, 0.04), "csf": (-0.01, 0.03), "caudate": (0.01, 0.10),
    "putamen": (0.0, 0.12), "pallidum": (0.06, 0.25), "thalamus": (-0.01, 0.06), "hippo": (-0.01, 0.03),
    "cb_gm": (-0.005, 0.04), "cb_wm": (-0.06, -0.01), "stem": (-0.05, 0.0), "nigra": (0.05, 0.25),
    "red": (0.04, 0.20), "dentate": (0.05, 0.25), "vein": (0.15, 0.55), "calc": (-0.8, -0.08),
    "haem": (0.15, 1.0),
}
TRACT_OFFSET = {"t_assoc": (-0.02, 0.0), "t_stem": (-0.025, 0.0), "t_callosum": (-0.03, 0.0),
                "t_capsule": (-0.04, -0.005)}

JHU_GROUP = {}  # JHU value → tract code (the same grouping as src/physics/atlas_labels.h)
for v in (1, 2, 9, 10, 11, 12, 13, 14):
    JHU_GROUP[v] = TRACT_STEM
for v in (3, 4, 5):
    JHU_GROUP[v] = TRACT_CALLOSUM
for v in (7, 8, 15, 16, 17, 18, 19, 20, 21, 22, 29, 30, 31, 32):
    JHU_GROUP[v] = TRACT_CAPSULE
for v in range(1, 49):
    JHU_GROUP.setdefault(v, TRACT_ASSOC)


def _open_atlas(name):
    import nibabel as nib

    base = os.path.basename(name).lower()
    if base.startswith(HELD_OUT):
        raise ValueError(f"{name}: Colin27-derived file, held out from training (issue 53)")
    img = nib.load(os.path.join(ATLAS_DIR, name))
    return np.asarray(img.dataobj), img.affine


def _resample_to_canon(data, affine):
    """Nearest-neighbour lookup of an MNI-space atlas at the canonical grid's voxel centres."""
    idx = [np.arange(n, dtype=np.float64) + o for n, o in zip(SHAPE, ORIGIN)]
    inv = np.linalg.inv(affine)
    out = np.zeros(SHAPE, data.dtype)
    X, Y = np.meshgrid(idx[0], idx[1], indexing="ij")
    for k, z in enumerate(idx[2]):  # per slice, to keep memory small
        p = [inv[a, 0] * X + inv[a, 1] * Y + inv[a, 2] * z + inv[a, 3] for a in range(3)]
        v = [np.floor(q + 0.5 + 1e-6).astype(np.int64) for q in p]
        ok = np.ones(X.shape, bool)
        for a in range(3):
            ok &= (v[a] >= 0) & (v[a] < data.shape[a])
        sl = np.zeros(X.shape, data.dtype)
        sl[ok] = data[v[0][ok], v[1][ok], v[2][ok]]
        out[:, :, k] = sl
    return out


def build_canon():
    """The canonical maps: base code, region (HO label or JHU value), distance to a sulcus (mm),
    depth below the brain surface (mm)."""
    ho = _resample_to_canon(*_open_atlas("HarvardOxford-cort-maxprob-thr0-1mm.nii.gz"))
    aicha = _resample_to_canon(*_open_atlas("AICHAmc.nii.gz"))
    jhu = _resample_to_canon(*_open_atlas("JHU-WhiteMatter-labels-1mm.nii.gz"))
    cerebrum = (ho > 0) | (aicha > 0) | (jhu > 0)
    cerebrum = ndimage.binary_fill_holes(ndimage.binary_closing(cerebrum, iterations=2))
    depth = ndimage.distance_transform_edt(cerebrum).astype(np.float32)
    # Sulci: boundaries between cortical regions of either parcellation (gyral borders lie at
    # sulcal fundi), only within 20 mm of the surface; their distance sets CSF and the ribbon.
    bnd = np.zeros(SHAPE, bool)
    cort_aicha = np.where((aicha > 0) & (aicha <= 172), aicha, 0)
    for lab in (ho, cort_aicha):
        for a in range(3):
            d = np.diff(lab.astype(np.int16), axis=a) != 0
            both = (np.take(lab, range(SHAPE[a] - 1), axis=a) > 0) & (np.take(lab, range(1, SHAPE[a]), axis=a) > 0)
            sl = [slice(None)] * 3
            sl[a] = slice(0, SHAPE[a] - 1)
            bnd[tuple(sl)] |= d & both
    bnd &= depth < 20
    dsulc = ndimage.distance_transform_edt(~bnd).astype(np.float32)
    base = np.where(cerebrum, CEREBRUM, OUT).astype(np.uint8)
    region = np.zeros(SHAPE, np.uint8)
    cortical = cerebrum & (ho > 0)
    base[cortical] = CORTEX_REGION
    region[cortical] = ho[cortical]
    tract = jhu > 0
    lut = np.zeros(256, np.uint8)
    for v, g in JHU_GROUP.items():
        lut[v] = g
    base[tract & (depth > 3)] = lut[jhu[tract & (depth > 3)]]
    region[tract & (depth > 3)] = jhu[tract & (depth > 3)]
    for lo, hi, code in ((174, 180, CAUDATE), (181, 181, PALLIDUM), (182, 183, PUTAMEN), (184, 192, THALAMUS),
                         (159, 160, HIPPO), (173, 173, HIPPO)):
        base[(aicha >= lo) & (aicha <= hi)] = code
    return dict(base=base, region=region, dsulc=dsulc.astype(np.float16), depth=depth.astype(np.float16))


def load_canon():
    if os.path.exists(CACHE):
        z = np.load(CACHE)
        c = {k: z[k] for k in z.files}
    else:
        c = build_canon()
        os.makedirs(os.path.dirname(CACHE), exist_ok=True)
        np.savez_compressed(CACHE, **c)
    index = {"_inside": np.flatnonzero(c["base"].ravel() > 0),
             "_surface": np.flatnonzero(((c["base"] > 0) & (c["depth"] < 8)).ravel())}
    return {**c, **index}


# ---- per-sample geometry -------------------------------------------------------------------------

def random_voxel(rng):
    u = rng.random()
    if u < 0.5:
        return np.array([1.0, 1.0, 1.0])
    if u < 0.7:
        return np.array([1.0, 1.0, rng.uniform(1.2, 2.0)])
    if u < 0.85:
        return np.full(3, rng.uniform(0.6, 1.5))
    return rng.uniform(0.6, 1.5, 3)


def sample_coords(rng, canon, shape, voxel):
    """MNI mm of each sample voxel: centre inside the brain, rotation ±25°, scale 0.85–1.15,
    elastic displacement (smooth, up to ≈ 4 mm)."""
    # 40 %: centred near the surface, so the mask edge (and the volume edge) is often in view.
    near = rng.random() < 0.4
    inside = canon["_surface"] if near else canon["_inside"]
    c = np.array(np.unravel_index(inside[rng.integers(len(inside))], SHAPE), np.float64) + ORIGIN
    c[2] = max(c[2], -40.0)  # keep the cerebrum in view: the procedural cerebellum sits below
    ang = np.deg2rad(rng.uniform(-25, 25, 3))
    rot = np.eye(3)
    for a in range(3):
        ca, sa = np.cos(ang[a]), np.sin(ang[a])
        i, j = [b for b in range(3) if b != a]
        r = np.eye(3)
        r[i, i], r[i, j], r[j, i], r[j, j] = ca, -sa, sa, ca
        rot = rot @ r
    m = rot @ np.diag(rng.uniform(0.85, 1.15, 3))
    grids = [(np.arange(n, dtype=np.float32) - (n - 1) / 2) * v for n, v in zip(shape, voxel)]
    G = np.stack(np.meshgrid(*grids, indexing="ij"), -1)
    P = G @ m.T.astype(np.float32) + c.astype(np.float32)
    amp = rng.uniform(0.0, 4.0)
    coarse = rng.standard_normal((3, 6, 6, 6)).astype(np.float32)
    for a in range(3):
        P[..., a] += amp * ndimage.zoom(coarse[a], [n / 6 for n in shape], order=3)[: shape[0], : shape[1], : shape[2]]
    return P


def lookup(canon, P):
    idx = [np.clip(np.floor(P[..., a] - ORIGIN[a] + 0.5).astype(np.int64), 0, SHAPE[a] - 1) for a in range(3)]
    outside = np.zeros(P.shape[:3], bool)
    for a in range(3):
        outside |= (P[..., a] - ORIGIN[a] < -0.5) | (P[..., a] - ORIGIN[a] > SHAPE[a] - 0.5)
    got = {k: v[idx[0], idx[1], idx[2]] for k, v in canon.items() if not k.startswith("_")}
    got["base"] = np.where(outside, 0, got["base"])
    return got


def ell(P, centre, semi):
    d = (P - np.asarray(centre, np.float32)) / np.asarray(semi, np.float32)
    return np.sqrt((d**2).sum(-1))


def paint_tissue(rng, g, P):
    """Tissue codes from the looked-up canonical maps plus the procedural structures."""
    base, depth, dsulc = g["base"], g["depth"].astype(np.float32), g["dsulc"].astype(np.float32)
    tis = np.zeros(base.shape, np.uint8)
    tis[base > 0] = T["wm"]
    ribbon = rng.uniform(2.0, 3.5)
    csf_w = rng.uniform(0.4, 1.3)
    cortex = (base > 0) & (base <= CORTEX_REGION) & (np.minimum(depth, dsulc) < ribbon)
    tis[cortex] = T["gm"]
    tis[(base > 0) & (dsulc < csf_w) & (depth < rng.uniform(10, 20))] = T["csf"]
    for code, name in ((CAUDATE, "caudate"), (PUTAMEN, "putamen"), (PALLIDUM, "pallidum"), (THALAMUS, "thalamus"),
                       (HIPPO, "hippo"), (TRACT_ASSOC, "t_assoc"), (TRACT_STEM, "t_stem"),
                       (TRACT_CALLOSUM, "t_callosum"), (TRACT_CAPSULE, "t_capsule")):
        tis[base == code] = T[name]
    paint_ventricles(rng, tis, P)
    paint_hindbrain(rng, tis, P)
    return tis


def paint_ventricles(rng, tis, P):
    s = rng.uniform(0.6, 1.8)  # ventricle enlargement (age, atrophy)
    j = lambda: rng.uniform(-2, 2, 3)
    for sx in (-1, 1):
        for c, semi in (((14, -15, 20), (4.5, 26, 6)), ((11, 12, 10), (4.5, 11, 8)), ((24, -40, 10), (5, 12, 7))):
            cc = np.array([sx * c[0], c[1], c[2]], np.float64) + j()
            tis[(ell(P, cc, (semi[0] * s, semi[1], semi[2] * np.sqrt(s))) < 1) & (tis > 0)] = T["csf"]
    tis[(ell(P, (0, -12, 2), (1.2 * s, 14, 9)) < 1) & (tis > 0)] = T["csf"]


def paint_hindbrain(rng, tis, P):
    """Cerebellum with folia, brainstem, and the small iron-rich nuclei (MNI positions as the
    C++ atlas phantom uses them, jittered)."""
    per = rng.uniform(3.0, 5.5)
    for sx in (-1, 1):
        cc = np.array([sx * 24, -62, -36]) + rng.uniform(-3, 3, 3)
        rho = ell(P, cc, (26, 24, 17) * rng.uniform(0.9, 1.1, 3))
        cb = (rho < 1) & (tis == 0)
        f = np.sin(2 * np.pi * rho * 20 / per + 0.6 * (P[..., 1] / 7.0))
        tis[cb] = np.where(rho[cb] < 0.45, T["cb_wm"], np.where(f[cb] > 0.75, T["csf"], T["cb_gm"]))
        tis[ell(P, np.array([sx * 15, -57, -35]) + rng.uniform(-2, 2, 3), (6, 8, 5)) < 1] = T["dentate"]
    # Brainstem: a tube from the midbrain (0, -22, -6) down to the medulla (0, -40, -60).
    a, b = np.array([0, -22, -6], np.float32), np.array([0, -40, -62], np.float32)
    t = np.clip(((P - a) @ (b - a)) / ((b - a) @ (b - a)), 0, 1)
    dist = np.linalg.norm(P - (a + t[..., None] * (b - a)), axis=-1)
    tis[(dist < rng.uniform(8, 11)) & (tis == 0)] = T["stem"]
    for sx in (-1, 1):
        tis[ell(P, np.array([sx * 11, -17, -11]) + rng.uniform(-1.5, 1.5, 3), (4, 8, 3)) < 1] = T["nigra"]
        tis[ell(P, np.array([sx * 5, -20, -8]) + rng.uniform(-1, 1, 3), (3.5, 3.5, 3.5)) < 1] = T["red"]


def paint_vessels(rng, tis, P, voxel):
    """The superior sagittal sinus under the midline surface, and veins as random walks that
    stay inside the brain (radius 0.5–2 mm)."""
    mask = tis > 0
    if rng.random() < 0.7:  # SSS: an arc over the midline, ≈ 4 mm under the convexity
        y = np.linspace(-100, 70, 60)
        z = 18 + 62 * np.sqrt(np.clip(1 - ((y + 15) / 90) ** 2, 0, 1)) - rng.uniform(2, 6)
        pts = np.stack([np.zeros_like(y) + rng.uniform(-2, 2), y, z], -1)
        r = rng.uniform(1.5, 3.0)
        near = np.abs(P[..., 0]) < 8
        if near.any():
            q = P[near]
            d = np.min(np.linalg.norm(q[:, None, :] - pts[None], axis=-1), axis=1)
            sel = np.zeros_like(near)
            sel[near] = d < r
            tis[sel & mask] = T["vein"]
    vox = np.asarray(voxel, np.float32)
    where = np.argwhere(mask)
    if len(where) == 0:
        return
    buf = np.zeros(tis.shape, np.float32)
    for _ in range(rng.integers(0, 9)):
        p = where[rng.integers(len(where))].astype(np.float32)
        d = rng.standard_normal(3).astype(np.float32)
        d /= np.linalg.norm(d)
        radius_mm = rng.uniform(0.5, 2.0)
        for _ in range(rng.integers(4, 25)):
            q = p + 2.5 * d / vox
            synth.paint_segment(buf, p, q, float(radius_mm / vox.mean()), 1.0)
            d = d + 0.3 * rng.standard_normal(3).astype(np.float32)
            d /= np.linalg.norm(d)
            p = q
    tis[(buf > 0) & mask] = T["vein"]


def paint_lesions(rng, tis, voxel):
    mask = tis > 0
    where = np.argwhere(mask & (tis != T["csf"]))
    if len(where) == 0:
        return
    X = np.stack(np.meshgrid(*[np.arange(n, dtype=np.float32) * v for n, v in zip(tis.shape, voxel)],
                             indexing="ij"), -1)
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):  # calcifications, radius 0.7–3 mm
        c = where[rng.integers(len(where))] * np.asarray(voxel)
        tis[(ell(X, c, np.full(3, rng.uniform(0.7, 3.0))) < 1) & mask] = T["calc"]
    if rng.random() < 0.12:  # haemorrhage: an irregular blob, radius 3–12 mm
        c = where[rng.integers(len(where))] * np.asarray(voxel)
        rad = rng.uniform(3, 12)
        irregular = ell(X, c, rad * rng.uniform(0.7, 1.3, 3)) + 0.25 * synth.smooth_noise(rng, tis.shape, 3.0)
        tis[(irregular < 1) & mask] = T["haem"]


# ---- χ, mask, field ------------------------------------------------------------------------------

def draw_chi(rng, tis, region, shape):
    val = np.zeros(32, np.float32)
    for name, code in T.items():
        if name in CHI_RANGE:
            val[code] = rng.uniform(*CHI_RANGE[name])
    wm = val[T["wm"]]
    for name, (lo, hi) in TRACT_OFFSET.items():
        val[T[name]] = wm + rng.uniform(lo, hi)
    chi = val[tis]
    # Per-region jitter: each cortical region and tract its own small offset.
    jit = rng.normal(0, rng.uniform(0.0, 0.008), 256).astype(np.float32)
    jit[0] = 0
    sel = (tis == T["gm"]) | ((tis >= T["t_assoc"]) & (tis <= T["t_capsule"]))
    chi[sel] += jit[region[sel]]
    chi += rng.uniform(0.0, 0.01) * synth.smooth_noise(rng, shape, rng.uniform(1.0, 4.0))
    return synth.gaussian_blur(chi, rng.uniform(0.3, 0.9))  # partial volume


def edit_mask(rng, brain):
    """A background removal's mask: often eroded by 1–3 voxels, sometimes dilated by 1."""
    u = rng.random()
    if u < 0.45:
        return ndimage.binary_erosion(brain, iterations=int(rng.integers(1, 4)))
    if u < 0.6:
        return ndimage.binary_dilation(brain, iterations=1)
    return brain


def residual_background(rng, chi_full, mask, voxel, b0):
    """What an imperfect background removal leaves: a fraction of the field of the sources just
    outside the mask (the removed rim, skull-like sources) plus a low-order polynomial."""
    shape = mask.shape
    rim = ndimage.binary_dilation(mask, iterations=4) & ~mask
    src = np.where(rim, chi_full, 0.0).astype(np.float32)
    src += np.where(rim, rng.uniform(-0.5, 0.5) * (synth.smooth_noise(rng, shape, 2.0) > 1.5), 0.0).astype(np.float32)
    res = rng.uniform(0.05, 0.4) * synth.forward_field(src, voxel, b0)
    X, Y, Z = synth.grid(shape)
    poly = sum(rng.normal(0, 1) * t for t in (X, Y, Z, X * Y, X * Z, Y * Z, X * X - Y * Y, 2 * Z * Z - X * X - Y * Y))
    poly = poly / (np.sqrt((poly[mask] ** 2).mean()) + 1e-9) * rng.uniform(0.0, 0.003)
    return res + poly.astype(np.float32)


# Scales how often a sample gets a residual background (0.5) and noise (0.6): train.py --corrupt-frac.
CORRUPT = 1.0


def make_sample(rng, canon, shape=(64, 64, 64)):
    voxel = random_voxel(rng)
    P = sample_coords(rng, canon, shape, voxel)
    g = lookup(canon, P)
    tis = paint_tissue(rng, g, P)
    brain = ndimage.binary_fill_holes(tis > 0)
    if brain.mean() < 0.15:
        return make_sample(rng, canon, shape)
    tis[brain & (tis == 0)] = T["wm"]
    paint_vessels(rng, tis, P, voxel)
    paint_lesions(rng, tis, voxel)
    chi_full = draw_chi(rng, tis, g["region"], shape) * brain
    mask = edit_mask(rng, brain)
    chi = (chi_full * mask).astype(np.float32)
    b0 = synth.random_b0(rng)
    field = synth.forward_field(chi, voxel, b0)
    if rng.random() < 0.5 * CORRUPT:
        field = field + residual_background(rng, chi_full, mask, voxel, b0)
    if rng.random() < 0.6 * CORRUPT:
        field = field + rng.uniform(0.0005, 0.005) * rng.standard_normal(shape).astype(np.float32)
    m = mask.astype(np.float32)
    field = (field * m).astype(np.float32)
    return synth.Sample(chi, m, field, synth.tkd(field, m, voxel, b0), b0.astype(np.float32),
                        voxel.astype(np.float32))
