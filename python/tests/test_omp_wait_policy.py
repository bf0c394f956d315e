"""Importing qsmcore makes the engine's OpenMP threads wait passively unless the user chose a
policy (python/qsmcore/__init__.py). The oracle is libgomp itself: with OMP_DISPLAY_ENV=verbose it
prints, as it loads, the spin count it took from the environment (0 when passive, 300000 when no
policy is set, 3e10 when active)."""

import os
import subprocess
import sys


def _spin_count_after_import(extra):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update({"OMP_DISPLAY_ENV": "verbose"}, **extra)
    r = subprocess.run([sys.executable, "-c", "import qsmcore"], env=env, capture_output=True, text=True, check=True)
    for line in (r.stdout + r.stderr).splitlines():
        if "GOMP_SPINCOUNT" in line:
            return line.split("'")[1]
    raise AssertionError("libgomp displayed no GOMP_SPINCOUNT:\n" + r.stderr[:400])


def test_engine_waits_passively_by_default():
    assert _spin_count_after_import({}) == "0"


def test_a_policy_the_user_set_is_kept():
    assert _spin_count_after_import({"OMP_WAIT_POLICY": "active"}) == "30000000000"
