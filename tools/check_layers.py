#!/usr/bin/python3
"""Checks the folder table of docs/architecture.md ("Folders and what each may use") against the
includes (issue #52). Run through tools/check_layers.sh; see there for the options.

What it reads:
  - the table: rows whose first cell is a folder (`src/X/`, `include/qsmcore/`, `python/`) and
    whose last cell says what it may use: src/ folder names separated by commas, parenthesised
    remarks ignored, plus the words "std" (nothing more), "everything" (any src/ folder above it),
    "include only" (any public header; beyond them only the folders listed beside it) and "—"
    (not C++, not checked);
  - every `#include "..."` in src/, include/qsmcore/ and python/src/ (angle-bracket includes are
    std and third-party libraries; an include inside #if counts like any other).

How an include is counted: `X/...` is folder X (sub-folders such as graph/passes count as their
top folder); `qsmcore/Y.h` is the folder that implements the public header Y (PUBLIC_HEADERS
below); a file named relative to the including file's own directory is its own folder. A file of
include/qsmcore/ is checked as a file of the folder implementing it, and may include public headers
only.

It fails on: an include of a folder the row does not list; an include of a folder's internal
header from outside it, where the folder is used through one header (INTERFACES below); a table row listing a folder that is
not above it (the table is bottom-up, so this keeps it free of cycles); a word it does not know in
"may use"; a public header missing from PUBLIC_HEADERS, or mapped to a folder none of whose
sources includes it (the folder that defines a header's functions includes that header).
"""
import os
import re
import sys

# Public header -> the src/ folder that defines its functions. Kept by hand: a new public header
# must be added here (the check fails until it is), and the mapping is verified against the
# sources (the folder must have a .cpp that includes the header).
PUBLIC_HEADERS = {
    "bgremove.h": "bgremove",
    "demo.h": "networks",
    "dtype.h": "core",
    "error.h": "core",
    "fieldmap.h": "fieldmap",
    "inversion.h": "inversion",
    "masking.h": "masking",
    "measure.h": "measure",
    "memory.h": "core",
    "metrics.h": "physics",
    "model_spec.h": "models",
    "models.h": "models",
    "networks.h": "networks",
    "onnx_model.h": "runtime",
    "phantom.h": "physics",
    "physics.h": "physics",
    "pipeline.h": "pipeline",
    "process_limits.h": "system",
    "relaxometry.h": "relaxometry",
    "residency.h": "residency",
    "scan.h": "scan",
    "tensor.h": "core",
    "tiling.h": "models",
    "unwrap.h": "unwrap",
    "volume.h": "core",
}

# Folders used through one header: code outside the folder includes that header and none other
# of the folder's (the rest is internal to it). docs/architecture.md names them below the table.
INTERFACES = {
    "spill": "spill/spill.h",
}

SECTION = "## Folders and what each may use"
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".inc", ".ipp")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_key(cell):
    """`src/core/` -> core (the words "may use" names); any other folder keeps its path with a
    trailing slash (`include/qsmcore/`, `python/`, the top-level `models/`); else None."""
    m = re.fullmatch(r"`([^`]+)`", cell.strip())
    if not m:
        return None
    path = m.group(1).rstrip("/")
    if path.startswith("src/"):
        return path[len("src/"):]
    return path + "/"


def read_table(doc_path):
    """Rows in table order: [(folder, raw may-use text, line number)]."""
    with open(doc_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == SECTION)
    except StopIteration:
        sys.exit(f"check_layers: {doc_path} has no section '{SECTION}'")
    rows = []
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            if rows:
                break  # the first table of the section ends here
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        key = folder_key(cells[0])
        if key is not None and len(cells) >= 3:
            rows.append((key, cells[-1], i + 1))
    if not rows:
        sys.exit(f"check_layers: no folder rows under '{SECTION}' in {doc_path}")
    return rows


def parse_rules(rows, doc_rel, errors):
    """{folder: (mode, set of allowed folders)}, mode None, 'none' (not checked) or 'public' (the
    public headers, and beyond them only the folders listed)."""
    known = {key for key, _, _ in rows}
    rules, above = {}, []
    for key, text, line in rows:
        words = [w.strip() for w in re.sub(r"\([^)]*\)", "", text).split(",")]
        allowed = set()
        mode = None
        for w in words:
            if w in ("", "std"):
                continue
            if w in ("—", "-"):
                mode = "none"
            elif w == "include only":
                mode = "public"
            elif w == "everything":
                allowed |= {k for k in above if not k.endswith("/")}
            elif w in known:
                if w not in above:
                    errors.append(f"{doc_rel}:{line}: table: `{key}` may use `{w}`, which is not above it "
                                  "(the table is bottom-up; a folder below would make a cycle)")
                allowed.add(w)
            else:
                errors.append(f"{doc_rel}:{line}: table: unknown word '{w}' in what `{key}` may use")
        rules[key] = (mode, allowed)
        above.append(key)
    return rules


