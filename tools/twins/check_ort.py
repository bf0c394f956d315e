#!/usr/bin/python3
"""Smoke test of the twins: run each generated file in ONNX Runtime (tools/ort/run.js) and in
torch on the manifest's test inputs; require max|diff| <= tol * (output range).

  /usr/bin/python3 tools/twins/check_ort.py DIR [--only id,...] [--tol 1e-4]
Needs onnxruntime-node resolvable by tools/ort/run.js (repo node_modules or NODE_PATH).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
from registry import all_twins, make_inputs, seed_of  # noqa: E402

RUNNER = os.path.join(HERE, "..", "ort", "run.js")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--only")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    man = json.load(open(os.path.join(a.dir, "manifest.json")))
    only = set(a.only.split(",")) if a.only else None
    failures = 0
    for t in all_twins():
        if t["id"] not in man["twins"] or (only and t["id"] not in only):
            continue
        entry = man["twins"][t["id"]]
        for f in t["files"]:
            seed = seed_of(t["id"], f["name"])
            model = common.init_weights(f["build"](man["variant"]), seed).eval()
            for shapes in entry["test_inputs"]:
                names = [n for n, _ in f["inputs"]]
                first = next(k for _, k in f["inputs"] if not isinstance(k, list))
                s = next(v for v in shapes.values() if len(v) == 5)
                spatial = s[1:4] if first.startswith("cl") else s[2:]
                ins = make_inputs(f, spatial, seed + 1)
                with torch.no_grad():
                    ref = model(*ins)
                ref = ref if isinstance(ref, (tuple, list)) else (ref,)
                with tempfile.TemporaryDirectory() as tmp:
                    cmd = ["node", RUNNER, os.path.join(a.dir, f["name"]), "--out", tmp]
                    for n, x in zip(names, ins):
                        p = os.path.join(tmp, f"in_{n}.npy")
                        np.save(p, x.numpy())
                        cmd += ["--in", f"{n}={p}"]
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    if r.returncode:
                        print(f"FAIL {t['id']} {f['name']} {spatial}: runner: {r.stderr.strip()[-400:]}")
                        failures += 1
                        continue
                    info = json.loads(r.stdout)
                    for n, y in zip(f["outputs"], ref):
                        o = np.load(os.path.join(tmp, f"{n}.npy"))
                        y = y.numpy()
                        rng = float(y.max() - y.min()) or 1.0
                        diff = float(np.abs(o - y).max()) if o.shape == y.shape else float("inf")
                        ok = diff <= a.tol * rng
                        failures += not ok
                        print(f"{'ok  ' if ok else 'FAIL'} {t['id']:13s} {f['name']:20s} {n:16s} {str(list(o.shape)):24s} "
                              f"max|d|={diff:.2e} range={rng:.3g} ort={info['median_ms']:.0f}ms")
    print("all ok" if not failures else f"{failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
