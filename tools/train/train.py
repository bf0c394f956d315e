"""Trains qsmcore-invnet on synthetic data only (tools/train/synth.py), CPU, fixed seed, resumable.

  /usr/bin/python3 tools/train/train.py --out build/train            # train (resumes if a checkpoint exists)
  /usr/bin/python3 tools/train/export.py --ckpt build/train/last.pt --out models/qsmcore-invnet.onnx

Each iteration takes a batch of random 40³ crops (random flips and an x↔y transpose, all of which
keep the physics consistent: the dipole kernel depends on (k·b̂)², and the network is not told b̂)
from a pool of 64³ samples; a few pool entries are replaced with new samples every
`--refresh-every` iterations (160 + 4 per 25 iterations: ≈ 380 distinct heads over 1400). Loss: squared NRMSE inside
the mask (what QSM-CI scores) plus half the same for the spatial gradient (edges; HFEN/XSIM).
Every `--eval-every` iterations the net and TKD are scored on held-out samples of another seed;
the log is a TSV with the CPU time so far, so a resumed run reports the total.

Issue 53 (brain-like data; the defaults above reproduce the shipped network unchanged):
  nice -n 10 /usr/bin/python3 tools/train/train.py --out build/train-anatomy --data mix \
      --init-onnx models/qsmcore-invnet.onnx --threads 1 --log tools/train/train_log_anatomy.tsv
`--data mix` draws each crop from the synth_anatomy.py pool (atlas-based, never Colin27) with
probability `--anatomy-frac`, else from the synth.py pool; validation adds 6 anatomy samples of
another seed (columns heldout_anat_*). `--init-onnx` starts from the weights in an exported file
(fine-tuning the shipped network); a checkpoint, when present, takes precedence.
`--prior tv` feeds TV-ADMM's χ in channel 0 instead of TKD's (prior.py; an experiment of issue 53,
the model card's "A TV prior"); `--reset-head` zeroes the output layer after `--init-onnx`.
"""
import argparse
import os
import resource
import time

import numpy as np
import torch

import model
import prior
import synth
import synth_anatomy

CROP = 40


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


PRIOR = "tkd"  # --prior: what channel 0 holds (prior.py)


def sample_tensors(s):
    x = np.stack([prior.estimate(s, PRIOR), s.field, s.mask])
    y = np.stack([s.chi, s.mask])
    return torch.from_numpy(x), torch.from_numpy(y)


def random_crop(rng, x, y):
    n = x.shape[1:]
    o = [rng.integers(0, n[a] - CROP + 1) for a in range(3)]
    sl = (slice(None), slice(o[0], o[0] + CROP), slice(o[1], o[1] + CROP), slice(o[2], o[2] + CROP))
    x, y = x[sl], y[sl]
    for axis in (1, 2, 3):
        if rng.random() < 0.5:
            x, y = x.flip(axis), y.flip(axis)
    if rng.random() < 0.5:
        x, y = x.transpose(1, 2), y.transpose(1, 2)
    return x, y


def batch(rng, pool, size):
    xs, ys = [], []
    while len(xs) < size:
        x, y = random_crop(rng, *pool[rng.integers(len(pool))])
        if y[1].mean() < 0.15:  # mostly outside the brain: little to learn from
            continue
        xs.append(x)
        ys.append(y)
    return torch.stack(xs).contiguous(), torch.stack(ys).contiguous()


def grad(v):
    return [v.diff(dim=d) for d in (2, 3, 4)]


def loss_fn(pred, y):
    chi, mask = y[:, 0:1], y[:, 1:2]
    e = (pred - chi) * mask
    nrmse2 = (e**2).sum() / ((chi * mask) ** 2).sum().clamp_min(1e-12)
    ge, gc = grad(e), grad(chi * mask)
    g2 = sum((g**2).sum() for g in ge) / sum((g**2).sum() for g in gc).clamp_min(1e-12)
    return nrmse2 + 0.5 * g2