def source_files(root, rel_dir):
    base = os.path.join(root, rel_dir)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, name), root)


def includes(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE_RE.match(line)
            if m:
                yield n, m.group(1)


def check_public_map(root, src_files, errors):
    """Every public header mapped, and mapped to a folder one of whose sources includes it."""
    headers = sorted(os.listdir(os.path.join(root, "include/qsmcore")))
    included_by = {}
    for rel in src_files:
        if rel.endswith((".cpp", ".cc")):
            for _, inc in includes(root, rel):
                if inc.startswith("qsmcore/"):
                    included_by.setdefault(inc[len("qsmcore/"):], set()).add(rel.split("/")[1])
    for h in headers:
        if not h.endswith(".h"):
            continue
        if h not in PUBLIC_HEADERS:
            errors.append(f"include/qsmcore/{h}: not in tools/check_layers.py's PUBLIC_HEADERS "
                          "(add the folder that implements it)")
        elif PUBLIC_HEADERS[h] not in included_by.get(h, set()):
            errors.append(f"include/qsmcore/{h}: mapped to `{PUBLIC_HEADERS[h]}`, but no source there includes it "
                          "(fix PUBLIC_HEADERS in tools/check_layers.py)")
    for h in PUBLIC_HEADERS:
        if h not in headers:
            errors.append(f"tools/check_layers.py: PUBLIC_HEADERS names {h}, which include/qsmcore/ lacks")


def describe(rule):
    mode, allowed = rule
    text = ", ".join(sorted(allowed)) or "no other folder"
    return f"the public headers and {text}" if mode == "public" else text


def folder_of_include(root, rel, inc, known):
    """The folder an include counts as, or None when it names nothing we know."""
    if inc.startswith("qsmcore/"):
        return PUBLIC_HEADERS.get(inc[len("qsmcore/"):], "?public")
    if os.path.exists(os.path.join(root, os.path.dirname(rel), inc)):
        return "(own)"
    head = inc.split("/")[0]
    return head if head in known else None


def check_file(root, rel, owner, rules, known, violations):
    mode, allowed = rules[owner]
    is_public = rel.startswith("include/qsmcore/")
    for line, inc in includes(root, rel):
        used = folder_of_include(root, rel, inc, known)
        where = f'{rel}:{line}: #include "{inc}"'
        if used == "(own)" or used == owner:
            continue
        if used is None or used == "?public":
            violations.append(f"{where}: names no folder of the table")
            continue
        if is_public and not inc.startswith("qsmcore/"):
            violations.append(f"{where}: a public header may include public headers only (include/qsmcore/ row)")
            continue
        if mode == "none" or (mode == "public" and inc.startswith("qsmcore/")):
            continue
        if used not in allowed:
            via = f" (qsmcore/{inc.split('/', 1)[1]} is implemented in `{used}`)" if inc.startswith("qsmcore/") else ""
            violations.append(f"{where}: `{owner}` may not use `{used}`{via}; it may use: {describe(rules[owner])}")
        elif used in INTERFACES and inc != INTERFACES[used]:
            violations.append(f"{where}: `{used}` is used through {INTERFACES[used]} only (the rest is internal to it)")


def main(argv):
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    graph = False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--tree" and args:
            root = os.path.abspath(args.pop(0))
        elif a == "--graph":
            graph = True
        else:
            sys.exit(f"usage: check_layers.sh [--tree DIR] [--graph]\n(unknown argument {a})")
    doc_rel = "docs/architecture.md"
    rows = read_table(os.path.join(root, doc_rel))
    errors = []
    rules = parse_rules(rows, doc_rel, errors)
    known = set(rules)
    src_files = list(source_files(root, "src"))
    check_public_map(root, src_files, errors)

    files = []
    for rel in src_files:
        files.append((rel, rel.split("/")[1]))
    for rel in source_files(root, "include/qsmcore"):
        files.append((rel, PUBLIC_HEADERS.get(os.path.basename(rel), "include/qsmcore/")))
    if os.path.isdir(os.path.join(root, "python/src")):
        for rel in source_files(root, "python/src"):
            files.append((rel, "python/"))

    if graph:  # the measured folder graph, for writing the table
        uses = {}
        for rel, owner in files:
            for _, inc in includes(root, rel):
                used = folder_of_include(root, rel, inc, known)
                if used not in (None, "?public", "(own)", owner):
                    uses.setdefault(owner, set()).add(used)
        for key, _, _ in rows:
            print(f"{key}: {', '.join(sorted(uses.get(key, ())))}")
        return 0

    violations = []
    for rel, owner in files:
        if owner not in known:
            violations.append(f"{rel}: folder `{owner}` has no row in the table of {doc_rel}")
            continue
        check_file(root, rel, owner, rules, known, violations)
    for line in errors + violations:
        print(line)
    if errors or violations:
        print(f"check_layers: {len(errors) + len(violations)} violation(s) of the table in {doc_rel}")
        return 1
    print(f"check_layers: {len(files)} files follow the table in {doc_rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
