"""HD-BET twin (Isensee et al. 2019; nnU-Net v2 port): PlainConvUNet, 6 stages with features
32, 64, 128, 256, 320, 320, two conv(3^3, bias)+InstanceNorm(affine)+LeakyReLU(0.01) per stage,
strided-conv down-sampling (the first conv of each stage; the last one in-plane only, stride
(1,2,2) in (z,y,x)), ConvTranspose up (kernel = stride), Concat skips, 1x1x1 head -> 2 logits.
Layout [1,1,z,y,x]; shapes must be multiples of (16, 32, 32).
"""
import torch
import torch.nn as nn
from common import FULL, file, twin


def _conv(cin, cout, stride):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, stride=stride, padding=1), nn.InstanceNorm3d(cout, affine=True),
                         nn.LeakyReLU(0.01))


class PlainConvUNet(nn.Module):
    def __init__(self, feats, strides, cin=1, classes=2):
        super().__init__()
        self.enc = nn.ModuleList()
        c = cin
        for f, s in zip(feats, strides):
            self.enc.append(nn.Sequential(_conv(c, f, s), _conv(f, f, 1)))
            c = f
        self.up, self.dec = nn.ModuleList(), nn.ModuleList()
        for i in reversed(range(len(feats) - 1)):
            s = strides[i + 1]
            self.up.append(nn.ConvTranspose3d(feats[i + 1], feats[i], s, stride=s))
            self.dec.append(nn.Sequential(_conv(2 * feats[i], feats[i], 1), _conv(feats[i], feats[i], 1)))
        self.head = nn.Conv3d(feats[0], classes, 1)

    def forward(self, x):
        skips = []
        for e in self.enc:
            x = e(x)
            skips.append(x)
        skips.pop()
        for u, d in zip(self.up, self.dec):
            x = d(torch.cat([u(x), skips.pop()], 1))
        return self.head(x)


STRIDES = [1, 2, 2, 2, 2, (1, 2, 2)]


def _build(v):
    feats = [32, 64, 128, 256, 320, 320] if v == FULL else [4, 8, 16, 32, 32, 32]
    return PlainConvUNet(feats, STRIDES)


TWINS = [twin("hd-bet", [file("hd-bet.onnx", _build, [("image", "v1")], ["logits"], 123168028)],
              div=32, published=123168028, test_shapes=[[32, 32, 32], [16, 32, 64]],
              notes="nnU-Net 3d_fullres defaults; spatial multiples of (16,32,32) in (z,y,x); deep supervision off")]
