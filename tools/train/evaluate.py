"""Scores qsmcore-invnet against TKD (best threshold, chosen with the truth) and TV-ADMM on the
held-out heads of heldout.py, and optionally on the demo's ellipsoid head (issue 53).

  PYTHONPATH=build/python /usr/bin/python3 tools/train/evaluate.py --heads build/heldout \\
      [--onnx scratch.onnx] [--methods net tkd tv] [--demo] [--json out.json]

The network runs through the real path, `build/qsm run qsmcore-invnet` (its wrapper computes the
TKD input with b̂ and pads); --onnx runs another weights file through the same recipe
(QSM_MODEL_DIR_QSMCORE_INVNET + --no-verify). --ckpt runs a training checkpoint in PyTorch instead,
fed the --prior its training used (prior.py; the TV-ADMM prior volume is cached beside each head),
padded centred to multiples of 4 as the wrapper pads: for priors the C++ wrapper does not compute.
TKD is qsmcore.physics.tkd swept over thresholds 0.05…0.40 (step 0.025), the best by demeaned
NRMSE against the truth (a real scan cannot do this).
TV-ADMM is qsmcore.invert_dipole(method="tv") with its defaults. TKD and TV results are cached
beside each head (they do not depend on the network).

Metrics, all inside the brain mask: NRMSE % demeaned (100·‖(p − p̄) − (t − t̄)‖/‖t − t̄‖, means
over the mask: QSM-CI's current scorer, methods.md §8); XSIM and HFEN (qsmcore.physics.metrics,
QSM-CI's definitions) of the prediction shifted to the truth's mean in the mask (no method
knows D(0)); the slope of a least-squares fit of p − p̄ on t − t̄ (1 = contrast kept); and, in the
JSON only, nrmse_raw (not demeaned, as the model card's older rows are).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import nibabel as nib
import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
import qsmcore  # noqa: E402
from qsmcore import physics  # noqa: E402

THRESHOLDS = np.round(np.arange(0.05, 0.4001, 0.025), 3)


def scores(pred, truth, mask):
    m = mask > 0
    p = pred - pred[m].mean()
    t = truth - truth[m].mean()
    nrmse = 100.0 * np.linalg.norm(p[m] - t[m]) / np.linalg.norm(t[m])
    slope = float((p[m] * t[m]).sum() / (t[m] ** 2).sum())
    shifted = np.where(m, p + truth[m].mean(), 0.0)
    q = physics.metrics(shifted.astype(np.float64), np.where(m, truth, 0.0).astype(np.float64), m.astype(np.float64))
    raw = 100.0 * np.linalg.norm(pred[m] - truth[m]) / np.linalg.norm(truth[m])  # not demeaned (the card's)
    return dict(nrmse=float(nrmse), xsim=float(q["xsim"]), hfen=float(q["hfen"]), slope=slope, cc=float(q["cc"]),
                nrmse_raw=float(raw))


def run_net(head, meta, onnx, threads):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "chi.nii.gz")
        cmd = [os.path.join(ROOT, "build", "qsm"), "run", "qsmcore-invnet", "--in", os.path.join(head, "field.nii.gz"),
               "--mask", os.path.join(head, "mask.nii.gz"), "--out", out, "--quiet", "--threads", str(threads),
               "--b0-dir", ",".join(f"{v:.9f}" for v in meta["b0_dir"])]
        env = dict(os.environ)
        if onnx:
            d = os.path.join(tmp, "model")
            os.makedirs(d)
            os.symlink(os.path.abspath(onnx), os.path.join(d, "qsmcore-invnet.onnx"))
            env["QSM_MODEL_DIR_QSMCORE_INVNET"] = d
            cmd.append("--no-verify")
        subprocess.run(cmd, check=True, env=env)
        return np.asarray(nib.load(out).dataobj, dtype=np.float64)


def run_ckpt(head, meta, field, mask, ckpt, kind, threads):
    import torch

    import model
    import prior

    if kind == "tv":
        path = os.path.join(head, "tv_chi.npy")
        if not os.path.exists(path):
            np.save(path, prior.tv(field, mask, meta["voxel_mm"], meta["b0_dir"], threads))
        est = np.load(path)
    else:
        est = physics.tkd(field, mask, meta["b0_dir"], meta["voxel_mm"], 0.19).astype(np.float32) * mask
    st = torch.load(ckpt)
    net = model.InvNet(st.get("base", 16))
    net.load_state_dict(st["net"])
    net.eval()
    torch.set_num_threads(threads)
    x = np.stack([est, field * mask, mask]).astype(np.float32)
    n = np.array(x.shape[1:])
    p = -(-n // 4) * 4
    lo = (p - n) // 2
    xp = np.zeros((3, *p), np.float32)
    xp[:, lo[0]:lo[0] + n[0], lo[1]:lo[1] + n[1], lo[2]:lo[2] + n[2]] = x
    with torch.no_grad():
        y = net(torch.from_numpy(xp)[None])[0, 0].numpy()
    return y[lo[0]:lo[0] + n[0], lo[1]:lo[1] + n[1], lo[2]:lo[2] + n[2]].astype(np.float64) * mask


def tkd_best(field, truth, mask, meta):
    best = None
    for t in THRESHOLDS:
        chi = physics.tkd(field, mask, meta["b0_dir"], meta["voxel_mm"], float(t))
        s = scores(chi, truth, mask)
        if best is None or s["nrmse"] < best[1]["nrmse"]:
            best = (float(t), s)
    s = dict(best[1])
    s["threshold"] = best[0]
    return s


def cached(path, fn):
    if os.path.exists(path):
        return json.load(open(path))
    r = fn()
    json.dump(r, open(path, "w"))
    return r


def load_head(head):
    meta = json.load(open(os.path.join(head, "meta.json")))
    get = lambda n: np.asarray(nib.load(os.path.join(head, n + ".nii.gz")).dataobj, dtype=np.float64)
    return meta, get("chi"), get("field"), get("mask")


def demo_head(out_dir):
    """The demo's ellipsoid head at 128³ (qsm demo part 2): its local field, mask and χ."""
    d = os.path.join(out_dir, "demo128")
    if not os.path.exists(os.path.join(d, "meta.json")):
        os.makedirs(d, exist_ok=True)
        ph = physics.head_phantom((128, 128, 128))
        aff = np.asarray(ph["affine"])
        for n, arr in (("chi", ph["chi"]), ("field", ph["local_field"]), ("mask", ph["mask"])):
            nib.save(nib.Nifti1Image(np.asarray(arr, np.float32), aff), os.path.join(d, n + ".nii.gz"))
        json.dump(dict(variant="demo", seed=0, voxel_mm=[1.0, 1.0, 1.0], b0_dir=[0.0, 0.0, 1.0]),
                  open(os.path.join(d, "meta.json"), "w"))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", default=os.path.join(ROOT, "build", "heldout"))
    ap.add_argument("--only", nargs="*", help="head folder names (default: all)")
    ap.add_argument("--onnx", help="weights to run instead of the shipped file")
    ap.add_argument("--ckpt", help="a training checkpoint (last.pt) run in PyTorch instead of build/qsm")
    ap.add_argument("--prior", default="tkd", help="with --ckpt: the prior it was trained on (prior.py)")
    ap.add_argument("--label", default="qsmcore-invnet")
    ap.add_argument("--methods", nargs="+", default=["net", "tkd", "tv"])
    ap.add_argument("--demo", action="store_true", help="also the demo's ellipsoid head at 128³")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()
    names = a.only or sorted(n for n in os.listdir(a.heads) if os.path.exists(os.path.join(a.heads, n, "meta.json"))
                             and n != "demo128")
    heads = [os.path.join(a.heads, n) for n in names]
    if a.demo:
        heads.append(demo_head(a.heads))
    rows = []
    for head in heads:
        meta, truth, field, mask = load_head(head)
        row = dict(head=os.path.basename(head))
        if "net" in a.methods:
            t0 = time.time()
            chi = (run_ckpt(head, meta, field, mask, a.ckpt, a.prior, a.threads) if a.ckpt
                   else run_net(head, meta, a.onnx, a.threads))
            row["net"] = scores(chi, truth, mask)
            row["net"]["seconds"] = round(time.time() - t0, 1)
        if "tkd" in a.methods:
            row["tkd"] = cached(os.path.join(head, "tkd_best.json"), lambda: tkd_best(field, truth, mask, meta))
        if "tv" in a.methods:
            def tv():
                t0 = time.time()
                r = qsmcore.invert_dipole(field, mask, method="tv", voxel_size=meta["voxel_mm"], b0_dir=meta["b0_dir"],
                                          threads=a.threads)
                s = scores(np.asarray(r["chi"]), truth, mask)
                s["seconds"] = round(time.time() - t0, 1)
                return s
            row["tv"] = cached(os.path.join(head, "tv.json"), tv)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print_table(rows, a.label)
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


