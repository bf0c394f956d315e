"""SynthSeg 1.0 / 2.0 twins (Billot et al. 2023): neuron `unet`, 5 levels x 2 convs (3^3, ELU),
24 base features doubling per level, BatchNorm on the channel axis after each level's convs,
MaxPool down, nearest UpSampling (Resize) up, Concat skips, 1x1x1 conv + softmax.
Channels-last I/O like the tf2onnx export: [1,D,H,W,1] -> [1,D,H,W,L] (Transpose at both ends).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import FULL, file, twin


def _level(cin, c):
    return nn.Sequential(nn.Conv3d(cin, c, 3, padding=1), nn.ELU(), nn.Conv3d(c, c, 3, padding=1), nn.ELU(),
                         nn.BatchNorm3d(c))


class NeuronUNet(nn.Module):
    def __init__(self, base, labels, levels=5):
        super().__init__()
        w = [base * 2 ** i for i in range(levels)]
        self.enc = nn.ModuleList([_level(1 if i == 0 else w[i - 1], w[i]) for i in range(levels)])
        self.dec = nn.ModuleList([_level(w[i + 1] + w[i], w[i]) for i in reversed(range(levels - 1))])
        self.head = nn.Conv3d(w[0], labels, 1)

    def forward(self, image):
        x = image.permute(0, 4, 1, 2, 3)
        skips = []
        for i, e in enumerate(self.enc):
            if i:
                x = F.max_pool3d(x, 2)
            x = e(x)
            skips.append(x)
        skips.pop()
        for d in self.dec:
            x = d(torch.cat([F.interpolate(x, scale_factor=2.0, mode="nearest"), skips.pop()], 1))
        return torch.softmax(self.head(x).permute(0, 2, 3, 4, 1), -1)


def _build(labels):
    return lambda v: NeuronUNet(24 if v == FULL else 4, labels)


def _twin(id, labels, published, notes):
    return twin(id, [file(f"{id}.onnx", _build(labels), [("image", "cl1")], ["unet_prediction"], published,
                          channels_last=True)],
                div=32, published=published, test_shapes=[[32, 32, 32], [32, 64, 32]], notes=notes)


TWINS = [
    _twin("synthseg", 32, 52998326, "neuron unet as documented (13.2 M params)"),
    _twin("synthseg-2.0", 33, 0, "same U-Net with 33 labels; published size unknown (registry bytes 0)"),
]
