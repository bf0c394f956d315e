"""The twins in registry order (models.md section 1.1), and how to make their example inputs."""
import hashlib
import importlib
import math

import torch

MODULES = ["octave", "qsmnet", "qsmgan", "prox", "ir2qsm", "autoqsm", "iqsm", "nextqsm", "susep",
           "chisepnet", "hdbet", "rs2net", "synthseg", "invnet"]
ORDER = ["bfrnet", "xqsm", "qsmnet", "qsmnet-plus", "qsmgan", "lpcnn", "ir2qsm", "autoqsm", "iqsm", "iqsm-plus",
         "iqfm", "nextqsm", "modl-qsm", "susep-net", "r2primenet", "chi-sepnet", "hd-bet", "rs2-net", "synthseg",
         "synthseg-2.0", "qsmcore-invnet"]


def all_twins():
    found = {}
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        for t in mod.TWINS:
            found[t["id"]] = t
    return [found[i] for i in ORDER if i in found]


def seed_of(*parts):
    return int.from_bytes(hashlib.sha256("/".join(parts).encode()).digest()[:4], "little")


def input_shape(kind, spatial):
    if isinstance(kind, list):
        return list(kind)
    if kind.startswith("cl"):
        return [1, *spatial, int(kind[2:])]
    return [1, int(kind[1:]), *spatial]


def make_inputs(f, spatial, seed):
    """Seeded, plausible inputs: phase in (-pi, pi), binary masks, te 20 ms, b0 3 T, unit z_prjs,
    border = 0 on the outer 1-voxel shell."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for name, kind in f["inputs"]:
        shape = input_shape(kind, spatial)
        if name == "phase":
            t = (torch.rand(shape, generator=g) * 2 - 1) * math.pi
        elif name == "mask":
            t = (torch.rand(shape, generator=g) > 0.2).float()
        elif name == "te":
            t = torch.tensor([0.02])
        elif name == "b0":
            t = torch.tensor([3.0])
        elif name == "z_prjs":
            t = torch.tensor([[[0.1, 0.2, 0.974679]]])
        elif name == "border":
            t = torch.zeros(shape)
            t[:, :, 1:-1, 1:-1, 1:-1] = 1
        else:
            t = torch.randn(shape, generator=g)
        out.append(t.float())
    return out
