#!/usr/bin/env bash
# fuzz.sh - run each libFuzzer target of tests/fuzz for a bounded time, one after another on one core
# (-jobs=1 -workers=1), from its seed corpus (tests/fuzz/corpus/<t>) and kept regression inputs
# (tests/fuzz/regress/<t>). A crash, sanitizer report, leak or hang (an input running over 10 s) fails.
#   usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]
#   BUILD_DIR was configured with -DFAJIT_FUZZ=ON (clang); TARGET defaults to every target.
# Per target it prints the executions, coverage and corpus size; what a target found is left in
# BUILD_DIR/fuzz-out/<t>/ (crash-*, leak-*, timeout-*, and fuzz-0.log). Exit 1 when any target found something.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]" >&2; exit 2; }
build=$(cd "$1" && pwd)
seconds=$2
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fagen_args config_text tune_file config cache_entry config_format strides)
src=$(pwd)/tests/fuzz
status=0
for t in "${targets[@]}"; do
    bin=$build/tests/fuzz/fuzz_$t
    [ -x "$bin" ] || { echo "fuzz.sh: $bin missing (configure with -DFAJIT_FUZZ=ON)" >&2; exit 2; }
    out=$build/fuzz-out/$t
    rm -rf "$out"
    mkdir -p "$out/corpus"
    dict=()
    [ -f "$src/$t.dict" ] && dict=(-dict="$src/$t.dict")
    start=$(date +%s)
    rc=0
    (cd "$out" && "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -jobs=1 -workers=1 \
        -print_final_stats=1 -artifact_prefix="$out/" "${dict[@]}" corpus "$src/corpus/$t" "$src/regress/$t" \
        >/dev/null 2>&1) || rc=$?
    log=$out/fuzz-0.log
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
    corp=$(ls "$out/corpus" | wc -l)
    found=$(cd "$out" && ls -d crash-* leak-* timeout-* oom-* slow-unit-* 2>/dev/null | grep -v '^slow-unit' || true)
    printf 'fuzz %-12s %5s s  %10s executions  %s  corpus %s%s\n' "$t" $(( $(date +%s) - start )) "${execs:-?}" \
        "${cov:-cov: ?}" "$corp" "${found:+  FOUND: $found}"
    if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
        status=1
        # the first 5 lines that say why (awk reads the whole log: no SIGPIPE, and no match is no error)
        awk '/ERROR|SUMMARY|fuzz check failed|runtime error/ && n++ < 5 { print "    " $0 }' "$log"
    fi
done
exit "$status"
