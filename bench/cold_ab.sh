#!/usr/bin/env bash
# cold_ab.sh - issue 23's last item on one GPU build: is the rolled sm_90a KV loop (config roll, `--roll on`; the
# first KV tile folded into the body) as fast as the unrolled default, and how long is its cold compile?
#   A = roll off (the default), B = roll on, and C = roll on with FAJIT_PTXAS_OPTS=$PTXAS_OPTS when that is set
#   (compile.h's accepted ptxas options, e.g. PTXAS_OPTS="-O1").
#   1. speed: `fagen bench` of the sm_90a defaults D 64/128/256 x non-causal/causal x N 4096/16384 (BF16,
#      B*N = 16384, H*D = 2048), A B [C] interleaved, $REPS rounds (default 3), each a new process; every arm
#      compiled by the library (FAJIT_PREBUILT=0) into one fresh cache directory, so each kernel is compiled once
#      and then a disk hit. Table: the median TFLOP/s of each arm, B (and C) against A in %, and A's spread
#      (max - min over the rounds, % of its median) as the noise to read the differences against.
#   2. cold compile: `fagen bench --latency --arch sm_90a --headdim 128` (it makes a fresh fajit cache directory,
#      and sets CUDA_CACHE_DISABLE=1 with a fresh CUDA_CACHE_PATH in its child; FAJIT_PREBUILT=0 here so the
#      default is compiled, not taken from the library) A B [C] interleaved, $LAT_REPS times (default 5): the
#      median of "first kernel" (new process: generate, load the compiler, compile, load; non-causal) and "second
#      kernel" (the compiler loaded; causal), min and max.
# About 3 minutes on an H100 (16 cores) from a tree built by `OUT=... bench/run_gpu.sh build` (with C about 4.5);
# each command is cut at 60 s. The raw lines go to $OUT/cold_ab.log (default /tmp/cold_ab.log).
#   usage: [PTXAS_OPTS=...] [REPS=3] [LAT_REPS=5] [OUT=dir] bench/cold_ab.sh [fagen, default build/tools/fagen/fagen]
set -u
fagen=${1:-build/tools/fagen/fagen}
[ -x "$fagen" ] || { echo "cold_ab.sh: $fagen is not built (OUT=... bench/run_gpu.sh build)"; exit 2; }
reps=${REPS:-3} lat_reps=${LAT_REPS:-5}
log=${OUT:-/tmp}/cold_ab.log
work=$(mktemp -d /tmp/fajit-cold-ab-XXXXXX)
trap 'rm -rf "$work"' EXIT
: >"$log"
start=$(date +%s)
arms="A B"
[ -n "${PTXAS_OPTS:-}" ] && arms="A B C"
export FAJIT_PREBUILT=0 FAJIT_CACHE_DIR=$work/cache

# run ARM CMD...: CMD with the arm's loop shape (and C's ptxas options); its output appended to the log and printed
run() {
    local arm=$1 out roll=on opts=""
    shift
    [ "$arm" = A ] && roll=off
    [ "$arm" = C ] && opts=$PTXAS_OPTS
    if [ -n "$opts" ]; then out=$(FAJIT_PTXAS_OPTS=$opts timeout 60 "$@" --roll $roll 2>&1)
    else out=$(timeout 60 "$@" --roll $roll 2>&1); fi
    printf '== %s: %s%s --roll %s\n%s\n' "$arm" "${opts:+FAJIT_PTXAS_OPTS=\"$opts\" }" "$*" "$roll" "$out" >>"$log"
    printf '%s\n' "$out"
}

# TFLOP/s of a `fagen bench` result line: the third number after the shape's "D<d>[ causal][ bnhd]"
tflops() {
    awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^D[0-9]+$/ && $(i - 1) ~ /^N[0-9]+\/[0-9]+$/) {
               j = i + 1; while ($j == "causal" || $j == "bnhd") j++
               if ($(j + 2) ~ /^[0-9.]+$/) { print $(j + 2); exit } } }'
}

# "median min max" of the numbers in FILE (one a line) printed with FORMAT; "- - -" when there are none
stats() {
    [ -s "$1" ] || { echo "- - -"; return; }
    sort -n "$1" | awk -v f="$2" '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
        printf f " " f " " f "\n", m, a[1], a[NR] }'
}

