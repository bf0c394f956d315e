"""Turns graph inputs that feed shape-like operator inputs into initializers, in place.

qsmcore plans a model per set of input *shapes*: operator inputs that decide output shapes
(Reshape's shape, Slice's starts/ends/axes/steps, Pad's pads, Resize's scales/sizes, ...) must be
plan-time constants (initializers, Constant nodes, or values folded from shapes). The ONNX node
test cases feed them as graph inputs, so each such input is frozen to its test_data_set_0 value
(which is what a real model would carry as an initializer); the input_N.pb files are renumbered
to match. The change is recorded in the case folder's frozen_inputs.txt. A case whose data sets
disagree on a frozen value is left alone (it then fails in the test, visibly).

Usage: freeze_const_inputs.py NODE_DIR
"""
import os
import sys

import onnx
from onnx import numpy_helper

# op type -> indices of inputs that must be constants (mirrors OpDef::const_inputs).
CONST_INPUTS = {
    "Reshape": [1], "Expand": [1], "Tile": [1], "Slice": [1, 2, 3, 4], "Pad": [1], "Split": [1],
    "Squeeze": [1], "Unsqueeze": [1], "ReduceSum": [1], "ReduceMean": [1], "ConstantOfShape": [0],
    "Resize": [1, 2, 3], "Upsample": [1],
}


def freeze_case(case_dir):
    path = os.path.join(case_dir, "model.onnx")
    model = onnx.load(path)
    g = model.graph
    init_names = {t.name for t in g.initializer}
    inputs = [i.name for i in g.input if i.name not in init_names]
    wanted = set()
    for node in g.node:
        for k in CONST_INPUTS.get(node.op_type, []):
            if k < len(node.input) and node.input[k] in inputs:
                wanted.add(node.input[k])
    if not wanted:
        return []
    sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_"))
    values = {}
    for name in wanted:
        idx = inputs.index(name)
        arrays = [numpy_helper.to_array(onnx.load_tensor(os.path.join(case_dir, s, f"input_{idx}.pb"))) for s in sets]
        if any(a.shape != arrays[0].shape or (a != arrays[0]).any() for a in arrays[1:]):
            return []
        values[name] = arrays[0]
    for name, arr in values.items():
        g.initializer.append(numpy_helper.from_array(arr, name))
    kept = [n for n in inputs if n not in wanted]
    # Remove the frozen graph inputs and renumber each data set's input files.
    for vi in [v for v in g.input if v.name in wanted]:
        g.input.remove(vi)
    for s in sets:
        d = os.path.join(case_dir, s)
        blobs = {}
        for i, n in enumerate(inputs):
            f = os.path.join(d, f"input_{i}.pb")
            with open(f, "rb") as fh:
                blobs[n] = fh.read()
            os.remove(f)
        for i, n in enumerate(kept):
            with open(os.path.join(d, f"input_{i}.pb"), "wb") as fh:
                fh.write(blobs[n])
    onnx.save(model, path)
    with open(os.path.join(case_dir, "frozen_inputs.txt"), "w") as fh:
        fh.write("".join(f"{n}\n" for n in sorted(wanted)))
    return sorted(wanted)


def main():
    root = sys.argv[1]
    count = 0
    for case in sorted(os.listdir(root)):
        d = os.path.join(root, case)
        if os.path.isfile(os.path.join(d, "model.onnx")) and freeze_case(d):
            count += 1
    print(f"froze shape-like inputs of {count} cases in {root}")


if __name__ == "__main__":
    main()
