"""Synthetic training data for qsmcore-invnet: random head-like χ maps and their local fields.

Nothing here comes from an anatomical template or a public image: every sample is drawn from
shapes (perturbed ellipsoids, blobs, tubes, small spheres) with a seeded generator, then run
through the forward model of physics.md §3 step 1 (qsm-forward: χ·mask on a 2N
grid, D(0) = 1/3). Arrays are indexed [x, y, z] like qsmcore's volumes (x fastest on disk,
B0 components in the same axis order).

What a sample holds (float32, shape (nx, ny, nz)):
  chi    ground-truth χ in ppm, 0 outside the mask
  mask   the brain mask (0/1)
  field  the local field in ppm, masked, with optional Gaussian noise
  tkd    TKD (threshold 0.19, D(0) = 0, unpadded), computed as qsmcore's physics::tkd does
plus the B0 direction and the voxel size it was simulated with.

Only NumPy is needed (no SciPy on the target machines); Gaussian smoothing is done in k-space.
"""
from __future__ import annotations

import dataclasses

import numpy as np

TKD_THRESHOLD = 0.19


@dataclasses.dataclass
class Sample:
    chi: np.ndarray
    mask: np.ndarray
    field: np.ndarray
    tkd: np.ndarray
    b0_dir: np.ndarray
    voxel_mm: np.ndarray


# ---- geometry helpers --------------------------------------------------------------------------

def grid(shape):
    """Normalised voxel-centre coordinates in [-1, 1] per axis, as the head phantom uses."""
    axes = [(np.arange(n, dtype=np.float32) + 0.5) * 2.0 / n - 1.0 for n in shape]
    return np.meshgrid(*axes, indexing="ij")


def smooth_noise(rng, shape, sigma_vox):
    """Zero-mean, unit-std Gaussian-filtered white noise (filtering in k-space, periodic)."""
    w = rng.standard_normal(shape).astype(np.float32)
    k = [np.fft.fftfreq(n).astype(np.float32) for n in shape]
    kx, ky, kz = np.meshgrid(*k, indexing="ij")
    g = np.exp(-2.0 * (np.pi * sigma_vox) ** 2 * (kx**2 + ky**2 + kz**2))
    s = np.real(np.fft.ifftn(np.fft.fftn(w) * g)).astype(np.float32)
    return s / (s.std() + 1e-12)


def gaussian_blur(v, sigma_vox):
    if sigma_vox <= 0:
        return v
    k = [np.fft.fftfreq(n).astype(np.float32) for n in v.shape]
    kx, ky, kz = np.meshgrid(*k, indexing="ij")
    g = np.exp(-2.0 * (np.pi * sigma_vox) ** 2 * (kx**2 + ky**2 + kz**2))
    return np.real(np.fft.ifftn(np.fft.fftn(v) * g)).astype(np.float32)


def random_rotation(rng):
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q *= np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q.astype(np.float32)


def ellipsoid_radius(X, Y, Z, centre, semi, rot=None):
    """Normalised radius (1 on the surface) of a possibly rotated ellipsoid."""
    d = np.stack([X - centre[0], Y - centre[1], Z - centre[2]], axis=-1)
    if rot is not None:
        d = d @ rot
    return np.sqrt((d[..., 0] / semi[0]) ** 2 + (d[..., 1] / semi[1]) ** 2 + (d[..., 2] / semi[2]) ** 2)


# ---- the head: mask and tissue -------------------------------------------------------------------

def head_mask(rng, shape, X, Y, Z):
    """A brain-like mask: an ellipsoid with a bumpy surface, sometimes a cerebellum-like lobe, an
    interhemispheric notch and a flattened base; often larger than the field of view so the
    volume edge crops it (as a partial-coverage acquisition or a training patch does)."""
    crop = rng.random() < 0.35
    scale = rng.uniform(0.95, 1.25) if crop else rng.uniform(0.6, 0.92)
    semi = scale * rng.uniform(0.8, 1.0, 3)
    centre = rng.uniform(-0.12, 0.12, 3) + (rng.uniform(-0.4, 0.4, 3) if crop else 0.0)
    r = ellipsoid_radius(X, Y, Z, centre, semi, random_rotation(rng) if rng.random() < 0.3 else None)
    bump = rng.uniform(0.03, 0.10) * smooth_noise(rng, shape, rng.uniform(3.0, 7.0))
    inside = r < 1.0 + bump
    if rng.random() < 0.6:  # a lobe below and behind (cerebellum-like)
        c2 = centre + np.array([rng.uniform(-0.1, 0.1), -0.55 * semi[1], -0.6 * semi[2]])
        s2 = semi * rng.uniform(0.35, 0.55, 3)
        inside |= ellipsoid_radius(X, Y, Z, c2, s2) < 1.0 + 0.5 * bump
    if rng.random() < 0.5:  # interhemispheric notch from the top
        w = rng.uniform(0.015, 0.04)
        notch = (np.abs(X - centre[0]) < w) & (Z > centre[2] + semi[2] * rng.uniform(0.4, 0.8))
        inside &= ~notch
    if rng.random() < 0.5:  # flattened base
        inside &= Z > centre[2] - semi[2] * rng.uniform(0.6, 0.9)
    return inside.astype(np.float32), centre, semi