# the delta of x against a in %, or -
pct() { awk -v x="$1" -v a="$2" 'BEGIN { if (x == "-" || a == "-" || a == 0) print "-"; else printf "%+.1f", 100 * (x - a) / a }'; }

echo "== speed: fagen bench --arch sm_90a (BF16, B*N 16384, H*D 2048); A = roll off, B = roll on${PTXAS_OPTS:+, C = roll on + FAJIT_PTXAS_OPTS=\"$PTXAS_OPTS\"}; $reps rounds"
shapes=()
for d in 64 128 256; do for n in 4096 16384; do for c in "" " --causal"; do
    shapes+=("--headdim $d --seqlen $n$c")
done; done; done
for shape in "${shapes[@]}"; do
    key=$(echo "$shape" | tr -d ' -')
    for _ in $(seq "$reps"); do
        for arm in $arms; do
            # shellcheck disable=SC2086 # the shape is words
            line=$(run "$arm" "$fagen" bench --arch sm_90a $shape | grep -E "^sm_90a" | tail -n 1)
            t=$(tflops <<<"$line")
            [ -n "$t" ] && echo "$t" >>"$work/$key.$arm"
            [ -n "$t" ] || echo "   (no result for $arm: fagen bench $shape; see $log)"
            if [ "$arm" != A ] && [ -n "$line" ] && ! grep -q " roll " <<<"$line"; then
                echo "   ($arm ran without the rolled loop: $line)"
            fi
        done
    done
done
printf "\n%-26s %7s %7s %7s %7s %7s %9s\n" "shape" "A" "B" "B/A %" "C" "C/A %" "A spread"
for shape in "${shapes[@]}"; do
    key=$(echo "$shape" | tr -d ' -')
    read -r a amin amax < <(stats "$work/$key.A" %.1f)
    read -r b _ _ < <(stats "$work/$key.B" %.1f)
    read -r c _ _ < <(stats "$work/$key.C" %.1f)
    spread=$(awk -v a="$a" -v lo="$amin" -v hi="$amax" 'BEGIN { if (a == "-" || a == 0) print "-"; else printf "%.1f%%", 100 * (hi - lo) / a }')
    label=$(echo "$shape" | sed -e 's/--headdim /D/' -e 's/ --seqlen / N/' -e 's/ --causal/ causal/')
    printf "%-26s %7s %7s %7s %7s %7s %9s\n" "$label" "$a" "$b" "$(pct "$b" "$a")" "$c" "$(pct "$c" "$a")" "$spread"
done

echo
echo "== cold compile of the D128 sm_90a default: fagen bench --latency, FAJIT_PREBUILT=0 (fresh fajit cache, CUDA_CACHE_DISABLE=1: fagen's); $lat_reps rounds"
for _ in $(seq "$lat_reps"); do
    for arm in $arms; do
        out=$(run "$arm" "$fagen" bench --latency --arch sm_90a --headdim 128)
        first=$(grep "first kernel" <<<"$out" | grep -oE "[0-9.]+ ms" | head -n 1 | tr -d ' ms')
        second=$(grep "second kernel" <<<"$out" | grep -oE "[0-9.]+ ms" | head -n 1 | tr -d ' ms')
        [ -n "$first" ] && echo "$first" >>"$work/lat1.$arm"
        [ -n "$second" ] && echo "$second" >>"$work/lat2.$arm"
        [ -n "$first" ] || echo "   (no latency for $arm; see $log)"
    done
done
printf "%-4s %-40s %22s %22s\n" "arm" "" "first kernel ms" "second kernel ms"
printf "%-4s %-40s %22s %22s\n" "" "" "median (min-max)" "median (min-max)"
for arm in $arms; do
    case $arm in A) what="roll off" ;; B) what="roll on" ;; C) what="roll on, FAJIT_PTXAS_OPTS=\"$PTXAS_OPTS\"" ;; esac
    read -r m1 lo1 hi1 < <(stats "$work/lat1.$arm" %.0f)
    read -r m2 lo2 hi2 < <(stats "$work/lat2.$arm" %.0f)
    printf "%-4s %-40s %22s %22s\n" "$arm" "$what" "$m1 ($lo1-$hi1)" "$m2 ($lo2-$hi2)"
done
echo "== done in $(($(date +%s) - start)) s (the raw lines: $log)"
