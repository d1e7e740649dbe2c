#!/usr/bin/env bash
# first_call.sh - issue 23's latency table: a process's first fajit_attention_forward with every cache empty
# (a fresh fajit cache directory, CUDA_CACHE_DISABLE=1, a fresh CUDA_CACHE_PATH; the OS page cache not
# emptied), for the default config of D 64/128/256 x causal/non-causal (BF16, B4 H16 N4096): with the prebuilt
# kernels (the library's default) and without (FAJIT_PREBUILT=0: compiled, the number before issue 23); a
# disk-cache hit in a new process (FAJIT_PREBUILT=0, the cache the compiling process left); a tuned winner's
# first call (a stand-in runs while it compiles) with the time until it serves, and its disk hit in a new
# process. One process per cell (bench_first_call, bench/first_call.c).
#   usage: bench/first_call.sh [build dir, default build] [extra bench_first_call flags]
set -euo pipefail
build=${1:-build}
shift || true
exe=$build/bench_first_call
[ -x "$exe" ] || { echo "first_call.sh: $exe not built (cmake --build $build --target bench_first_call)"; exit 1; }
work=$(mktemp -d /tmp/fajit-first-call-XXXXXX)
trap 'rm -rf "$work"' EXIT

# run CACHE_DIR [env...] -- flags: one fresh process, a fresh driver JIT cache each time. Prints its RESULT line, or
# "exit=N" when the process failed (its stderr goes to the log): one failing cell must not end the table.
run() {
    local dir=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    local out rc=0
    out=$(env CUDA_CACHE_DISABLE=1 CUDA_CACHE_PATH="$(mktemp -d "$work/cuda-XXXXXX")" FAJIT_CACHE_DIR="$dir" \
        ${envs[@]+"${envs[@]}"} "$exe" "$@") || rc=$?
    if [ $rc -ne 0 ]; then echo "exit=$rc source=FAILED"; else sed -n 's/^RESULT //p' <<<"$out"; fi
}
# the value of key=VALUE in a RESULT line (the fields before ran="...", so a config text cannot match)
field() { sed -n "s/ ran=\".*//; s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }

fmt='%-4s %-9s | %-22s | %-22s | %-14s | %-28s | %-14s\n'
header() {
    printf "$fmt" D mask "first call, prebuilt" "first call, compiled" "disk hit" "tuned: first call / serves" \
        "tuned disk hit"
    printf "$fmt" "" "" "return/sync ms (src)" "return/sync ms (src)" "return ms (src)" "return ms (src) / ms" \
        "return ms (src)"
}
rows=()
header
for d in 64 128 256; do
    for causal in 0 1; do
        mask=$([ "$causal" = 1 ] && echo causal || echo noncausal)
        a=$(run "$work/a-$d-$causal" -- --headdim "$d" --causal "$causal" "$@")
        b=$(run "$work/b-$d-$causal" FAJIT_PREBUILT=0 -- --headdim "$d" --causal "$causal" "$@")
        c=$(run "$work/b-$d-$causal" FAJIT_PREBUILT=0 -- --headdim "$d" --causal "$causal" "$@")
        t=$(run "$work/t-$d-$causal" -- --headdim "$d" --causal "$causal" --tuned "$@")
        u=$(run "$work/t-$d-$causal" -- --headdim "$d" --causal "$causal" --tuned "$@")
        row=$(printf '%-4s %-9s | %7s/%-7s (%-6s) | %7s/%-7s (%-6s) | %6s (%-5s) | %7s (%-8s) / %-7s | %6s (%-5s)' \
            "$d" "$mask" "$(field return_ms "$a")" "$(field sync_ms "$a")" "$(field source "$a")" \
            "$(field return_ms "$b")" "$(field sync_ms "$b")" "$(field source "$b")" \
            "$(field return_ms "$c")" "$(field source "$c")" \
            "$(field return_ms "$t")" "$(field source "$t")" "$(field winner_serves_ms "$t")" \
            "$(field return_ms "$u")" "$(field source "$u")")
        rows+=("$row")
        echo "$row"
        ran_a=$(sed -n 's/.*ran="\(.*\)"/\1/p' <<<"$a")
        ran_t=$(sed -n 's/.*ran="\(.*\)"/\1/p' <<<"$t")
        echo "    d$d $mask: prebuilt ran: $ran_a | tuned first call ran: $ran_t" >&2
    done
done
# the whole table again, last: a log cut to its tail (bench/run_gpu.sh keeps 25 lines of a stage) still holds
# every row (the D64 non-causal row, the first, was lost that way on the H100 on 2026-11-26)
echo "== first-call table (ms)"
header
printf '%s\n' "${rows[@]}"
echo "caches: fajit's disk cache a fresh directory per column group (the disk-hit column reuses the compiled"
echo "column's), CUDA_CACHE_DISABLE=1 with a fresh CUDA_CACHE_PATH per process; the OS page cache not emptied."
