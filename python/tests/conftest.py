"""Shared fixtures: where the qsm binary and the generated test data are.

As in the C++ suite, a test whose data (QSM_TWINS_DIR) is missing fails, unless
QSM_ALLOW_MISSING_DATA=1, when it is skipped.
"""

import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _data_dir(var: str) -> pathlib.Path:
    value = os.environ.get(var, "")
    if value and pathlib.Path(value).is_dir():
        return pathlib.Path(value)
    message = f"test data missing: set {var} (tools/test.sh generates it)"
    if os.environ.get("QSM_ALLOW_MISSING_DATA") == "1":
        pytest.skip(message)
    pytest.fail(message)


@pytest.fixture(scope="session")
def twins() -> pathlib.Path:
    return _data_dir("QSM_TWINS_DIR")


@pytest.fixture(scope="session")
def qsm_bin() -> pathlib.Path:
    build = pathlib.Path(os.environ.get("QSM_BUILD_DIR", ROOT / "build"))
    qsm = build / "qsm"
    if not qsm.is_file():
        pytest.fail(f"no qsm binary at {qsm}: build the Release tree (tools/setup.sh)")
    return qsm


@pytest.fixture
def isolated_weights(tmp_path, monkeypatch):
    """No cache or QSM.rs folder of this machine is looked at, and a download fails at once."""
    for var in ("HOME", "XDG_CACHE_HOME", "QSM_MODEL_CACHE"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("QSM_MODEL_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.delenv("QSM_MODEL_DIR", raising=False)
    return tmp_path


def assert_same_bytes(a: np.ndarray, b: np.ndarray) -> None:
    """Equal shape, dtype and bytes, and every value finite (NaN == NaN bytewise must not pass)."""
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    assert np.isfinite(a).all() and np.isfinite(b).all()
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), \
        f"max |diff| {np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))}"
