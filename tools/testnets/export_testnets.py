#!/usr/bin/python3
"""Export the engine's two synthetic test networks (deterministic, seeded).

  /usr/bin/python3 tools/testnets/export_testnets.py --out DIR [--base 16] [--seed 1]
writes DIR/unet3d_b<base>.onnx  3-D U-Net: depth 4, widths base..16*base, Conv3d+BN+ReLU x2 per level,
                                MaxPool, ConvTranspose k2 s2, Concat skips, 1x1x1 head, + input
       DIR/hdbet_like_b<base>.onnx  strided-conv down-sampling, InstanceNorm, LeakyReLU, ConvTranspose,
                                Concat (PlainConvUNet-style, 4 down-samplings)
Both: input "input" [1,1,D,H,W] -> output "output", dynamic spatial axes (multiples of 16).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "twins"))
import common  # noqa: E402
from hdbet import PlainConvUNet  # noqa: E402


def unet3d(base):
    return common.UNet(1, 1, common.widths(base, 4), residual=True)


def hdbet_like(base):
    return PlainConvUNet([base, 2 * base, 4 * base, 8 * base, 8 * base], [1, 2, 2, 2, 2], classes=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--base", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    info = {}
    for name, build in (("unet3d", unet3d), ("hdbet_like", hdbet_like)):
        model = common.init_weights(build(a.base), a.seed)
        path = os.path.join(a.out, f"{name}_b{a.base}.onnx")
        common.export(model, [common.torch.ones(1, 1, 32, 32, 32)], path, ["input"], ["output"])
        d = common.describe(path)
        info[os.path.basename(path)] = {k: d[k] for k in ("bytes", "sha256", "params", "ops", "inputs", "outputs")}
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
