"""xQSM and BFRnet twins: 3-D octave-convolution U-Nets (high/low-frequency groups, alpha 0.5).

xQSM (Gao et al. 2021): 2 poolings, 64 initial channels, global learned residual (+input).
BFRnet (Sun group, MATLAB export): same octave blocks (2 max-pools + the octave half-resolution
branch = 3 levels, /8), no residual; the output is
the background field. Widths tuned so parameter bytes match the published files.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import FULL, file, twin, conv_bn_act


def _cbn(cin, cout, k=3):
    return conv_bn_act(cin, cout, k, act=None)


class OctConv(nn.Module):
    """mode 'first': H in -> (H,L); 'mid': (H,L) -> (H,L); 'last': (H,L) -> H then 1x1 head."""

    def __init__(self, cin, cout, mode="mid"):
        super().__init__()
        self.mode = mode
        ih = cin if mode == "first" else cin // 2
        il = cin - ih
        oh = cout if mode == "last" else cout // 2
        ol = cout - oh
        self.hh = _cbn(ih, oh)
        if mode != "last":
            self.hl = _cbn(ih, ol)
        if mode != "first":
            self.lh = nn.Conv3d(il, oh, 3, padding=1)
            self.lh_up = nn.ConvTranspose3d(oh, oh, 2, stride=2)
            self.lh_bn = nn.BatchNorm3d(oh)
        if mode == "mid":
            self.ll = _cbn(il, ol)
        if mode == "last":
            self.head = nn.Conv3d(oh, 1, 1)

    def forward(self, xh, xl=None):
        yh = self.hh(xh)
        if self.mode != "first":
            yh = yh + self.lh_bn(self.lh_up(self.lh(xl)))
        yh = F.relu(yh)
        if self.mode == "last":
            return self.head(yh)
        yl = self.hl(F.avg_pool3d(xh, 2))
        if self.mode == "mid":
            yl = yl + self.ll(xl)
        return yh, F.relu(yl)


class OctUp(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, l = c // 2, c - c // 2
        self.hh = nn.ConvTranspose3d(h, h, 2, stride=2)
        self.lh = nn.ConvTranspose3d(l, h, 4, stride=4)
        self.ll = nn.ConvTranspose3d(l, l, 2, stride=2)
        self.hl = nn.Conv3d(h, l, 3, padding=1)
        self.bn_h, self.bn_l = nn.BatchNorm3d(h), nn.BatchNorm3d(l)

    def forward(self, xh, xl):
        yh = F.relu(self.bn_h(self.hh(xh) + self.lh(xl)))
        yl = F.relu(self.bn_l(self.ll(xl) + self.hl(xh)))
        return yh, yl


class OctUNet(nn.Module):
    def __init__(self, depth, base, residual):
        super().__init__()
        self.residual = residual
        self.inp = nn.ModuleList([OctConv(1, base, "first"), OctConv(base, base)])
        self.enc = nn.ModuleList()
        c = base
        for i in range(depth):
            w = base * 2 ** i
            self.enc.append(nn.ModuleList([OctConv(c, w), OctConv(w, w)]))
            c = w
        self.mid = nn.ModuleList([OctConv(c, 2 * c), OctConv(2 * c, c)])
        self.ups, self.dec = nn.ModuleList(), nn.ModuleList()
        for i in reversed(range(depth)):
            w = base * 2 ** i
            out = w if i == 0 else w // 2
            self.ups.append(OctUp(w))
            self.dec.append(nn.ModuleList([OctConv(2 * w, w), OctConv(w, out)]))
        self.last = OctConv(base, base, "last")

    def forward(self, x):
        h, l = self.inp[1](*self.inp[0](x))
        skips = []
        for a, b in self.enc:
            h, l = b(*a(h, l))
            skips.append((h, l))
            h, l = F.max_pool3d(h, 2), F.max_pool3d(l, 2)
        for blk in self.mid:
            h, l = blk(h, l)
        for up, (a, b) in zip(self.ups, self.dec):
            h, l = up(h, l)
            sh, sl = skips.pop()
            h, l = b(*a(torch.cat([h, sh], 1), torch.cat([l, sl], 1)))
        y = self.last(h, l)
        return y + x if self.residual else y


def _build(depth, full_base, residual):
    return lambda v: OctUNet(depth, full_base if v == FULL else 4, residual)


TWINS = [
    twin("bfrnet", [file("bfrnet.onnx", _build(2, 126, False), [("field", "v1")], ["local_field"], 79600612)],
         div=8, published=79600612, test_shapes=[[16, 16, 16], [16, 24, 32]],
         notes="octave U-Net like xQSM: 2 max-pools + the octave low-frequency branch (3 resolution levels, /8), 126 initial channels tuned to size (MATLAB original widths not public); "
               "output is the background field, named local_field per registry"),
    twin("xqsm", [file("xqsm.onnx", _build(2, 64, True), [("field", "v1")], ["chi"], 20901826)],
         div=8, published=20901826, test_shapes=[[16, 16, 16], [16, 24, 32]],
         notes="xQSM(EncodingDepth=2), 64 initial channels as upstream; AveragePool+ConvTranspose octave paths"),
]
