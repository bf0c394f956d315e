#!/usr/bin/python3
"""Write a seeded random float32 .npy (C order) for tests and benchmarks.

  /usr/bin/python3 tools/testnets/make_inputs.py OUT.npy 1 1 64 64 64 [--seed 0] [--dist normal|uniform|mask]
"""
import argparse

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("shape", type=int, nargs="+")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dist", choices=["normal", "uniform", "mask"], default="normal")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    if a.dist == "normal":
        x = rng.standard_normal(a.shape, dtype=np.float32)
    elif a.dist == "uniform":
        x = rng.random(a.shape, dtype=np.float32)
    else:
        x = (rng.random(a.shape) > 0.2).astype(np.float32)
    np.save(a.out, np.ascontiguousarray(x))


if __name__ == "__main__":
    main()
