#!/usr/bin/env bash
# test.sh - configure, build and run every test in ./build, then list why tests or parts of tests
# were skipped (ctest does not show the output of skipped tests). Extra arguments go to ctest,
# e.g. scripts/test.sh -L ptxas. With CI=true (or FAJIT_TEST_SANITIZE=1; FAJIT_TEST_SANITIZE=0 turns it
# off) it then runs scripts/test-sanitize.sh: the unit and ptxas tests again under ASan + UBSan, and each
# fuzz target for 60 s. Exit status: ctest's, or 1 when the sanitizer half fails.
#   usage: scripts/test.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S . -B build
cmake --build build -j
status=0
ctest --test-dir build --output-on-failure "$@" || status=$?

# Tests print "SKIP: <reason>" (test_support.h); name the test each came from.
log=build/Testing/Temporary/LastTest.log
if [ -f "$log" ]; then
    awk '/^[0-9]+\/[0-9]+ Testing: / { test = $3 }
         /^SKIP: / { if (!shown++) print "\nskipped:"; sub(/^SKIP: /, ""); print "  " test ": " $0 }' "$log"
fi

sanitize=${FAJIT_TEST_SANITIZE:-}
[ -n "$sanitize" ] || { [ "${CI:-}" = true ] && sanitize=1 || sanitize=0; }
if [ "$sanitize" = 1 ]; then
    scripts/test-sanitize.sh || { [ "$status" -ne 0 ] || status=1; }
fi
exit "$status"
