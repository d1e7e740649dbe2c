#!/usr/bin/env bash
# test.sh - configure, build and run every test in ./build, then list why tests or parts of tests
# were skipped (ctest does not show the output of skipped tests); then the packages: the C package
# installed into a prefix with the example built against it both ways (scripts/check-install.sh), and
# the Python package installed into a fresh virtual environment and tested with pytest
# (scripts/test-python.sh). The build runs $FAJIT_JOBS compilers and ctest $FAJIT_TEST_JOBS tests at once (default:
# nproc each; gpu tests and the few marked RUN_SERIAL in tests/CMakeLists.txt run alone). Extra arguments go
# to ctest, e.g. scripts/test.sh -L unit (the fast tier), and then the package steps are left out
# unless FAJIT_TEST_PACKAGES=1 (FAJIT_TEST_PACKAGES=0 always leaves them out).
# With CI=true (or FAJIT_TEST_SANITIZE=1; FAJIT_TEST_SANITIZE=0 turns it off) it then runs
# scripts/test-sanitize.sh: the unit and ptxas tests again under ASan + UBSan, and each fuzz target for 60 s.
# Exit status: 0 when ctest, every package step and the sanitizer half passed.
#   usage: scripts/test.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S . -B build
cmake --build build -j "${FAJIT_JOBS:-$(nproc)}"
status=0
ctest --test-dir build --output-on-failure -j "${FAJIT_TEST_JOBS:-$(nproc)}" "$@" || status=$?

# Tests print "SKIP: <reason>" (test_support.h); name the test each came from.
log=build/Testing/Temporary/LastTest.log
if [ -f "$log" ]; then
    awk '/^[0-9]+\/[0-9]+ Testing: / { test = $3 }
         /^SKIP: / { if (!shown++) print "\nskipped:"; sub(/^SKIP: /, ""); print "  " test ": " $0 }' "$log"
fi

packages=${FAJIT_TEST_PACKAGES:-$([ $# -eq 0 ] && echo 1 || echo 0)}
if [ "$packages" = 1 ]; then
    echo; echo "== C package: install, examples/ built against it (scripts/check-install.sh)"
    scripts/check-install.sh build || { echo "test.sh: scripts/check-install.sh failed"; status=1; }
    echo; echo "== Python package: fresh venv, pip install ./python, pytest (scripts/test-python.sh)"
    scripts/test-python.sh || { echo "test.sh: scripts/test-python.sh failed"; status=1; }
else
    echo; echo "test.sh: package steps left out (ctest arguments given; FAJIT_TEST_PACKAGES=1 runs them)"
fi
sanitize=${FAJIT_TEST_SANITIZE:-}
[ -n "$sanitize" ] || { [ "${CI:-}" = true ] && sanitize=1 || sanitize=0; }
if [ "$sanitize" = 1 ]; then
    scripts/test-sanitize.sh || { [ "$status" -ne 0 ] || status=1; }
fi
exit "$status"