def tissue_chi(rng, shape, X, Y, Z, mask, centre, semi):
    """Piecewise-smooth χ (ppm): a cortex-like shell, white-matter-like interior, deep-grey-matter
    blobs, vessels, calcifications and other negative sources, smooth texture; ±0.2 ppm typical."""
    chi = np.full(shape, rng.uniform(-0.005, 0.03), np.float32)  # GM-like base
    r = ellipsoid_radius(X, Y, Z, centre, semi)
    wm_edge = rng.uniform(0.7, 0.88) + 0.05 * smooth_noise(rng, shape, 4.0)
    chi = np.where(r < wm_edge, rng.uniform(-0.05, -0.01), chi).astype(np.float32)
    # Ventricle-like CSF pockets (near 0) and deep grey matter blobs (paramagnetic).
    for _ in range(rng.integers(0, 3)):
        c = centre + rng.uniform(-0.25, 0.25, 3) * semi
        chi[ellipsoid_radius(X, Y, Z, c, rng.uniform(0.04, 0.15, 3), random_rotation(rng)) < 1] = rng.uniform(0.0, 0.03)
    for _ in range(rng.integers(3, 14)):
        c = centre + rng.uniform(-0.6, 0.6, 3) * semi
        s = rng.uniform(0.025, 0.14, 3)
        v = rng.uniform(0.02, 0.22) if rng.random() < 0.85 else rng.uniform(-0.08, -0.02)
        rot = random_rotation(rng)
        chi[ellipsoid_radius(X, Y, Z, c, s, rot) < 1] = v
        if rng.random() < 0.5:  # the mirrored partner, as bilateral nuclei are
            cm = np.array([2 * centre[0] - c[0], c[1], c[2]])
            chi[ellipsoid_radius(X, Y, Z, cm, s, rot) < 1] = v * rng.uniform(0.85, 1.15)
    add_vessels(rng, shape, chi)
    for _ in range(rng.integers(0, 4)):  # calcifications: small strongly diamagnetic spheres
        c = centre + rng.uniform(-0.7, 0.7, 3) * semi
        rad = rng.uniform(0.012, 0.045)
        chi[ellipsoid_radius(X, Y, Z, c, (rad, rad, rad)) < 1] = rng.uniform(-0.6, -0.08)
    chi += rng.uniform(0.0, 0.012) * smooth_noise(rng, shape, rng.uniform(1.5, 5.0))
    chi = gaussian_blur(chi, rng.uniform(0.0, 0.8))  # partial volume
    return chi * mask


def add_vessels(rng, shape, chi):
    """Thin tubes along smooth random paths (veins: strongly paramagnetic)."""
    n = np.array(shape, np.float32)
    for _ in range(rng.integers(1, 8)):
        p = rng.uniform(0.1, 0.9, 3) * n
        d = rng.standard_normal(3)
        d /= np.linalg.norm(d)
        radius = rng.uniform(0.6, 2.5)
        value = rng.uniform(0.08, 0.45)
        length = rng.uniform(0.3, 1.0) * n.max()
        step = 3.0
        for _ in range(int(length / step)):
            q = p + step * d
            paint_segment(chi, p, q, radius, value)
            d = d + 0.25 * rng.standard_normal(3)
            d /= np.linalg.norm(d)
            p = q


