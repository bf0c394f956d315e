"""chi-sepnet and R2PRIMEnet twins (SNU-LIST, Kim et al.): 3-D U-Net, 4 pools, 32..512 channels,
3x3x3 conv+BN+ReLU x2 per level, 2x2x2 ConvTranspose, 1x1x1 head. The published graphs hold only
Conv/Relu/MaxPool/ConvTranspose/Concat (BN folded), so these twins are exported with BN folded.
chi-sepnet: one [1,3,...] input [qsm, field, r2prime/Dr] -> one [1,2,...] output [chi_pos, chi_neg].
"""
from common import FULL, UNet, file, twin, widths


def _build(cin, cout):
    return lambda v: UNet(cin, cout, widths(32 if v == FULL else 4, 4))


TWINS = [
    twin("r2primenet", [file("r2primenet.onnx", _build(1, 1), [("r2star", "v1")], ["r2prime"], 90307128, fold_bn=True)],
         div=16, published=90307128, test_shapes=[[16, 16, 16], [16, 32, 48]],
         notes="BN folded into Conv as in the published graph"),
    twin("chi-sepnet", [file("chi-sepnet.onnx", _build(3, 2), [("input", "v3")], ["output"], 90314172, fold_bn=True)],
         div=8, published=90314172, test_shapes=[[16, 16, 16], [16, 32, 48]],
         notes="graph tensor names not in models.md: single input 'input' [1,3,...] and single output 'output' "
               "[1,2,...] (chi_pos, chi_neg channels); the net has 4 pools so shapes are /16 (div 8 is the registry's)"),
]
