#!/usr/bin/env bash
# Writes docs/cli.md, the command reference, from the qsm binary itself: the hand-written
# introduction (tools/docs/cli_intro.md), then every command's and subcommand's `--help`, found
# from the top-level help down. Generated, so it lists every flag of the build by construction.
#   bash tools/docs/cli_md.sh            # rewrite docs/cli.md from build/qsm
#   bash tools/docs/cli_md.sh --check    # exit 1 (and show the difference) when docs/cli.md is stale
#   bash tools/docs/cli_md.sh --stdout   # print it
# QSM=path/to/qsm picks another binary, CLI_MD=path another document (the test of --check itself).
# The test DocsAreCurrent (tests/cli/docs_current_test.cpp) runs --check.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
qsm="${QSM:-$root/build/qsm}"
doc="${CLI_MD:-$root/docs/cli.md}"
mode="${1:-write}"
[ -x "$qsm" ] || { echo "cli_md.sh: no qsm binary at $qsm (build it, or set QSM)" >&2; exit 2; }

# The help of `qsm ARGS…`, with the program named "qsm" whatever path runs it (CLI11 prints argv[0]).
help_of() { (exec -a qsm "$qsm" "$@" --help); }

# The subcommands a help text lists: the first word of each line under "Subcommands:".
subcommands_of() {
  awk '/^[^ ]/ { in_sub = ($0 == "Subcommands:") ; next } in_sub && /^  [a-z]/ { print $1 }'
}

# Every command path ("onnx run", "batch resume", …) in the order the helps list them.
commands() {
  local prefix="$1" sub
  for sub in $(help_of $prefix | subcommands_of); do
    echo "${prefix:+$prefix }$sub"
    commands "${prefix:+$prefix }$sub"
  done
}

generate() {
  cat "$root/tools/docs/cli_intro.md"
  local all
  all="$(commands "")"
  echo
  echo "## Commands"
  echo
  while IFS= read -r c; do
    echo "- [\`qsm $c\`](#qsm-${c// /-})"
  done <<<"$all"
  echo
  echo "## qsm"
  echo
  echo '```text'
  help_of
  echo '```'
  while IFS= read -r c; do
    echo
    echo "## qsm $c"
    echo
    echo '```text'
    # shellcheck disable=SC2086
    help_of $c
    echo '```'
  done <<<"$all"
}

case "$mode" in
  write) generate >"$doc.tmp" && mv "$doc.tmp" "$doc" ;;
  --stdout) generate ;;
  --check)
    if ! diff -u "$doc" <(generate) >&2; then
      echo "docs/cli.md is stale: run bash tools/docs/cli_md.sh" >&2
      exit 1
    fi ;;
  *) echo "usage: cli_md.sh [--check|--stdout]" >&2; exit 2 ;;
esac
