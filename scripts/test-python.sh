#!/usr/bin/env bash
# test-python.sh - the Python package as a user gets it: a fresh virtual environment, `pip install ./python`
# (scikit-build-core runs CMake, which builds libfajit.so into the package), then pytest on python/tests
# from outside the source tree, so the installed package is what is imported. Without a GPU the GPU tests
# skip and say why; without torch the torch tests do. A pytest run that collects no test fails.
#   usage: scripts/test-python.sh [pytest args...]
#   environment:
#     FAJIT_PY_VENV=dir     where the environment goes (default build/py-venv; removed first)
#     FAJIT_PY_OFFLINE=1    no network (the GPU machine): python3 itself, with its scikit-build-core,
#                           cmake, pytest and torch, installs the package with `pip install
#                           --no-build-isolation --no-index --target FAJIT_PY_VENV ./python` and runs
#                           pytest with that directory first on PYTHONPATH (a venv would not see the
#                           packages of a python3 that is itself a venv)
#     FAJIT_TEST_REPORT=f   test_gpu.py appends its per-case errors to f
# Exit status: pytest's (5, nothing collected, is reported and returned as a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
venv=${FAJIT_PY_VENV:-build/py-venv}
case "$venv" in /*) ;; *) venv=$repo/$venv ;; esac
rm -rf "$venv"

if [ "${FAJIT_PY_OFFLINE:-0}" = 1 ]; then
    python3 -m pip install --no-build-isolation --no-index --disable-pip-version-check --target "$venv" ./python
    py=(env PYTHONPATH="$venv${PYTHONPATH:+:$PYTHONPATH}" python3)
else
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 60 --retries 3 ./python pytest
    py=("$venv/bin/python")
fi
"${py[@]}" -c "import fajit, sys; print('test-python: fajit', fajit.__version__, 'from', fajit.__file__, \
'(python', sys.version.split()[0] + ')')"

status=0
(cd "$venv" && "${py[@]}" -m pytest -p no:cacheprovider -ra "$repo/python/tests" "$@") || status=$?
if [ "$status" -eq 5 ]; then
    echo "test-python: pytest collected no tests: that is a failure here" >&2
fi
exit "$status"
