"""qsmcore-invnet twin: the architecture of qsmcore's own trained network (tools/train/model.py)
with seeded random weights, like every other twin, so the engine tests (ONNX Runtime parity,
residency, measured memory, every network through `qsm run`) cover it the same way. The trained
file itself ships in models/ and is tested for what it reconstructs (tests/cli).
"""
import os
import sys

from common import FULL, file, twin

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import model  # noqa: E402  (tools/train/model.py)

PUBLISHED = 1366544  # bytes of models/qsmcore-invnet.onnx (the registry's figure)


def _build(v):
    return model.InvNet(16 if v == FULL else 4)


TWINS = [twin("qsmcore-invnet", [file("qsmcore-invnet.onnx", _build, [("input", "v3")], ["chi"], PUBLISHED)],
              div=4, published=PUBLISHED, test_shapes=[[16, 16, 16], [24, 20, 16]],
              notes="tools/train/model.py at base width 4 (reduced) / 16 (full); channels TKD, field, mask")]
