"""QSMGAN generator twin (Chen et al. 2020): WGAN-GP 3-D U-Net generator, fixed 64^3 input ->
48^3 output; the centre crop (8 voxels a side) is in the graph (Slice); tanh head.
"""
from common import FULL, UNet, file, twin, widths


class Generator(UNet):
    def forward(self, x):
        return super().forward(x)[:, :, 8:56, 8:56, 8:56]


def _build(v):
    return Generator(1, 1, widths(22 if v == FULL else 4, 3), act="lrelu", slope=0.2, head_act="tanh")


TWINS = [twin("qsmgan", [file("qsmgan.onnx", _build, [("field", "v1")], ["chi"], 10753955, dynamic=False)],
              div=8, published=10753955, test_shapes=[[64, 64, 64], [64, 64, 64]], fixed_patch=[64, 64, 64],
              notes="widths 22..176 (3 pools), BN, LeakyReLU 0.2 tuned to size; fixed 64^3 -> 48^3 via Slice")]
