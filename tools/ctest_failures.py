#!/usr/bin/python3
"""Prints the output of the tests the last ctest run in a build folder failed, at the end.

    tools/ctest_failures.py BUILD_DIR [LINES]

ctest --output-on-failure prints a failing test's output where it fails, hundreds of tests
above the summary; a CI report keeps only the log's tail (why a wasm.web_tiled_run failure on
CI could not be told from the report). tools/test.sh and .ci/run call this after a failed ctest,
so each failed test's last LINES lines (default 40) are the last thing printed.
"""
import re
import sys
from pathlib import Path


def failures(log: str) -> list[tuple[str, list[str]]]:
    """The tests of ctest's LastTest.log (that run's only: LastTestsFailed.log keeps the failures
    of earlier runs too) that did not pass, each with its output lines."""
    found = []
    for block in re.split(r"^\d+/\d+ Test: ", log, flags=re.M)[1:]:
        name, _, rest = block.partition("\n")
        if re.search(r"^Test Pass", rest, flags=re.M):  # "Test Passed." or "Test Pass Reason:" (a skip)
            continue
        body = rest.split("Output:\n", 1)[-1].split("<end of output>", 1)[0]
        lines = body.splitlines()
        if lines and set(lines[0]) == {"-"}:
            lines = lines[1:]
        found.append((name.strip(), lines))
    return found


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    temporary = Path(sys.argv[1]) / "Testing" / "Temporary"
    keep = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    log_file = temporary / "LastTest.log"
    log = log_file.read_text(errors="replace") if log_file.exists() else ""
    for name, lines in failures(log):
        print(f"==== failed: {name}: the last {min(keep, len(lines))} lines of its output ({log_file})")
        for line in lines[-keep:]:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
