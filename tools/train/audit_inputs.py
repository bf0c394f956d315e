"""Proves which files feed training (issue 53): runs a tiny `train.py --data mix` (the atlas cache
rebuilt from scratch in a temporary folder) under a Python audit hook that records every file
opened, then lists them and fails if any is Colin27-derived (ch2*, aal*, brodmann*) or comes from
the held-out heads' folder.

  /usr/bin/python3 tools/train/audit_inputs.py
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
opened = set()


def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        opened.add(os.path.abspath(os.fsdecode(args[0])))


def main():
    import synth_anatomy
    import train

    tmp = tempfile.mkdtemp()
    synth_anatomy.CACHE = os.path.join(tmp, "canon.npz")  # force a rebuild from the atlases
    sys.argv = ["train.py", "--out", os.path.join(tmp, "run"), "--data", "mix", "--pool", "3", "--iters", "40",
                "--stop-after", "2", "--threads", "1", "--eval-every", "1000"]
    sys.addaudithook(hook)
    train.main()
    data = sorted(p for p in opened if not p.endswith((".py", ".pyc", ".so")) and "/site-packages/" not in p
                  and "/dist-packages/" not in p and not p.startswith(("/usr/lib/python", "/proc", "/sys", "/dev")))
    print("files opened by a train.py --data mix run (besides Python modules):")
    for p in data:
        print("  " + p)
    bad = [p for p in data if os.path.basename(p).lower().startswith(("ch2", "aal", "brodmann")) or "heldout" in p]
    if bad:
        raise SystemExit(f"held-out input reached training: {bad}")
    print("OK: no Colin27-derived file (ch2*, aal*, brodmann*) and nothing from the held-out heads")


if __name__ == "__main__":
    main()
