#!/usr/bin/env bash
# The Python package, offline: installs the dependencies and builds the Release tree
# (tools/setup.sh, which also builds the extension), then creates build/venv with Debian's
# python3 and --system-site-packages (it sees Debian's numpy, nibabel and pytest) and installs
# qsmcore into it from the module already built in build/ (no download, no second build).
# Afterwards: build/venv/bin/python -c "import qsmcore".
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# The target list is read whole before it is searched: with pipefail, `ninja … | grep -q`
# fails whenever grep exits at its match before ninja has written the rest (SIGPIPE).
targets=$(ninja -C build -t targets all 2>/dev/null || true)
if ! grep -q '^qsmcore_python:' <<<"$targets"; then
  echo "tools/python.sh: build/ has no Python module (QSM_BUILD_PYTHON is off: python3-pybind11 or python3-dev missing?)" >&2
  exit 1
fi
ninja -C build qsmcore_python >/dev/null  # a no-op after setup.sh's full build
[ -x build/venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages build/venv
QSMCORE_BUILD_DIR="$PWD/build" build/venv/bin/python -m pip install -q --no-index --no-build-isolation \
  --disable-pip-version-check --root-user-action=ignore .
build/venv/bin/python -c "import qsmcore; print('qsmcore', qsmcore.__version__, 'in', qsmcore.__file__)"
