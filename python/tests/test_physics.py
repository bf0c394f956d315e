"""qsmcore.physics against NumPy references written from the formulas (physics.md), not from the
engine's code: the dipole kernel, the periodic forward model ifft(D·fft(χ)), TKD, the ROI metrics
and the phantom's phase."""

import numpy as np
import pytest

import qsmcore
from qsmcore import physics as P


def numpy_kernel(shape, voxel, b0_dir):
    # D = 1/3 − (k·b̂)²/|k|², kᵢ = mᵢ/(Nᵢ·Δxᵢ) (numpy.fft.fftfreq), D(0) = 0.
    b = np.asarray(b0_dir, float) / np.linalg.norm(b0_dir)
    k = np.meshgrid(*[np.fft.fftfreq(n, d=v) for n, v in zip(shape, voxel)], indexing="ij")
    k2 = k[0] ** 2 + k[1] ** 2 + k[2] ** 2
    kb = k[0] * b[0] + k[1] * b[1] + k[2] * b[2]
    with np.errstate(invalid="ignore", divide="ignore"):
        d = 1.0 / 3.0 - kb**2 / k2
    d[0, 0, 0] = 0.0
    return d


def close(a, b, rel=1e-12):
    assert a.shape == b.shape and np.isfinite(a).all() and np.isfinite(b).all()
    scale = max(np.abs(b).max(), 1e-300)
    err = np.abs(a - b).max() / scale
    assert err <= rel, err


@pytest.mark.parametrize("shape,voxel,b0", [((8, 10, 12), (1, 1, 1), (0, 0, 1)),
                                           ((9, 11, 7), (0.8, 1.0, 1.5), (0.2, -0.3, 0.9))])
def test_dipole_kernel_is_the_formula(shape, voxel, b0):
    close(P.dipole_kernel(shape, voxel_size=voxel, b0_dir=b0), numpy_kernel(shape, voxel, b0))


def test_forward_model_is_ifft_of_kernel_times_fft():
    rng = np.random.default_rng(4)
    chi = rng.standard_normal((12, 14, 16))
    voxel, b0 = (1.0, 0.9, 1.2), (0.0, 0.0, 1.0)
    want = np.real(np.fft.ifftn(numpy_kernel(chi.shape, voxel, b0) * np.fft.fftn(chi)))
    got = P.forward_field(chi, b0_dir=b0, voxel_size=voxel, variant="corner", padding="none")
    close(got, want, rel=1e-10)
    # Fortran- and C-ordered inputs hold the same (x, y, z) values: same result.
    close(P.forward_field(np.ascontiguousarray(chi), b0, voxel, "corner", "none"), want, rel=1e-10)


def test_tkd_is_thresholded_division():
    rng = np.random.default_rng(5)
    shape, t = (11, 13, 9), 0.19
    mask = (rng.random(shape) > 0.2).astype(float)
    field = rng.standard_normal(shape)
    d = numpy_kernel(shape, (1, 1, 1), (0, 0, 1))
    dt = np.where(np.abs(d) >= t, d, np.where(d < 0, -t, t))
    inv = 1.0 / dt
    inv[0, 0, 0] = 0.0
    want = np.real(np.fft.ifftn(np.fft.fftn(field * mask) * inv)) * mask
    close(P.tkd(field, mask, threshold=t), want, rel=1e-10)


def test_metrics_match_numpy_in_the_roi():
    rng = np.random.default_rng(6)
    ref = rng.standard_normal((10, 10, 10))
    pred = ref + 0.1 * rng.standard_normal(ref.shape)
    roi = np.zeros(ref.shape)
    roi[2:8, 1:9, 3:9] = 1
    m = P.metrics(pred, ref, roi)
    e, r = (pred - ref)[roi != 0], ref[roi != 0]
    assert m["roi_voxels"] == roi.sum()
    assert m["rmse"] == pytest.approx(np.sqrt(np.mean(e**2)), rel=1e-12)
    assert m["nrmse"] == pytest.approx(100 * np.linalg.norm(e) / np.linalg.norm(r), rel=1e-12)
    assert m["mad"] == pytest.approx(np.mean(np.abs(e)), rel=1e-12)
    assert m["cc"] == pytest.approx(np.corrcoef(pred[roi != 0], r)[0, 1], rel=1e-12)
    assert [list(b) for b in m["box"]] == [[2, 1, 3], [8, 9, 9]]  # bounding box of the ROI, half-open
    assert all(np.isfinite(m[k]) for k in ("hfen", "xsim", "gxe"))
    with pytest.raises(qsmcore.InvalidInputError):
        P.metrics(pred, ref, np.zeros(ref.shape))  # empty ROI


def test_phantom_phase_is_the_wrapped_field():
    tes = (0.004, 0.012)
    ph = P.head_phantom(shape=(24, 24, 24), b0=3.0, te=tes, phase_offset=False, background=False, shim=False)
    mask = ph["mask"]
    assert set(np.unique(mask)) == {0.0, 1.0}
    assert np.all(ph["chi"][mask == 0] == 0)
    assert ph["phase"].shape == ph["magnitude"].shape == (24, 24, 24, 2)
    assert np.all(np.abs(ph["phase"]) <= np.pi)
    # 1 mm voxels along the scanner axes, the volume's centre at the origin.
    np.testing.assert_array_equal(ph["affine"][:3, :3], np.eye(3))
    np.testing.assert_array_equal(ph["affine"][:3, 3], [-11.5, -11.5, -11.5])
    for e, te in enumerate(tes):
        # φ = 2π·γ̄·B0·field·TE (field in ppm), wrapped; the difference is compared on the circle.
        want = 2 * np.pi * 42.58e6 * 3.0 * 1e-6 * ph["total_field"] * te
        diff = np.angle(np.exp(1j * (ph["phase"][..., e] - want)))
        assert np.abs(diff[mask != 0]).max() < 1e-9


def test_units_and_b0_direction():
    assert P.hz_per_ppm(3.0) == pytest.approx(127.74, rel=1e-12)
    assert P.wrap_phase(3 * np.pi) == pytest.approx(np.pi)
    c, s = np.cos(0.3), np.sin(0.3)
    aff = np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1]], float)
    np.testing.assert_allclose(P.b0_dir_from_affine(aff), (0, s, c), atol=1e-12)
    with pytest.raises(qsmcore.InvalidInputError, match="kernel"):
        P.dipole_kernel((4, 4, 4), variant="nope")
