"""Shared machinery for the architecture twins: seeding, weight init, export, read-back.

Run only with Debian's interpreter (/usr/bin/python3: torch 1.13, onnx 1.12).
Every twin module defines ``TWIN`` (a dict, see ``twin()``) whose ``files`` entries
carry a ``build(variant)`` returning ``(module, example_args)``.
"""
import collections
import hashlib
import io
import math
import os
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
import onnx
from onnx import numpy_helper

OPSET = 17
torch.set_num_threads(2)
warnings.filterwarnings("ignore")

FULL, REDUCED = "full", "reduced"


# --------------------------------------------------------------------------- registry record
def twin(id, files, div, published, test_shapes, fixed_patch=None, notes="", reduced_shapes=None,
         reduced_patch=None):
    """One registry twin. files: list of dicts {name, build, inputs, outputs, published}.
    reduced_patch: the fixed patch of the reduced variant when it differs from fixed_patch (a
    fixed-shape graph too slow to run in CI at the published patch)."""
    return dict(id=id, files=files, div=div, published=published, test_shapes=test_shapes,
                fixed_patch=fixed_patch, notes=notes, reduced_shapes=reduced_shapes, reduced_patch=reduced_patch)


def fixed_patch_of(t, variant):
    """The fixed patch the given variant of twin t is exported at (None: dynamic shapes)."""
    if variant == REDUCED and t.get("reduced_patch"):
        return t["reduced_patch"]
    return t["fixed_patch"]


def file(name, build, inputs, outputs, published, dynamic=True, fold_bn=False, channels_last=False, assume_pads=None):
    """inputs: list of (name, kind) with kind 'vol{C}' (a [1,C,D,H,W] volume), or a fixed shape list."""
    return dict(name=name, build=build, inputs=inputs, outputs=outputs, published=published,
                dynamic=dynamic, fold_bn=fold_bn, channels_last=channels_last, assume_pads=assume_pads)


