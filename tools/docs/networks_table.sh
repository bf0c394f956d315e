#!/usr/bin/env bash
# Regenerates the README's networks table from `qsm models --json` (tools/docs/networks_table.py).
#   bash tools/docs/networks_table.sh [--check]     QSM=path/to/qsm picks another binary
# The test DocsAreCurrent (tests/cli/docs_current_test.cpp) runs --check.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
qsm="${QSM:-$root/build/qsm}"
[ -x "$qsm" ] || { echo "networks_table.sh: no qsm binary at $qsm (build it, or set QSM)" >&2; exit 2; }
exec /usr/bin/python3 "$root/tools/docs/networks_table.py" "$qsm" "$root/README.md" "$@"