def paint_segment(chi, p, q, radius, value):
    """Sets voxels within `radius` of segment pq (voxel units), looking only at its bounding box."""
    lo = np.maximum(np.floor(np.minimum(p, q) - radius - 1).astype(int), 0)
    hi = np.minimum(np.ceil(np.maximum(p, q) + radius + 2).astype(int), chi.shape)
    if np.any(hi <= lo):
        return
    idx = np.stack(np.meshgrid(*[np.arange(a, b, dtype=np.float32) for a, b in zip(lo, hi)], indexing="ij"), -1)
    seg = q - p
    t = np.clip(((idx - p) @ seg) / (seg @ seg), 0.0, 1.0)
    dist = np.linalg.norm(idx - (p + t[..., None] * seg), axis=-1)
    box = chi[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
    box[dist < radius] = value


# ---- physics (physics.md §2–3; qsmcore's src/physics) ---------------------------------

def dipole(shape, voxel_mm, b0_dir, dc):
    """D(k) = 1/3 - (k·b̂)²/|k|² on numpy's fftfreq grid (corner DC), b̂ normalised."""
    b = np.asarray(b0_dir, np.float64)
    b = b / np.linalg.norm(b)
    k = [np.fft.fftfreq(n, d=v) for n, v in zip(shape, voxel_mm)]
    kx, ky, kz = np.meshgrid(*k, indexing="ij")
    k2 = kx**2 + ky**2 + kz**2
    with np.errstate(invalid="ignore", divide="ignore"):
        d = 1.0 / 3.0 - (kx * b[0] + ky * b[1] + kz * b[2]) ** 2 / k2
    d[k2 == 0] = dc
    return d


def forward_field(chi, voxel_mm, b0_dir):
    """qsm-forward: χ padded to 2N with its last-corner value, D(0) = 1/3, cropped back."""
    n = chi.shape
    pad = np.full([2 * s for s in n], chi[-1, -1, -1], np.float64)
    pad[: n[0], : n[1], : n[2]] = chi
    f = np.real(np.fft.ifftn(np.fft.fftn(pad) * dipole(pad.shape, voxel_mm, b0_dir, 1.0 / 3.0)))
    return f[: n[0], : n[1], : n[2]].astype(np.float32)


def tkd(field, mask, voxel_mm, b0_dir, threshold=TKD_THRESHOLD):
    """qsmcore's tkd(): masked field, unpadded, D(0) = 0, |D| < t replaced by sign(D)·t, mean 0."""
    d = dipole(field.shape, voxel_mm, b0_dir, 0.0)
    inv = np.where(np.abs(d) >= threshold, 1.0 / np.where(d == 0, 1.0, d), np.where(d < 0, -1.0, 1.0) / threshold)
    inv.flat[0] = 0.0
    chi = np.real(np.fft.ifftn(np.fft.fftn(field * mask) * inv))
    return (chi * mask).astype(np.float32)


def random_b0(rng):
    if rng.random() < 0.5:
        return np.array([0.0, 0.0, 1.0])
    tilt = np.deg2rad(rng.uniform(5.0, 35.0))
    az = rng.uniform(0, 2 * np.pi)
    return np.array([np.sin(tilt) * np.cos(az), np.sin(tilt) * np.sin(az), np.cos(tilt)])


def random_voxel(rng):
    u = rng.random()
    if u < 0.7:
        return np.array([1.0, 1.0, 1.0])
    if u < 0.85:
        return np.array([1.0, 1.0, rng.uniform(1.2, 2.0)])
    return rng.uniform(0.6, 1.2, 3)


def make_sample(rng, shape=(64, 64, 64), noise=None) -> Sample:
    """One sample. noise: None = drawn (half noise-free, half σ in [0.5, 5] ppb of field)."""
    X, Y, Z = grid(shape)
    mask, centre, semi = head_mask(rng, shape, X, Y, Z)
    if mask.sum() < 0.05 * mask.size:  # too little brain in view: draw again
        return make_sample(rng, shape, noise)
    chi = tissue_chi(rng, shape, X, Y, Z, mask, centre, semi)
    voxel = random_voxel(rng)
    b0 = random_b0(rng)
    field = forward_field(chi, voxel, b0)
    if noise is None:
        noise = 0.0 if rng.random() < 0.5 else rng.uniform(0.0005, 0.005)
    if noise > 0:
        field = field + noise * rng.standard_normal(shape).astype(np.float32)
    field = field * mask
    return Sample(chi.astype(np.float32), mask, field.astype(np.float32), tkd(field, mask, voxel, b0),
                  b0.astype(np.float32), voxel.astype(np.float32))
