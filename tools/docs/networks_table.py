#!/usr/bin/env python3
"""The README's table of supported networks, generated from `qsm models --json`.

The table sits between the markers <!-- networks:begin --> and <!-- networks:end --> in
README.md. Run by tools/docs/networks_table.sh (which finds the qsm binary):
    networks_table.py QSM README.md            rewrite the table in place
    networks_table.py QSM README.md --check    exit 1 when the README's table is stale
"""
import json
import subprocess
import sys

BEGIN, END = "<!-- networks:begin -->", "<!-- networks:end -->"


def table(models):
    rows = ["| id | network | stage | inputs → outputs | weights | memory: MB + bytes/voxel | tiles |",
            "|---|---|---|---|---|---|---|"]
    for m in models:
        size = sum(f["bytes"] for f in m["files"])
        weights = f"{size / 1e6:.1f} MB" if size else "?"
        if m["status"] != "Available":
            weights += f" ({m['status'].lower()})"
        mem = m["memory"]
        fixed = (mem["resident_bytes"] + mem["inference_fixed_bytes"]) / 1e6
        figure = f"{fixed:.0f} + {mem['inference_bytes_per_voxel']}" if mem["inference_bytes_per_voxel"] else "—"
        io = ", ".join(m["inputs"]) + " → " + ", ".join(m["outputs"])
        rows.append(f"| `{m['id']}` | {m['name']} | {m['stage']} | {io} | {weights} | {figure} | "
                    f"{'yes' if m['tiled'] else 'no'} |")
    return "\n".join(rows)


def main():
    qsm, readme = sys.argv[1], sys.argv[2]
    check = "--check" in sys.argv[3:]
    models = json.loads(subprocess.run([qsm, "models", "--json"], check=True, capture_output=True,
                                       text=True).stdout)
    text = open(readme, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        sys.exit(f"networks_table.py: {readme} has no {BEGIN} … {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{table(models)}\n{END}{tail}"
    if check:
        if new != text:
            sys.stderr.write("the README's networks table is stale: run bash tools/docs/networks_table.sh\n")
            sys.exit(1)
        return
    if new != text:
        open(readme, "w", encoding="utf-8").write(new)


if __name__ == "__main__":
    main()
