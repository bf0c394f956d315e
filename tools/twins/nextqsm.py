"""NeXtQSM twins (Cognolato et al. 2023): two graphs, BFR first, VJP second. /64 (6 down-samplings).

Both U-Nets follow the TF layout: 3^3 SAME convs + ReLU, stride-2 3^3 down-sampling convs whose TF
SAME padding is (0,1) (exported as asymmetric Conv pads after folding the Pad), 2^3 stride-2
ConvTranspose up-sampling, Concat skips, 1x1x1 head.
nextqsm-bf: field -> local field.  nextqsm-vjp: chi -> grad = d/dchi sum|VarNet(chi)|, written as a
forward graph: adjoint of Conv = ConvTranspose with the same weights (stride-2 adjoints crop their
last voxel, folded into ConvTranspose end pads), adjoint of ConvTranspose = Conv, ReLU adjoint =
Greater+Where mask, Concat adjoint = Split, d|y| = Sign; the two full-resolution C->C stride-1
adjoints are Conv with flipped, channel-swapped kernels (extra initializers), as published.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import FULL, file, twin


def _down(x, conv):
    return F.conv3d(F.pad(x, (0, 1, 0, 1, 0, 1)), conv.weight, conv.bias, stride=2)


class TFUNet(nn.Module):
    def __init__(self, w, convs=2):
        super().__init__()
        L = len(w) - 1
        self.L, self.convs = L, convs
        self.enc = nn.ModuleList([nn.ModuleList([nn.Conv3d((1 if i == 0 else w[i]) if j == 0 else w[i], w[i], 3, padding=1)
                                                 for j in range(convs)]) for i in range(L)])
        self.down = nn.ModuleList([nn.Conv3d(w[i], w[i + 1], 3) for i in range(L)])
        self.mid = nn.ModuleList([nn.Conv3d(w[L], w[L], 3, padding=1) for _ in range(convs)])
        self.up = nn.ModuleList([nn.ConvTranspose3d(w[i + 1], w[i], 2, stride=2) for i in reversed(range(L))])
        self.dec = nn.ModuleList([nn.ModuleList([nn.Conv3d(2 * w[i] if j == 0 else w[i], w[i], 3, padding=1)
                                                 for j in range(convs)]) for i in reversed(range(L))])
        self.head = nn.Conv3d(w[0], 1, 1)

    def forward(self, x, tape=None):
        """tape: list receiving (kind, module, pre-activation) for the VJP."""
        rec = (lambda *a: tape.append(a)) if tape is not None else (lambda *a: None)
        skips = []
        for convs, down in zip(self.enc, self.down):
            for c in convs:
                p = c(x); rec("conv", c, p); x = F.relu(p)
            skips.append(x)
            p = _down(x, down); rec("down", down, p); x = F.relu(p)
        for c in self.mid:
            p = c(x); rec("conv", c, p); x = F.relu(p)
        for up, convs in zip(self.up, self.dec):
            p = up(x); rec("up", up, p); x = F.relu(p)
            rec("cat", None, (up.out_channels, convs[0].in_channels - up.out_channels))
            x = torch.cat([x, skips.pop()], 1)
            for c in convs:
                p = c(x); rec("conv", c, p); x = F.relu(p)
        return self.head(x)


def _adj_conv(g, conv, flipped):
    if flipped is not None:
        return F.conv3d(g, flipped, padding=1)
    return F.conv_transpose3d(g, conv.weight, padding=1)


class VJP(nn.Module):
    """grad_x sum|f(x)| for a TFUNet f, unnormalised."""

    def __init__(self, w):
        super().__init__()
        self.net = TFUNet(w)
        self.flipped = {}

    def finalize(self):
        """Store the two full-resolution C->C adjoint kernels pre-flipped (constants in the graph)."""
        for i, c in enumerate((self.net.enc[0][-1], self.net.dec[-1][-1])):
            self.register_buffer(f"flipped{i}", c.weight.detach().transpose(0, 1).flip(2, 3, 4).contiguous())
            self.flipped[id(c)] = getattr(self, f"flipped{i}")

    def forward(self, chi):
        n = self.net
        tape = []
        y = n.forward(chi, tape)
        g = F.conv_transpose3d(torch.sign(y), n.head.weight)
        skip_grads = []
        relu = lambda g, p: torch.where(p > 0, g, torch.tensor(0.0))
        for kind, mod, p in reversed(tape):
            if kind == "conv":
                g = _adj_conv(relu(g, p), mod, self.flipped.get(id(mod)))
            elif kind == "cat":
                g, gs = g.split(list(p), 1)
                skip_grads.append(gs)
            elif kind == "up":
                g = F.conv3d(relu(g, p), mod.weight, stride=2)
            elif kind == "down":
                g = F.conv_transpose3d(relu(g, p), mod.weight, stride=2)[:, :, :-1, :-1, :-1]
                g = g + skip_grads.pop()
        return g


TF_SAME = [0, 0, 0, 1, 1, 1]


def _widths(base, cap):
    return [min(base * 2 ** i, cap) for i in range(7)]


def _bf(v):
    return TFUNet(_widths(12, 288) if v == FULL else _widths(2, 16))


def _vjp(v):
    return VJP(_widths(18, 128) if v == FULL else _widths(2, 16))


TWINS = [twin("nextqsm", [
    file("nextqsm-bf.onnx", _bf, [("field", "v1")], ["local_field"], 113211474, assume_pads=TF_SAME),
    file("nextqsm-vjp.onnx", _vjp, [("chi", "v1")], ["grad"], 42437407, assume_pads=TF_SAME)],
    div=64, published=113211474 + 42437407, test_shapes=[[64, 64, 64], [64, 64, 128]],
    notes="graph names not in models.md: bf 'field'->'local_field', vjp 'chi'->'grad'; widths tuned to size "
          "(bf 12..288, vjp 18..128, 6 down-samplings); ops Conv (asymmetric pads), ConvTranspose (end pads), "
          "Relu, Greater, Where, Sign, Split, Add, Concat")]
