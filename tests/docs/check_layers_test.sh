#!/usr/bin/env bash
# tools/check_layers.sh fails on what it is there to catch (issue #52). It runs on a copy of the
# tree (the table, src/, include/qsmcore/, python/src/): first unchanged, where it must pass, then
# with one wrong thing added at a time, where it must fail naming exactly that thing:
#   1. core including a runtime header (an include its row does not allow, with file:line);
#   2. physics including qsmcore/onnx_model.h (a public header counted as runtime, its implementer);
#   3. the table letting core use runtime (a row naming a folder below it: a cycle);
#   4. a public header the script's map does not know;
#   5. an internal header of a folder used through one header (spill/: spill/spill.h).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
check="$root/tools/check_layers.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0

fresh_copy() {
  rm -rf "$tmp/tree"
  mkdir -p "$tmp/tree/docs" "$tmp/tree/include" "$tmp/tree/python"
  cp "$root/docs/architecture.md" "$tmp/tree/docs/"
  cp -r "$root/src" "$tmp/tree/src"
  cp -r "$root/include/qsmcore" "$tmp/tree/include/qsmcore"
  if [ -d "$root/python/src" ]; then cp -r "$root/python/src" "$tmp/tree/python/src"; fi
}

# expect_failure NAME PATTERN: the check must exit 1, print PATTERN (an extended regex) and report
# exactly one violation.
expect_failure() {
  local name="$1" pattern="$2" out rc=0
  out="$(bash "$check" --tree "$tmp/tree" 2>&1)" || rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "FAIL $name: exit $rc, expected 1"; echo "$out"; failures=$((failures + 1)); return
  fi
  if ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL $name: no line matching: $pattern"; echo "$out"; failures=$((failures + 1)); return
  fi
  if ! grep -q '^check_layers: 1 violation(s)' <<<"$out"; then
    echo "FAIL $name: expected exactly one violation"; echo "$out"; failures=$((failures + 1)); return
  fi
  echo "ok   $name: $(grep -E -- "$pattern" <<<"$out" | head -1)"
}

# 0. The unchanged copy passes (so the failures below come from what each case adds).
fresh_copy
if ! out="$(bash "$check" --tree "$tmp/tree" 2>&1)"; then
  echo "FAIL the unchanged copy: the check fails"; echo "$out"; exit 1
fi
echo "ok   unchanged copy: $out"

# 1. An include of a folder the row does not allow; the line number is the added line's.
fresh_copy
f="$tmp/tree/src/core/error.cpp"
echo '#include "runtime/plan.h"' >>"$f"
n="$(wc -l <"$f")"
expect_failure "core includes runtime" \
  "^src/core/error\.cpp:$n: #include \"runtime/plan\.h\": \`core\` may not use \`runtime\`"

# 2. A public header counts as the folder implementing it.
fresh_copy
f="$tmp/tree/src/physics/units.cpp"
sed -i '0,/^#include "/s//#include "qsmcore\/onnx_model.h"\n#include "/' "$f"
expect_failure "physics includes qsmcore/onnx_model.h" \
  "^src/physics/units\.cpp:[0-9]+: #include \"qsmcore/onnx_model\.h\": \`physics\` may not use \`runtime\` \(qsmcore/onnx_model\.h is implemented in \`runtime\`\)"

# 3. A row naming a folder below it (a cycle) is refused even though no include uses it yet.
fresh_copy
sed -i 's/^\(| `src\/core\/` |.*| \)std |$/\1std, runtime |/' "$tmp/tree/docs/architecture.md"
expect_failure "table lets core use runtime" \
  "^docs/architecture\.md:[0-9]+: table: \`core\` may use \`runtime\`, which is not above it"

# 4. A public header must be mapped to the folder implementing it.
fresh_copy
printf '#pragma once\n' >"$tmp/tree/include/qsmcore/unmapped.h"
expect_failure "unmapped public header" "^include/qsmcore/unmapped\.h: not in tools/check_layers\.py's PUBLIC_HEADERS"

# 5. A folder used through one header: its other headers are internal to it.
fresh_copy
f="$tmp/tree/src/networks/context.cpp"
echo '#include "spill/planner.h"' >>"$f"
n="$(wc -l <"$f")"
expect_failure "networks includes an internal header of spill" \
  "^src/networks/context\.cpp:$n: #include \"spill/planner\.h\": \`spill\` is used through spill/spill\.h only"

if [ "$failures" -ne 0 ]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "check_layers catches all 5 cases"