def slope_penalty(pred, y):
    """Mean over the batch of (1 − s)², s the slope of the prediction on the truth in the mask,
    both demeaned there (what evaluate.py reports): squared error alone is minimised by shrinking
    whatever the net cannot tell from noise, and the held-out heads pay for it in contrast."""
    chi, mask = y[:, 0:1], y[:, 1:2]
    n = mask.sum(dim=(1, 2, 3, 4)).clamp_min(1.0)

    def centred(v):
        mean = (v * mask).sum(dim=(1, 2, 3, 4)) / n
        return (v - mean.view(-1, 1, 1, 1, 1)) * mask

    p, t = centred(pred), centred(chi)
    s = (p * t).sum(dim=(1, 2, 3, 4)) / (t * t).sum(dim=(1, 2, 3, 4)).clamp_min(1e-12)
    return ((1.0 - s) ** 2).mean()


def nrmse(pred, chi, mask):
    m = mask > 0
    return 100.0 * float(np.linalg.norm((pred - chi)[m]) / np.linalg.norm(chi[m]))


def init_from_onnx(net, path):
    """Copies the initializers of an export.py file (named like the state dict) into `net`."""
    import onnx
    from onnx import numpy_helper

    st = net.state_dict()
    got = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
    missing = [k for k in st if k not in got]
    if missing:
        raise SystemExit(f"{path}: no weights for {missing[:3]}… (another architecture?)")
    net.load_state_dict({k: torch.from_numpy(got[k].copy()) for k in st})


def evaluate(net, heldout):
    """heldout: (sample, its input tensor) pairs, the inputs made once (a TV prior takes 0.3 s each)."""
    net.eval()
    out = []
    with torch.no_grad():
        for s, x in heldout:
            p = net(x[None])[0, 0].numpy() * s.mask
            out.append((nrmse(p, s.chi, s.mask), nrmse(x[0].numpy(), s.chi, s.mask)))
    net.train()
    return np.mean([o[0] for o in out]), np.mean([o[1] for o in out])


