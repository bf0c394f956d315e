#!/usr/bin/env bash
# Checks that every `#include "..."` in src/, include/qsmcore/ and python/src/ keeps to the folder
# table of docs/architecture.md ("Folders and what each may use"), and that the table itself is
# bottom-up (a folder may use only folders above it, so the folders cannot form a cycle).
# Prints one line per violation — file:line, the include, the rule — and exits 1 if there is any.
#   bash tools/check_layers.sh               the checkout this script is in
#   bash tools/check_layers.sh --tree DIR    another tree (the negative test runs it on a copy)
#   bash tools/check_layers.sh --graph       prints the folder graph the includes show, per row
# The work is done by tools/check_layers.py (which documents how an include is counted, and the
# map of public headers to the folders implementing them).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/check_layers.py" "$@"
