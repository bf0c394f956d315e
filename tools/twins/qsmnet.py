"""QSMnet / QSMnet+ twins (Yoon 2018; Jung 2020): TF 3-D U-Net rebuilt in PyTorch.

4 max-pool / deconv levels, 32..512 channels, 5x5x5 convs with bias + BatchNorm + LeakyReLU(0.1),
2x2x2 stride-2 ConvTranspose without BN, 1x1x1 head. Same architecture; QSMnet+ differs only by seed.
"""
from common import FULL, UNet, file, twin, widths


def _build(v):
    return UNet(1, 1, widths(32 if v == FULL else 4, 4), k=5 if v == FULL else 3, act="lrelu", slope=0.1)


def _twin(id, seed_note):
    return twin(id, [file(f"{id}.onnx", _build, [("field", "v1")], ["chi"], 397801854)],
                div=16, published=397801854, test_shapes=[[16, 16, 16], [16, 32, 48]],
                notes="5^3 kernels, 32 base as upstream TF model; reduced variant uses 3^3 kernels, base 4" + seed_note)


TWINS = [_twin("qsmnet", ""), _twin("qsmnet-plus", "; different seed from qsmnet")]
