"""RS2-Net twin (Lin et al. 2024; VitoLin21/Rodent-Skull-Stripping `RSSNet`, built by its predict.py
with feature_size 48): a MONAI Swin-UNETR variant. Fixed-shape graph "input" [1,1,z,y,x] -> "logits"
[1,1,z,y,x]; the published patch is 128x96x128.

Encoder (Swin transformer, window 7, patch 2, mlp ratio 4, qkv bias): Conv 2^3 stride-2 patch
embedding to F channels, then three stages of two blocks each (heads 3, 6, 12; the second block of
a stage uses the shifted window), each stage ending in the v0.9 PatchMerging (8 strided slices in
MONAI's order, with its duplicated x5/x6 slices, LayerNorm(8C), Linear 8C->2C without bias). Each
stage's output is layer-normalised over channels without affine (`proj_out`). Blocks pad to whole
windows (Pad), roll with Slice+Concat, multiply Q by head_dim^-0.5, add the relative-position bias
(Gather of the block's (13^3, heads) table by the (N, N) index, in the graph), add the shift mask,
Softmax; the MLP's GELU exports as Erf. An axis no longer than 7 gets a whole-axis window and no
shift (MONAI get_window_size), and the index is then MONAI's 7^3 index cut to [:N, :N].
CNN side (MONAI UnetResBlock: conv 3^3 no bias, InstanceNorm without affine, LeakyReLU 0.01, with a
1x1 conv + IN on the residual when widths change): encoder1 on the image (1->F), encoder2 on stage
0 (F), encoder3 on stage 1 (2F), `feature` on the bottleneck (8F); four up blocks that up-sample
by trilinear Resize to the skip's size (align_corners False), 1x1 conv (no bias), Concat, res block:
8F->4F (skip: stage 2 output), 4F->2F, 2F->F, F->F (skip: encoder1); 1x1x1 head with bias.

Shift mask: MONAI computes a (windows, N, N) mask per stage in eager code, so a traced export bakes
it in (385 MB at the published patch, 329 MB of it stage 0's). Here each shifted stage stores only
MONAI's `mask_windows`, the (windows, N) region ids (1.1 MB in all), and the graph expands them
to the 0 / -100 mask (Expand, Sub, Equal/Not, Where): torch does not fold Expand.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import FULL, file, twin

WINDOW = 7
HEADS = (3, 6, 12)
FULL_PATCH = [128, 96, 128]
REDUCED_PATCH = [16, 32, 32]


def window_and_shift(dims):
    """MONAI get_window_size: an axis no longer than the window uses the whole axis, unshifted."""
    ws = [d if d <= WINDOW else WINDOW for d in dims]
    sh = [0 if d <= WINDOW else WINDOW // 2 for d in dims]
    return ws, sh


def _shape(x):
    """Static sizes (Python ints) so that the fixed-shape graph has no Shape arithmetic."""
    return [int(s) for s in x.shape]


def _ceil_to(v, m):
    return (v + m - 1) // m * m


def relative_position_index(ws):
    """(N, N) index into the ((2w-1)^3, heads) bias table, as MONAI/Swin build it."""
    coords = torch.stack(torch.meshgrid(*[torch.arange(w) for w in ws], indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    for a in range(3):
        rel[:, :, a] += ws[a] - 1
    rel[:, :, 0] *= (2 * ws[1] - 1) * (2 * ws[2] - 1)
    rel[:, :, 1] *= 2 * ws[2] - 1
    return rel.sum(-1)


def partition(x, ws):
    """(D, H, W, C) -> (windows, N, C)."""
    d, h, w, c = _shape(x)
    x = x.reshape(d // ws[0], ws[0], h // ws[1], ws[1], w // ws[2], ws[2], c)
    return x.permute(0, 2, 4, 1, 3, 5, 6).reshape(-1, ws[0] * ws[1] * ws[2], c)


def unpartition(x, ws, dims):
    d, h, w = dims
    x = x.reshape(d // ws[0], h // ws[1], w // ws[2], ws[0], ws[1], ws[2], -1)
    return x.permute(0, 3, 1, 4, 2, 5, 6).reshape(d, h, w, -1)


class WindowAttention(nn.Module):
    def __init__(self, dim, heads, n):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        # MONAI sizes the table for the nominal 7^3 window and slices the index to the window used.
        # The Gather into the table runs in the graph (torch does not fold it); the blocks' identical
        # int64 index buffers export as one initializer (torch deduplicates by value).
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * WINDOW - 1) ** 3, heads))
        self.register_buffer("relative_position_index", relative_position_index([WINDOW] * 3)[:n, :n].contiguous())
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, n, c = _shape(x)
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        attn = attn + F.embedding(self.relative_position_index, self.relative_position_bias_table).permute(2, 0, 1)
        if mask is not None:
            attn = attn + mask.unsqueeze(1)  # batch 1: windows x 1 x N x N
        attn = torch.softmax(attn, -1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class SwinBlock(nn.Module):
    def __init__(self, dim, heads, shifted, n):
        super().__init__()
        self.shifted = shifted
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, n)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        """x: (D, H, W, C), batch dropped (the graph is fixed at batch 1)."""
        d, h, w, c = _shape(x)
        ws, sh = window_and_shift((d, h, w))
        if not self.shifted:
            sh = [0, 0, 0]
        pads = [_ceil_to(s, k) - s for s, k in zip((d, h, w), ws)]
        y = self.norm1(x)
        if any(pads):
            y = F.pad(y, (0, 0, 0, pads[2], 0, pads[1], 0, pads[0]))
        dims = _shape(y)[:3]
        axes = [a for a in range(3) if sh[a]]
        if axes:
            y = torch.roll(y, [-sh[a] for a in axes], axes)
        y = unpartition(self.attn(partition(y, ws), mask if axes else None), ws, dims)
        if axes:
            y = torch.roll(y, [sh[a] for a in axes], axes)
        if any(pads):
            y = y[:d, :h, :w]
        x = x + y
        return x + self.mlp(self.norm2(x))


def region_windows(dims):
    """MONAI's compute_mask up to `mask_windows`: (windows, N) region id of every window position of
    a shifted block at stage dims (D, H, W), or None when no axis is shifted. Regions along an axis
    of padded length p, window k, shift s: [0, p-k), [p-k, p-s), [p-s, p); an unshifted axis (whole
    axis in one window) is one region."""
    ws, sh = window_and_shift(dims)
    if not any(sh):
        return None
    padded = [_ceil_to(s, k) for s, k in zip(dims, ws)]
    axis = [torch.tensor([0.0 if i < p - k else (1.0 if i < p - s else 2.0) for i in range(p)]) for p, k, s in
            zip(padded, ws, sh)]
    img = axis[0].view(-1, 1, 1) * 9 + axis[1].view(1, -1, 1) * 3 + axis[2].view(1, 1, -1)
    return partition(img.unsqueeze(-1), ws).squeeze(-1).contiguous()


def shift_mask(ids):
    """(windows, N, N) additive mask: 0 between positions of the same region, -100 otherwise. Runs
    in the graph: the Expand (a broadcast Sub would do the same) keeps torch from folding the
    N-times larger mask into a constant (329 MB for stage 0 at the published patch); the column
    operand is sliced from the expanded rows so that the ids are stored once."""
    w, n = _shape(ids)
    rows = ids.unsqueeze(1).expand(w, n, n)  # rows[w, i, j] = ids[w, j]
    diff = rows - rows[:, :1, :].transpose(1, 2)
    return diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0)


class PatchMerging(nn.Module):
    """MONAI v0.9 PatchMerging (the "merging" default), slice order included."""

    def __init__(self, dim):
        super().__init__()
        self.reduction = nn.Linear(8 * dim, 2 * dim, bias=False)
        self.norm = nn.LayerNorm(8 * dim)

    def forward(self, x):
        d, h, w, _ = _shape(x)
        if d % 2 or h % 2 or w % 2:
            x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2, 0, d % 2))
        o = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 0, 1), (0, 1, 0), (0, 0, 1), (1, 1, 1)]
        x = torch.cat([x[i::2, j::2, k::2, :] for i, j, k in o], -1)
        return self.reduction(self.norm(x))


class Stage(nn.Module):
    def __init__(self, dim, heads, dims):
        super().__init__()
        ws, _ = window_and_shift(dims)
        n = ws[0] * ws[1] * ws[2]
        self.blocks = nn.ModuleList([SwinBlock(dim, heads, i % 2 == 1, n) for i in range(2)])
        ids = region_windows(dims)
        self.shifted = ids is not None
        if self.shifted:
            self.register_buffer("mask_windows", ids)
        self.downsample = PatchMerging(dim)

    def forward(self, x):
        """(1, C, D, H, W) -> (1, 2C, D/2, H/2, W/2)."""
        x = x[0].permute(1, 2, 3, 0)
        mask = shift_mask(self.mask_windows) if self.shifted else None
        for blk in self.blocks:
            x = blk(x, mask)
        return self.downsample(x).permute(3, 0, 1, 2).unsqueeze(0)


def proj_out(x):
    """Channel LayerNorm without affine (explicit unit scale: ONNX's LayerNormalization requires one)."""
    c = _shape(x)[1]
    return F.layer_norm(x.permute(0, 2, 3, 4, 1), [c], torch.ones(c), torch.zeros(c)).permute(0, 4, 1, 2, 3)


class ResBlock(nn.Module):
    """MONAI UnetResBlock, stride 1."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv3d(cin, cout, 3, padding=1, bias=False)
        self.conv2 = nn.Conv3d(cout, cout, 3, padding=1, bias=False)
        self.norm1, self.norm2 = nn.InstanceNorm3d(cout), nn.InstanceNorm3d(cout)
        self.conv3 = nn.Conv3d(cin, cout, 1, bias=False) if cin != cout else None
        self.norm3 = nn.InstanceNorm3d(cout) if cin != cout else None

    def forward(self, x):
        r = x if self.conv3 is None else self.norm3(self.conv3(x))
        y = self.norm2(self.conv2(F.leaky_relu(self.norm1(self.conv1(x)), 0.01)))
        return F.leaky_relu(y + r, 0.01)


class UpBlock(nn.Module):
    """RS2-Net's UnetrUpBlock: trilinear up-sampling to the skip's size, 1x1 conv, Concat, res block."""

    def __init__(self, cin, cout):
        super().__init__()
        self.transp_conv = nn.Conv3d(cin, cout, 1, bias=False)
        self.conv_block = ResBlock(2 * cout, cout)

    def forward(self, x, skip):
        x = F.interpolate(x, size=_shape(skip)[2:], mode="trilinear", align_corners=False)
        return self.conv_block(torch.cat([self.transp_conv(x), skip], 1))


class RSSNet(nn.Module):
    def __init__(self, f, patch, heads=HEADS):
        super().__init__()
        self.patch_embed = nn.Conv3d(1, f, 2, stride=2)
        self.stages = nn.ModuleList([Stage(f * 2 ** i, h, [p >> (i + 1) for p in patch]) for i, h in enumerate(heads)])
        self.encoder1, self.encoder2, self.encoder3 = ResBlock(1, f), ResBlock(f, f), ResBlock(2 * f, 2 * f)
        self.feature = ResBlock(8 * f, 8 * f)
        self.decoder4, self.decoder3 = UpBlock(8 * f, 4 * f), UpBlock(4 * f, 2 * f)
        self.decoder2, self.decoder1 = UpBlock(2 * f, f), UpBlock(f, f)
        self.out = nn.Conv3d(f, 1, 1)

    def forward(self, x_in):
        h = self.patch_embed(x_in)
        hs = [proj_out(h)]
        for s in self.stages:
            h = s(h)
            hs.append(proj_out(h))
        enc0, enc1, enc2 = self.encoder1(x_in), self.encoder2(hs[0]), self.encoder3(hs[1])
        d = self.decoder4(self.feature(hs[3]), hs[2])
        d = self.decoder1(self.decoder2(self.decoder3(d, enc2), enc1), enc0)
        return self.out(d)


def _build(v):
    return RSSNet(48, FULL_PATCH) if v == FULL else RSSNet(6, REDUCED_PATCH)


PUBLISHED = 63456162
TWINS = [twin("rs2-net", [file("rs2-net.onnx", _build, [("input", "v1")], ["logits"], PUBLISHED, dynamic=False)],
              div=32, published=PUBLISHED, test_shapes=[FULL_PATCH], fixed_patch=FULL_PATCH,
              reduced_patch=REDUCED_PATCH,
              notes="RSSNet as RS2-Net's predict.py builds it: feature_size 48 (models.md), 3 Swin stages x 2 blocks, "
                    "heads 3/6/12, window 7; 15.0 M learnable params (60.0 MB). The feature_size-24 reading of the "
                    "published size fits MONAI's 4-stage SwinUNETR, not RSSNet. Graph extras: the relative-position "
                    "bias tables are gathered at run time by one int64 (343x343) index shared by value (0.9 MB); "
                    "each shifted block's (windows, 343) region ids (1.1 MB in all) expand to the additive mask at "
                    "run time. A per-block folded (heads, N, N) bias would add 19.8 MB (+25 %), a baked mask 385 MB. "
                    "Fixed patch 128x96x128 (z,y,x). Reduced: feature_size 6 at a fixed 16x32x32 patch, which keeps "
                    "a fully shifted stage (7^3 windows, padded), a partly shifted one (window 4x7x7, z unshifted) "
                    "and an unshifted shrunk one (2x4x4), at a fraction of the full patch's attention cost")]