# --------------------------------------------------------------------------- building blocks
def conv_bn_act(cin, cout, k=3, act="relu", bn=True, bias=True, stride=1, slope=0.1):
    layers = [nn.Conv3d(cin, cout, k, stride=stride, padding=k // 2, bias=bias)]
    if bn:
        layers.append(nn.BatchNorm3d(cout))
    if act == "relu":
        layers.append(nn.ReLU())
    elif act == "lrelu":
        layers.append(nn.LeakyReLU(slope))
    elif act == "elu":
        layers.append(nn.ELU())
    return nn.Sequential(*layers)


def up2(cin, cout, bn=False, act=None):
    layers = [nn.ConvTranspose3d(cin, cout, 2, stride=2)]
    if bn:
        layers.append(nn.BatchNorm3d(cout))
    if act == "relu":
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class UNet(nn.Module):
    """Plain 3-D U-Net: ``depth`` poolings, ``convs`` conv(+BN)+act per level, ConvTranspose k2 s2
    up, Concat skips, 1x1x1 head. widths[i] is level i's width; widths[depth] the bottleneck."""

    def __init__(self, cin, cout, widths, k=3, act="relu", bn=True, slope=0.1, convs=2,
                 up_bn=False, residual=False, head_act=None, skip_first=True):
        super().__init__()
        self.depth = len(widths) - 1
        self.residual, self.head_act = residual, head_act
        cb = lambda a, b: conv_bn_act(a, b, k, act, bn, slope=slope)
        self.enc = nn.ModuleList()
        c = cin
        for w in widths[:-1]:
            self.enc.append(nn.Sequential(*[cb(c if i == 0 else w, w) for i in range(convs)]))
            c = w
        wb = widths[-1]
        self.mid = nn.Sequential(*[cb(c if i == 0 else wb, wb) for i in range(convs)])
        self.up, self.dec = nn.ModuleList(), nn.ModuleList()
        c = wb
        for w in reversed(widths[:-1]):
            self.up.append(up2(c, w, bn=up_bn, act="relu" if up_bn else None))
            self.dec.append(nn.Sequential(*[cb(2 * w if i == 0 else w, w) for i in range(convs)]))
            c = w
        self.head = nn.Conv3d(c, cout, 1)

    def forward(self, x):
        skips, h = [], x
        for e in self.enc:
            h = e(h)
            skips.append(h)
            h = F.max_pool3d(h, 2)
        h = self.mid(h)
        for u, d in zip(self.up, self.dec):
            h = d(torch.cat([u(h), skips.pop()], 1))
        y = self.head(h)
        if self.head_act == "tanh":
            y = torch.tanh(y)
        if self.residual:
            y = y + x[:, : y.shape[1]]
        return y


def widths(base, depth, mult=2, cap=None):
    w = [base * mult ** i for i in range(depth + 1)]
    return [min(v, cap) for v in w] if cap else w


# --------------------------------------------------------------------------- seeded init
def init_weights(model, seed):
    """Deterministic random weights, scaled so activations stay O(1); BN/IN/LN stats randomised
    so that fold passes are exercised."""
    g = torch.Generator().manual_seed(seed)
    done = set()

    def normal(t, std, mean=0.0):
        t.copy_(torch.randn(t.shape, generator=g) * std + mean)

    def uniform(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=g) * (hi - lo) + lo)

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv3d, nn.Conv2d, nn.Conv1d)):
                fan = m.weight.shape[1] * math.prod(m.weight.shape[2:])
                normal(m.weight, math.sqrt(2.0 / fan))
                if m.bias is not None:
                    normal(m.bias, 0.05)
            elif isinstance(m, (nn.ConvTranspose3d,)):
                k, s = math.prod(m.weight.shape[2:]), math.prod(m.stride)
                fan = m.weight.shape[0] * max(1, k // s)
                normal(m.weight, math.sqrt(2.0 / fan))
                if m.bias is not None:
                    normal(m.bias, 0.05)
            elif isinstance(m, nn.Linear):
                normal(m.weight, math.sqrt(1.0 / m.weight.shape[1]))
                if m.bias is not None:
                    normal(m.bias, 0.02)
            elif isinstance(m, (nn.BatchNorm3d, nn.BatchNorm2d)):
                uniform(m.weight, 0.6, 1.4)
                normal(m.bias, 0.1)
                normal(m.running_mean, 0.1)
                uniform(m.running_var, 0.5, 2.0)
            elif isinstance(m, (nn.InstanceNorm3d, nn.LayerNorm)):
                if m.weight is not None:
                    uniform(m.weight, 0.8, 1.2)
                    normal(m.bias, 0.05)
            else:
                continue
            for p in m.parameters(recurse=False):
                done.add(id(p))
        for name, p in model.named_parameters():
            if id(p) not in done:
                normal(p, 0.05)
    if hasattr(model, "finalize"):
        model.finalize()
    return model


def count_elems(model):
    """Parameters plus BN running stats: what ends up as initializers."""
    n = sum(p.numel() for p in model.parameters())
    for name, b in model.named_buffers():
        if "num_batches" not in name and b.is_floating_point():
            n += b.numel()
    return n


# --------------------------------------------------------------------------- export
def _strip_identity(m):
    g = m.graph
    outs = {o.name for o in g.output}
    alias, keep = {}, []
    for n in g.node:
        if n.op_type == "Identity" and n.output[0] not in outs:
            alias[n.output[0]] = n.input[0]
        else:
            keep.append(n)
    res = lambda s: res(alias[s]) if s in alias else s
    for n in keep:
        for i, s in enumerate(n.input):
            n.input[i] = res(s)
    del g.node[:]
    g.node.extend(keep)
    return m


def simplify(m, assume_pads=None):
    """Graph clean-up after torch export, in the spirit of the published graphs' onnxsim passes:
    drop all-zero Pads (torch emits them before AveragePool); fold zero-valued spatial Pads into the
    following Conv's pads (``assume_pads`` = [b_d, b_h, b_w, e_d, e_h, e_w] when torch built the
    pads vector from a non-foldable op chain); fold an end-crop Slice (0:-1) after a ConvTranspose
    into its end pads; then drop dead nodes and initializers."""
    g = m.graph
    const = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute[0].name == "value":
            const[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    users = collections.defaultdict(list)
    for n in g.node:
        for s in n.input:
            users[s].append(n)
    alias, dead = {}, set()

    def attr(n, name, default):
        for a in n.attribute:
            if a.name == name:
                return list(onnx.helper.get_attribute_value(a))
        return default

    def set_attr(n, name, value):
        for a in list(n.attribute):
            if a.name == name:
                n.attribute.remove(a)
        n.attribute.append(onnx.helper.make_attribute(name, value))

    for n in g.node:
        if n.op_type == "Pad" and len(n.input) >= 2:
            pads = const.get(n.input[1])
            value = const.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
            if value is not None and float(value) != 0.0:
                continue
            if pads is not None and not pads.any():
                alias[n.output[0]] = n.input[0]
                dead.add(id(n))
                continue
            sp = None
            if pads is not None and pads.size == 10 and not pads[[0, 1, 5, 6]].any():
                sp = [int(v) for v in list(pads[2:5]) + list(pads[7:10])]
            elif pads is None and assume_pads is not None:
                sp = list(assume_pads)
            cons = users[n.output[0]]
            if sp and cons and all(c.op_type == "Conv" for c in cons):
                for c in cons:
                    old = attr(c, "pads", [0] * 6)
                    set_attr(c, "pads", [a + b for a, b in zip(old, sp)])
                alias[n.output[0]] = n.input[0]
                dead.add(id(n))
    for n in g.node:
        if n.op_type != "ConvTranspose":
            continue
        cur, crop = n, [0, 0, 0]
        while True:
            cons = users[cur.output[0]]
            if len(cons) != 1 or cons[0].op_type != "Slice":
                break
            sl = cons[0]
            st, en = const.get(sl.input[1]), const.get(sl.input[2])
            ax = const.get(sl.input[3]) if len(sl.input) > 3 else None
            stp = const.get(sl.input[4]) if len(sl.input) > 4 else None
            if st is None or en is None or ax is None or (stp is not None and (stp != 1).any()):
                break
            if (st != 0).any() or (en != -1).any() or not all(int(a) in (2, 3, 4) for a in ax):
                break
            for a in ax:
                crop[int(a) - 2] += 1
            dead.add(id(sl))
            cur = sl
        if any(crop):
            old = attr(n, "pads", [0] * 6)
            set_attr(n, "pads", old[:3] + [a + b for a, b in zip(old[3:], crop)])
            n.output[0] = cur.output[0]  # the ConvTranspose now yields the cropped tensor
    res = lambda s: res(alias[s]) if s in alias else s
    keep = [n for n in g.node if id(n) not in dead]
    for n in keep:
        for i, s in enumerate(n.input):
            n.input[i] = res(s)
    # dead-code elimination
    needed = {o.name for o in g.output}
    live = []
    for n in reversed(keep):
        if any(o in needed for o in n.output):
            live.append(n)
            needed.update(n.input)
    live.reverse()
    del g.node[:]
    g.node.extend(live)
    inits = [i for i in g.initializer if i.name in needed]
    del g.initializer[:]
    g.initializer.extend(inits)
    return m


def export(model, args, path, input_names, output_names, dynamic=True, fold_bn=False, spatial_axes=(2, 3, 4),
           assume_pads=None):
    """Export deterministically (opset 17). BatchNorm stays visible (eval semantics, training_mode=0)
    unless fold_bn, which folds it into Conv as the published graph does."""
    model.eval()
    dyn = None
    if dynamic:
        dyn = {}
        for nm, a in zip(input_names, args):
            if a.dim() == 5:
                dyn[nm] = {ax: f"{nm}_{'dhw'[i]}" for i, ax in enumerate(spatial_axes)}
        for nm in output_names:
            dyn[nm] = {ax: f"{nm}_{'dhw'[i]}" for i, ax in enumerate(spatial_axes)}
    mode = torch.onnx.TrainingMode.EVAL if fold_bn else torch.onnx.TrainingMode.PRESERVE
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, tuple(args), buf, opset_version=OPSET, do_constant_folding=True,
                          training=mode, input_names=input_names, output_names=output_names,
                          dynamic_axes=dyn)
    m = simplify(_strip_identity(onnx.load_from_string(buf.getvalue())), assume_pads)
    del m.graph.value_info[:]
    for v in list(m.graph.input) + list(m.graph.output):
        d = v.type.tensor_type.shape.dim
        if len(d) >= 4 and d[0].dim_param:
            d[0].dim_value = 1
    m.producer_name, m.producer_version = "qsmcore-twins", "1"
    data = m.SerializeToString()
    with open(path, "wb") as fh:
        fh.write(data)
    return data


def describe(path):
    m = onnx.load(path)
    g = m.graph
    inits = {i.name for i in g.initializer}
    n_par = sum(math.prod(i.dims) for i in g.initializer)

    def dims(v):
        return [d.dim_param if d.dim_param else d.dim_value for d in v.type.tensor_type.shape.dim]

    hist = collections.Counter(n.op_type for n in g.node)
    data = open(path, "rb").read()
    return dict(
        bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), params=n_par,
        opset=max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
        ops=dict(sorted(hist.items())),
        inputs=[dict(name=v.name, shape=dims(v)) for v in g.input if v.name not in inits],
        outputs=[dict(name=v.name, shape=dims(v)) for v in g.output])


def vol(c, shape):
    return torch.randn(1, c, *shape)
