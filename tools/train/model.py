"""qsmcore-invnet: a compact 3-D U-Net that corrects a TKD estimate of χ.

Input  `input`, shape (1, 3, X, Y, Z), float32, X/Y/Z multiples of 4:
  channel 0: TKD χ in ppm (threshold 0.19, D(0) = 0, masked; qsmcore's physics::tkd)
  channel 1: the local field in ppm, masked
  channel 2: the brain mask (0/1)
Output `chi`, shape (1, 1, X, Y, Z): χ in ppm (the wrapper masks it).

Why this shape: a network fed the field alone must learn the whole (non-local) dipole inversion
and, at this size and training time, stays behind TKD; TKD already does the non-local part, and
what is left — streaks along the magic-angle cone, the underestimate of the thresholded band,
noise amplification and errors at the mask boundary — is local enough for a U-Net with a
receptive field of ≈ 40 voxels. The output is TKD plus a learned correction (residual learning).
Scaling to O(1) values is inside the graph, so the file takes and returns physical units.
"""
import torch
from torch import nn

TKD_SCALE = 10.0    # TKD χ in ppm → O(1)
FIELD_SCALE = 30.0  # local field in ppm → O(1)
OUT_SCALE = 0.1     # correction O(1) → ppm


def block(cin, cout):
    return nn.Sequential(
        nn.Conv3d(cin, cout, 3, padding=1), nn.LeakyReLU(0.1, inplace=True),
        nn.Conv3d(cout, cout, 3, padding=1), nn.LeakyReLU(0.1, inplace=True))


class InvNet(nn.Module):
    def __init__(self, base=16):
        super().__init__()
        b = base
        self.enc1 = block(3, b)
        self.enc2 = block(b, 2 * b)
        self.mid = block(2 * b, 4 * b)
        self.up2 = nn.ConvTranspose3d(4 * b, 2 * b, 2, stride=2)
        self.dec2 = block(4 * b, 2 * b)
        self.up1 = nn.ConvTranspose3d(2 * b, b, 2, stride=2)
        self.dec1 = block(2 * b, b)
        self.head = nn.Conv3d(b, 1, 1)
        self.pool = nn.MaxPool3d(2)
        nn.init.zeros_(self.head.weight)  # start as TKD itself
        nn.init.zeros_(self.head.bias)

    def forward(self, x):
        tkd = x[:, 0:1]
        scale = torch.tensor([TKD_SCALE, FIELD_SCALE, 1.0], dtype=x.dtype).view(1, 3, 1, 1, 1)
        h = x * scale
        e1 = self.enc1(h)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return tkd + OUT_SCALE * self.head(d1)
