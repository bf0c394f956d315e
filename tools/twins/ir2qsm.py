"""IR2QSM twin (Li et al. 2025): IR2U-net = a depth-4 (3-pool) 3-D U-net unrolled 4 times with
reverse concatenations (each later iteration's encoder also takes the previous decoder's features),
a recurrent SRU middle (sigmoid update gate, hidden state carried across iterations) and a learned
1x1x1 integration of the 4 residual outputs. Filters 16..128 as upstream; AddNoise is off
(inference). Only the field goes in; the graph returns the integrated output only.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import FULL, conv_bn_act, file, twin

CB = lambda a, b: conv_bn_act(a, b)


class Iteration(nn.Module):
    def __init__(self, f):
        super().__init__()
        d = len(f)
        self.pre = nn.Sequential(CB(1, f[0]), CB(f[0], f[0]))
        self.enc1 = nn.ModuleList([CB(2 * f[l], f[l]) for l in range(d - 1)])
        self.enc2 = nn.ModuleList([CB(f[l], f[l]) for l in range(d - 1)])
        self.down = nn.ModuleList([CB(f[l], 2 * f[l]) for l in range(d - 1)])
        self.gate, self.cand = CB(f[-1], f[-1]), CB(f[-1], f[-1])
        self.up = nn.ModuleList([nn.Sequential(nn.ConvTranspose3d(f[d - 1 - j], f[d - 1 - j] // 2, 2, stride=2),
                                               nn.BatchNorm3d(f[d - 1 - j] // 2), nn.ReLU()) for j in range(d - 1)])
        self.dec = nn.ModuleList([nn.Sequential(CB(f[d - 1 - j], f[d - 1 - j]), CB(f[d - 1 - j], f[d - 1 - j] // 2))
                                  for j in range(d - 1)])
        self.post = nn.Sequential(CB(f[0], f[0]), nn.Conv3d(f[0], 1, 1))


class IR2UNet(nn.Module):
    def __init__(self, base, iterations=4, depth=4):
        super().__init__()
        self.f = [base * 2 ** i for i in range(depth)]
        self.its = nn.ModuleList([Iteration(self.f) for _ in range(iterations)])
        self.integrate = nn.Conv3d(iterations, 1, 1)

    def forward(self, x):
        d = len(self.f)
        outs, dec, h, xin = [], None, None, x
        for t, it in enumerate(self.its):
            y = it.pre(xin)
            enc = []
            for l in range(d - 1):
                if t > 0:
                    y = it.enc1[l](torch.cat([y, dec[d - l - 2]], 1))
                y = it.enc2[l](y)
                enc.append(y)
                y = F.max_pool3d(it.down[l](y), 2)
            h = y if h is None else h
            u = torch.sigmoid(it.gate(y))
            h = h * (1 - u) + it.cand(y) * u
            y, dec = h, []
            for j in range(d - 1):
                y = it.dec[j](torch.cat([it.up[j](y), enc[d - j - 2]], 1))
                dec.append(y)
            xin = it.post(y) + x
            outs.append(xin)
        return self.integrate(torch.cat(outs, 1)) + x


TWINS = [twin("ir2qsm", [file("ir2qsm.onnx", lambda v: IR2UNet(16 if v == FULL else 4), [("field", "v1")], ["chi"], 40259354)],
              div=8, published=40259354, test_shapes=[[16, 16, 16], [16, 24, 32]],
              notes="upstream IR2Unet structure (16..128 filters, 4 iterations); adds Sigmoid/Sub/Mul for the SRU")]
