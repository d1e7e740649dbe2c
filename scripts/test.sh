#!/usr/bin/env bash
# test.sh - configure, build and run every test in ./build, then list why tests or parts of tests
# were skipped (ctest does not show the output of skipped tests). Extra arguments go to ctest,
# e.g. scripts/test.sh -L ptxas. Exit status: ctest's.
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
exit "$status"
