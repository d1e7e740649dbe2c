#!/usr/bin/env bash
# test-sanitize.sh - the sanitizer and fuzzing half of the tests (scripts/test.sh runs it under CI=true):
#   1. build build-san with clang, AddressSanitizer + UndefinedBehaviorSanitizer with
#      -fno-sanitize-recover=all (any report fails), and the libFuzzer targets of tests/fuzz
#   2. ctest -L 'unit|ptxas' there (FAJIT_SANITIZE_LABELS; the kept fuzz regression inputs are unit tests)
#   3. each fuzz target for FAJIT_FUZZ_SECONDS seconds (default 60) on one core (scripts/fuzz.sh)
# Needs clang with libFuzzer (scripts/setup-deps.sh installs clang and libclang-rt-dev when CI=true or
# FAJIT_TEST_SANITIZE=1). Prints how long each step took. Exit status: 0 when all three pass.
#   usage: scripts/test-sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== sanitize: %s (%d s so far)\n' "$1" "$SECONDS"; }
# halt on the first report of any kind; the closed CUDA libraries' own allocations are not leaks of ours
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$(pwd)/tests/sanitizer/lsan.supp:print_suppressions=0"

step "configure and build build-san (clang, address,undefined, fuzz targets)"
CC=clang cmake -S . -B build-san -DFAJIT_SANITIZE=address,undefined -DFAJIT_FUZZ=ON -DFAJIT_PREBUILT=OFF >/dev/null
cmake --build build-san -j "$(nproc)" >/dev/null
t_build=$SECONDS

labels=${FAJIT_SANITIZE_LABELS:-unit|ptxas}
step "tests labelled $labels under ASan + UBSan"
status=0
ctest --test-dir build-san --output-on-failure -j "${FAJIT_TEST_JOBS:-$(nproc)}" -L "$labels" || status=1
t_tests=$((SECONDS - t_build))

step "fuzz targets, ${FAJIT_FUZZ_SECONDS:-60} s each"
scripts/fuzz.sh build-san "${FAJIT_FUZZ_SECONDS:-60}" || status=1
t_fuzz=$((SECONDS - t_build - t_tests))

printf '\nsanitize: build %d s, tests %d s, fuzzing %d s, total %d s: %s\n' "$t_build" "$t_tests" "$t_fuzz" \
    "$SECONDS" "$([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit "$status"