def print_table(rows, label):
    cols = [("net", label), ("tkd", "TKD best t"), ("tv", "TV-ADMM")]
    cols = [c for c in cols if any(c[0] in r for r in rows)]
    head = "| head | " + " | ".join(f"{n} NRMSE % / XSIM / HFEN / slope" for _, n in cols) + " |"
    print(head)
    print("|---" * (len(cols) + 1) + "|")
    means = {k: [] for k, _ in cols}
    for r in rows:
        cells = []
        for k, _ in cols:
            s = r.get(k)
            if s is None:
                cells.append("—")
                continue
            extra = f" (t = {s['threshold']})" if "threshold" in s else ""
            cells.append(f"{s['nrmse']:.1f} / {s['xsim']:.3f} / {s['hfen']:.3f} / {s['slope']:.2f}{extra}")
            if r["head"] != "demo128":
                means[k].append([s["nrmse"], s["xsim"], s["hfen"], s["slope"]])
        print(f"| {r['head']} | " + " | ".join(cells) + " |")
    cells = []
    for k, _ in cols:
        m = np.mean(means[k], axis=0) if means[k] else None
        cells.append("—" if m is None else f"{m[0]:.1f} / {m[1]:.3f} / {m[2]:.3f} / {m[3]:.2f}")
    print("| mean over held-out heads | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
