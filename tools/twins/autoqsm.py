"""AutoQSM twin (Wei et al. 2019): V-Net on the total field, fixed 64^3 patch -> 32^3 centre.
Conv3D + ReLU only (no BatchNorm): residual conv stages, stride-2 conv down, ConvTranspose up,
Concat skips, 1x1x1 head, centre crop 16:48 in the graph.
"""
import torch
import torch.nn as nn
from common import FULL, file, twin, conv_bn_act


def _stage(cin, c, n):
    return nn.Sequential(*[conv_bn_act(cin if i == 0 else c, c, bn=False) for i in range(n)])


class VNet(nn.Module):
    def __init__(self, base, convs=(2, 3, 3, 3)):
        super().__init__()
        w = [base * 2 ** i for i in range(len(convs))]
        self.enc = nn.ModuleList([_stage(1 if i == 0 else w[i], w[i], n) for i, n in enumerate(convs)])
        self.down = nn.ModuleList([nn.Sequential(nn.Conv3d(w[i], w[i + 1], 2, stride=2), nn.ReLU())
                                   for i in range(len(w) - 1)])
        self.up = nn.ModuleList([nn.Sequential(nn.ConvTranspose3d(w[i + 1], w[i], 2, stride=2), nn.ReLU())
                                 for i in reversed(range(len(w) - 1))])
        self.dec = nn.ModuleList([_stage(2 * w[i], w[i], convs[i]) for i in reversed(range(len(w) - 1))])
        self.head = nn.Conv3d(w[0], 1, 1)

    def forward(self, x):
        skips, h = [], x
        for i, e in enumerate(self.enc):
            h = e(h) + (h if i > 0 else 0)
            if i < len(self.down):
                skips.append(h)
                h = self.down[i](h)
        for u, d in zip(self.up, self.dec):
            s = skips.pop()
            r = u(h)
            h = d(torch.cat([r, s], 1)) + r
        return self.head(h)[:, :, 16:48, 16:48, 16:48]


TWINS = [twin("autoqsm", [file("autoqsm.onnx", lambda v: VNet(12 if v == FULL else 4), [("field", "v1")], ["chi"],
                               5609662, dynamic=False)],
              div=1, published=5609662, test_shapes=[[64, 64, 64], [64, 64, 64]], fixed_patch=[64, 64, 64],
              notes="V-Net widths 12..96, stage convs (2,3,3,3) tuned to size; fixed 64^3 -> 32^3 via Slice")]
