"""iQSM, iQFM (Gao et al. 2022) and iQSM+ (Gao et al. 2024) twins: LoT-Unet.

LoT layer (fused in the graph): cos/sin of the wrapped phase, a fixed-size learnable 3^3 Laplacian
(1 kernel) and 15 learnable 3^3 kernels, each conv multiplied by the `border` input (the in-place
boundary zeroing rewritten as Mul, as the published export does), b = a_i cos - a_r sin, masked,
scaled by 0.06/(B0 TE). A 4-pool U-Net (16..256, conv+BN+ReLU) on the 16 channels, +b residual, /4.
iQSM+ adds orientation awareness: z_prjs [1,1,3] -> Linear-GELU-Linear (5) embedding; an OA-LFE
layer (the direction-dependent kernel written as static kernels weighted by the embedding and
applied to the channel sum) and per-conv FiLM (Linear-SiLU-Linear -> scale/shift, Split).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import FULL, conv_bn_act, file, twin


class LoT(nn.Module):
    def __init__(self):
        super().__init__()
        self.kx = nn.Parameter(torch.zeros(1, 1, 3, 3, 3))
        self.ky = nn.Parameter(torch.zeros(15, 1, 3, 3, 3))

    def forward(self, phase, mask, te, b0, border):
        c, s = torch.cos(phase), torch.sin(phase)
        scale = 3 * 20e-3 / (b0 * te)

        def lg(k):
            ar = F.conv3d(c, k, padding=1) * border
            ai = F.conv3d(s, k, padding=1) * border
            return (ai * c - ar * s) * mask * scale.view(1, 1, 1, 1, 1)
        return lg(self.kx), lg(self.ky)


class FiLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.mlp = nn.Sequential(nn.Linear(5, 10), nn.SiLU(), nn.Linear(10, 2 * c))

    def forward(self, x, z):
        scale, shift = self.mlp(z).view(1, 2 * self.c, 1, 1, 1).split(self.c, 1)
        return x * (1 + scale) + shift


class Block(nn.Module):
    """conv+BN+ReLU x2; with FiLM after each conv when orientation-aware."""

    def __init__(self, cin, mid, cout, oa):
        super().__init__()
        self.a, self.b = conv_bn_act(cin, mid), conv_bn_act(mid, cout)
        self.fa, self.fb = (FiLM(mid), FiLM(cout)) if oa else (None, None)

    def forward(self, x, z):
        x = self.a(x)
        x = self.fa(x, z) if self.fa else x
        x = self.b(x)
        return self.fb(x, z) if self.fb else x


class OALFE(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = nn.Conv3d(1, 5, 3, padding=1, bias=False)

    def forward(self, x, z):
        y = (self.k(x.sum(1, keepdim=True)) * z.view(1, 5, 1, 1, 1)).sum(1, keepdim=True)
        return x + y


class LoTUNet(nn.Module):
    def __init__(self, base, oa=False, depth=4):
        super().__init__()
        self.lot, self.oa = LoT(), oa
        w = [base * 2 ** i for i in range(depth)]
        self.enc = nn.ModuleList([Block(16 if i == 0 else w[i - 1], w[i], w[i], oa) for i in range(depth)])
        self.mid = Block(w[-1], 2 * w[-1], w[-1], oa)
        self.up = nn.ModuleList([nn.Sequential(nn.ConvTranspose3d(w[i], w[i], 2, stride=2), nn.BatchNorm3d(w[i]), nn.ReLU())
                                 for i in reversed(range(depth))])
        self.dec = nn.ModuleList([Block(2 * w[i], w[i], w[max(i - 1, 0)], oa) for i in reversed(range(depth))])
        self.head = nn.Conv3d(w[0], 1, 1)
        if oa:
            self.zemb = nn.Sequential(nn.Linear(3, 3), nn.GELU(), nn.Linear(3, 5))
            self.lfe = OALFE()

    def forward(self, phase, mask, te, b0, *rest):
        border = rest[-1]
        xb, xd = self.lot(phase, mask, te, b0, border)
        x = torch.cat([xb, xd], 1)
        z = None
        if self.oa:
            z = self.zemb(rest[0]).view(1, 5)
            x = self.lfe(x, z)
        skips = []
        for e in self.enc:
            x = e(x, z)
            skips.append(x)
            x = F.max_pool3d(x, 2)
        x = self.mid(x, z)
        for u, d in zip(self.up, self.dec):
            x = d(torch.cat([u(x), skips.pop()], 1), z)
        return (self.head(x) + xb) / 4


IN5 = [("phase", "v1"), ("mask", "v1"), ("te", [1]), ("b0", [1]), ("border", "v1")]
IN6 = IN5[:4] + [("z_prjs", [1, 1, 3]), ("border", "v1")]
SH = dict(div=8, test_shapes=[[16, 16, 16], [16, 32, 48]])


def _build(oa):
    return lambda v: LoTUNet(16 if v == FULL else 4, oa)


TWINS = [
    twin("iqsm", [file("iqsm.onnx", _build(False), IN5, ["chi"], 17233763)], published=17233763, **SH,
         notes="LoT-Unet as upstream (16 base, 4 pools: shapes /16); Cos/Sin/Div in the LoT front-end"),
    twin("iqsm-plus", [file("iqsm-plus.onnx", _build(True), IN6, ["chi"], 17740526)], published=17740526,
         **dict(SH, div=16),
         notes="OA-LFE as static kernels weighted by the z embedding (ReduceSum); FiLM layers per conv (Gemm/Split); "
               "exact iQSM+ block layout not public in detail"),
    twin("iqfm", [file("iqfm.onnx", _build(False), IN5, ["localfield"], 17233763)], published=17233763, **SH,
         notes="same LoT-Unet as iQSM (different seed), output localfield"),
]
