#!/usr/bin/env python3
"""Every document a code comment cites must exist in docs/, with the sections it cites.

Comments cite the project's reference documents by name and section: `models.md §5`,
`memory.md §4.3`, `memory.md §7 M3`, `residency.md §6–§7`, `methods.md §4.1`. A bare name means
docs/<name>; the names checked are the ones docs/ holds for this purpose (NAMES below). For each
citation found in the source trees, docs/<name> must exist and, for each section number, have a
heading that starts with it ("## 4. Tiles…", "### 4.3 Functions…", "### 4.1, 4.2 …"), and for
each requirement (`M2`) a bold "**M2 " item.

    tools/docs/check_citations.py [--docs DIR] [ROOT…]     (default: docs/, and src include tools
                                                              tests python cmake)
Prints every broken citation with its file and line; exits 1 if there is one. Run by the test
DocsAreCurrent (tests/cli/docs_current_test.cpp).
"""
import os
import re
import sys

NAMES = ("models", "physics", "memory", "residency", "slurm", "methods")
CITE = re.compile(r"\b(" + "|".join(NAMES) + r")\.md")
# What may follow a name: section numbers and requirement ids, joined by commas, dashes or "and".
NEXT = re.compile(r"\s*(?:,|–|-|and|&)?\s*(§\s?[0-9]+(?:\.[0-9]+)*|M[0-9]+)\b")
HEADING = re.compile(r"^#+\s+((?:[0-9]+(?:\.[0-9]+)*\.?(?:,\s*)?)+)")
SOURCES = (".h", ".hpp", ".cpp", ".inc", ".c", ".py", ".sh", ".js", ".cmake", ".txt", ".tsv")


def sections_of(path):
    """Section numbers ("4", "4.3") and requirement ids ("M2") a document defines."""
    found = set()
    in_block = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_block = not in_block
            if in_block:
                continue
            m = HEADING.match(line)
            if m:
                found.update(n.strip().rstrip(".") for n in m.group(1).split(",") if n.strip())
            found.update(re.findall(r"\*\*(M[0-9]+)\b", line))
    return found


def citations(roots):
    """(file, line number, name, [sections]) for every citation under the roots."""
    for root in roots:
        for folder, _, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith(SOURCES) and name not in ("CMakeLists.txt", "make"):
                    continue
                path = os.path.join(folder, name)
                try:
                    text = open(path, encoding="utf-8").read()
                except (UnicodeDecodeError, OSError):
                    continue
                for number, line in enumerate(text.splitlines(), 1):
                    for m in CITE.finditer(line):
                        rest, secs = line[m.end():], []
                        while True:
                            n = NEXT.match(rest)
                            if not n:
                                break
                            secs.append(n.group(1).replace("§", "").strip())
                            rest = rest[n.end():]
                        yield path, number, m.group(1), secs


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    docs = os.path.join(repo, "docs")
    if argv[:1] == ["--docs"]:
        docs, argv = argv[1], argv[2:]
    roots = argv or [os.path.join(repo, d) for d in ("src", "include", "tools", "tests", "python", "cmake")]
    known, broken, count = {}, [], 0
    for path, number, name, secs in citations(roots):
        count += 1
        doc = os.path.join(docs, name + ".md")
        if name not in known:
            known[name] = sections_of(doc) if os.path.exists(doc) else None
        where = f"{os.path.relpath(path, repo)}:{number}"
        if known[name] is None:
            broken.append(f"{where}: cites {name}.md, which docs/ does not have")
            continue
        for s in secs:
            if s not in known[name]:
                label = s if s.startswith("M") else "§" + s
                broken.append(f"{where}: cites {name}.md {label}, which docs/{name}.md has no heading for")
    for b in broken:
        print(b, file=sys.stderr)
    print(f"{count} citations of {', '.join(n + '.md' for n in NAMES)}; {len(broken)} broken", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