def make_pool(seed, n):
    rng = np.random.default_rng(seed)
    return rng, [sample_tensors(synth.make_sample(rng)) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=1400, help="length of the learning-rate schedule")
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop (with a checkpoint) after this many iterations; 0 = --iters")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--base", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--pool", type=int, default=160)
    ap.add_argument("--refresh-every", type=int, default=25)
    ap.add_argument("--refresh", type=int, default=4)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--data", choices=("synth", "mix"), default="synth")
    ap.add_argument("--anatomy-frac", type=float, default=0.7)
    ap.add_argument("--prior", choices=prior.KINDS, default="tkd",
                    help="the estimate channel 0 holds (prior.py; tkd: the shipped network)")
    ap.add_argument("--init-onnx", help="start from the weights of this exported file")
    ap.add_argument("--corrupt-frac", type=float, default=1.0,
                    help="scales how often an anatomy sample gets a residual background and noise (synth_anatomy.py)")
    ap.add_argument("--reset-head", action="store_true",
                    help="with --init-onnx: zero the output layer, so training starts from the prior itself")
    ap.add_argument("--slope-weight", type=float, default=0.0,
                    help="add this × slope_penalty to the loss (0: squared error and gradients only)")
    ap.add_argument("--log", help="log TSV (default OUT/train_log.tsv)")
    ap.add_argument("--stop-at", help="UTC time HH:MM: stop there with a checkpoint (resume later)")
    a = ap.parse_args()
    global PRIOR
    PRIOR = a.prior
    synth_anatomy.CORRUPT = a.corrupt_frac
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    net = model.InvNet(a.base)
    opt = torch.optim.Adam(net.parameters(), a.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, a.lr, total_steps=a.iters, pct_start=0.05)
    ckpt = os.path.join(a.out, "last.pt")
    log_path = a.log or os.path.join(a.out, "train_log.tsv")
    start, cpu_before = 0, 0.0
    # The pool is rebuilt from the seed on resume (a checkpoint stays small); the RNG states that
    # drive crops and refreshes are restored, so a resumed run continues the same sequence of
    # random draws only approximately (the pool's later refreshes differ): said in the model card.
    data_rng, pool = make_pool(a.seed, a.pool)
    crop_rng = np.random.default_rng(a.seed + 1)
    heldout_rng = np.random.default_rng(a.seed + 1000)
    heldout = [synth.make_sample(heldout_rng) for _ in range(6)]
    heldout = [(s, sample_tensors(s)[0]) for s in heldout]
    mix = a.data == "mix"
    if mix:  # separate generators, so the synth stream is the one the default run draws
        canon = synth_anatomy.load_canon()
        anat_rng = np.random.default_rng(a.seed + 2)
        n_anat = int(round(a.pool * a.anatomy_frac))
        anat_pool = [sample_tensors(synth_anatomy.make_sample(anat_rng, canon)) for _ in range(n_anat)]
        val_rng = np.random.default_rng(a.seed + 2000)
        heldout_anat = [synth_anatomy.make_sample(val_rng, canon) for _ in range(6)]
        heldout_anat = [(s, sample_tensors(s)[0]) for s in heldout_anat]
    if os.path.exists(ckpt):
        st = torch.load(ckpt)
        net.load_state_dict(st["net"])
        opt.load_state_dict(st["opt"])
        sched.load_state_dict(st["sched"])
        start, cpu_before = st["iter"], st["cpu"]
        crop_rng.bit_generator.state = st["crop_rng"]
        data_rng.bit_generator.state = st["data_rng"]
        if mix and "anat_rng" in st:
            anat_rng.bit_generator.state = st["anat_rng"]
        print(f"resumed at iteration {start}, {cpu_before:.0f} CPU s so far", flush=True)
    else:
        if a.init_onnx:
            init_from_onnx(net, a.init_onnx)
            if a.reset_head:  # keep the features, start from the prior itself (a new prior's errors differ)
                torch.nn.init.zeros_(net.head.weight)
                torch.nn.init.zeros_(net.head.bias)
        with open(log_path, "w") as f:
            f.write(f"iter\tloss\tlr\twall_s\tcpu_s_total\theldout_nrmse_net\theldout_nrmse_{a.prior}"
                    + (f"\theldout_anat_net\theldout_anat_{a.prior}" if mix else "") + "\n")
    t0, cpu0 = time.time(), cpu_seconds()
    running = None
    stop = min(a.iters, a.stop_after) if a.stop_after > 0 else a.iters
    deadline = None
    if a.stop_at:
        import datetime as dt

        now = dt.datetime.now(dt.timezone.utc)
        hh, mm = (int(v) for v in a.stop_at.split(":"))
        deadline = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
        if deadline <= now:
            deadline += dt.timedelta(days=1)
        deadline = deadline.timestamp()
    for it in range(start, stop):
        if deadline is not None and time.time() >= deadline:
            stop = it  # checkpoint what we have and leave
            break
        if mix and crop_rng.random() < a.anatomy_frac:
            x, y = batch(crop_rng, anat_pool, a.batch)
        else:
            x, y = batch(crop_rng, pool, a.batch)
        pred = net(x)
        loss = loss_fn(pred, y)
        if a.slope_weight > 0:
            loss = loss + a.slope_weight * slope_penalty(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
        done = it + 1
        if done % a.refresh_every == 0:
            for _ in range(a.refresh):
                pool[data_rng.integers(len(pool))] = sample_tensors(synth.make_sample(data_rng))
                if mix:
                    anat_pool[anat_rng.integers(len(anat_pool))] = sample_tensors(
                        synth_anatomy.make_sample(anat_rng, canon))
        ev = ("", "") + (("", "") if mix else ())
        if done % a.eval_every == 0 or done == stop:
            n, t = evaluate(net, heldout)
            ev = (f"{n:.2f}", f"{t:.2f}")
            if mix:
                n, t = evaluate(net, heldout_anat)
                ev += (f"{n:.2f}", f"{t:.2f}")
        cpu_total = cpu_before + cpu_seconds() - cpu0
        if done % 10 == 0 or ev[0]:
            with open(log_path, "a") as f:
                f.write(f"{done}\t{running:.5f}\t{sched.get_last_lr()[0]:.2e}\t{time.time() - t0:.0f}\t"
                        f"{cpu_total:.0f}\t" + "\t".join(ev) + "\n")
            print(f"iter {done} loss {running:.4f} cpu {cpu_total:.0f}s {ev}", flush=True)
        if done % a.ckpt_every == 0 or done == stop or (deadline is not None and time.time() >= deadline):
            st = {"net": net.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "iter": done,
                  "cpu": cpu_total, "crop_rng": crop_rng.bit_generator.state,
                  "data_rng": data_rng.bit_generator.state, "base": a.base}
            if mix:
                st["anat_rng"] = anat_rng.bit_generator.state
            torch.save(st, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)


if __name__ == "__main__":
    main()
