"""SUSEP-Net twin (Li, Gao, Sun et al. 2025): dual-branch 3-D U-Net (3 pools) for chi separation.
Three [1,1,...] inputs in the order qsm, r2prime, lfs are concatenated; one U-Net branch per output
(chi_pos, chi_neg), each with a ReLU output. Conv+BN+ReLU, ConvTranspose up, Concat skips.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import FULL, UNet, file, twin, widths


class DualBranch(nn.Module):
    def __init__(self, base):
        super().__init__()
        self.pos = UNet(3, 1, widths(base, 3))
        self.neg = UNet(3, 1, widths(base, 3))

    def forward(self, qsm, r2prime, lfs):
        x = torch.cat([qsm, r2prime, lfs], 1)
        return F.relu(self.pos(x)), F.relu(self.neg(x))


TWINS = [twin("susep-net", [file("susep-net.onnx", lambda v: DualBranch(68 if v == FULL else 4),
                                 [("qsm", "v1"), ("r2prime", "v1"), ("lfs", "v1")], ["chi_pos", "chi_neg"], 205743584)],
              div=8, published=205743584, test_shapes=[[16, 16, 16], [16, 24, 32]],
              notes="two U-Net branches, widths 68..544 tuned to size (branch layout inferred from 'dual-branch')")]
