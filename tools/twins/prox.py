"""LPCNN and MoDL-QSM twins: the learned proximal / prior CNNs of two unrolled methods (the FFT
data-consistency steps live in the C++ glue). Conv3d(3^3)+BN+ReLU residual stack: an input conv to
32 channels, 8 residual blocks (conv-BN-ReLU-conv-BN + identity, ReLU), an output conv.
LPCNN: 1 -> 1 channel; MoDL-QSM: 2 -> 2 channels (the STI state). No pooling: any shape runs.
"""
import torch.nn as nn
import torch.nn.functional as F
from common import FULL, conv_bn_act, file, twin


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a, self.b = conv_bn_act(c, c), conv_bn_act(c, c, act=None)

    def forward(self, x):
        return F.relu(x + self.b(self.a(x)))


class ResStack(nn.Module):
    def __init__(self, cin, c, blocks):
        super().__init__()
        self.inp = conv_bn_act(cin, c, bn=False)
        self.blocks = nn.Sequential(*[ResBlock(c) for _ in range(blocks)])
        self.out = nn.Conv3d(c, cin, 3, padding=1)

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))


def _build(cin):
    return lambda v: ResStack(cin, 32 if v == FULL else 4, 8 if v == FULL else 2)


TWINS = [
    twin("lpcnn", [file("lpcnn.onnx", _build(1), [("field", "v1")], ["chi"], 1790869)],
         div=8, published=1790869, test_shapes=[[16, 16, 16], [16, 24, 32]],
         notes="graph input named 'field' (normalised proximal input, [1,1,...]); 32 ch x 8 res blocks chosen to match size"),
    twin("modl-qsm", [file("modl-qsm.onnx", _build(2), [("field", "v2")], ["chi"], 1794143)],
         div=1, published=1794143, test_shapes=[[16, 16, 16], [16, 20, 24]],
         notes="graph input 'field' [1,2,...] (2-channel STI state), output 'chi' [1,2,...]; 32 ch x 8 res blocks"),
]
