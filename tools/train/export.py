"""Exports a qsmcore-invnet checkpoint to ONNX (opset 13, dynamic spatial axes).

  /usr/bin/python3 tools/train/export.py --ckpt build/train/last.pt --out models/qsmcore-invnet.onnx

Prints the file's size and SHA-256: both go into src/models/registry.cpp and
src/models/registry_facts.tsv. Without --ckpt the untrained network is exported (its head starts
at zero, so it returns TKD): enough to measure memory, which depends on the architecture only.
The export is deterministic for a given checkpoint (same torch version), so the hash is
reproducible.
"""
import argparse
import hashlib
import os

import torch

import model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--base", type=int, default=16)
    a = ap.parse_args()
    base = a.base
    state = None
    if a.ckpt:
        st = torch.load(a.ckpt)
        state, base = st["net"], st.get("base", base)
    net = model.InvNet(base)
    if state is not None:
        net.load_state_dict(state)
    net.eval()
    x = torch.zeros(1, 3, 32, 32, 32)
    tmp = a.out + ".tmp"
    spatial = {2: "x", 3: "y", 4: "z"}
    torch.onnx.export(net, x, tmp, opset_version=13, input_names=["input"], output_names=["chi"],
                      dynamic_axes={"input": spatial, "chi": spatial}, do_constant_folding=True)
    os.replace(tmp, a.out)
    data = open(a.out, "rb").read()
    print(f"{a.out}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
