#!/usr/bin/env bash
# compile_ab.sh - issue 23's "faster cold compile" A/B on a GPU machine, one build: the sm_90a default kernels of
# D 64 / 128 / 256 x non-causal / causal (BF16) with the consumers' KV loop unrolled (roll off, the default) and
# rolled (--roll on, one body for every stage). Prints, as it goes:
#   1. the cold compile of each: `fagen bench --latency` in new processes with FAJIT_PREBUILT=0, a fresh fajit
#      cache directory and the driver's JIT cache off (CUDA_CACHE_DISABLE=1, fresh CUDA_CACHE_PATH): its "first
#      kernel" line is the non-causal kernel (generate, compiler load, compile, load), its "second kernel" line
#      the causal one (compiler loaded);
#   2. their speed: `fagen bench --untuned` lines (N 4096, and N 16384 for D128), unrolled and rolled
#      interleaved A B A B, each a new process on one fresh cache directory (compiled once, then disk hits).
# Whole lines of fagen's output (the config text says " roll" for the rolled kernels); nothing is parsed.
# About 2-3 minutes on an H100 (each command is cut at 60 s).
#   usage: bench/compile_ab.sh [fagen, default build/tools/fagen/fagen]
#
# --local [N] [BUILD]: no GPU - where one cold compile of the D128 sm_90a default (both masks, roll off / on) goes,
# the median of N (default 5) new processes of $BUILD/bench_cold_breakdown (bench/cold_breakdown.c: PTX generation,
# compiler load, the library's compile (NVRTC: front end + ptxas), NVRTC's front end alone, fajit's disk stores),
# then standalone `ptxas -arch=sm_90a -O3` on the same PTX (CPU time, user + sys, median of N; $PTXAS_OPTS instead
# of -O3 when set, e.g. PTXAS_OPTS="-O1"; the library's compile takes them from FAJIT_PTXAS_OPTS).
# CPU times are steadier than wall on a shared machine. cuModuleLoadData is not timed (it needs a GPU).
set -u
if [ "${1:-}" = --local ]; then
    n=${2:-5} build=${3:-build}
    tool=$build/bench_cold_breakdown fagen=$build/tools/fagen/fagen
    if [ ! -x "$tool" ] || [ ! -x "$fagen" ]; then echo "compile_ab.sh: build $tool and $fagen first"; exit 2; fi
    work=$(mktemp -d /tmp/fajit-compile-local-XXXXXX)
    trap 'rm -rf "$work"' EXIT
    median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
    field() { grep -oE " $1=[0-9.]+" "$2" | cut -d= -f2 | median; } # key, file of RESULT lines
    printf "%-14s %8s %8s %9s %9s %9s %9s %8s %8s %8s\n" "D128 sm_90a" "PTX KB" "ptx ms" "load ms" "compile" \
        "cpu ms" "frontend" "ptxas" "store ms" "standalone"
    for roll in off on; do for causal in "" --causal; do
        name="roll $roll${causal:+ causal}" res=$work/res-$roll$causal
        for _ in $(seq "$n"); do "$tool" --headdim 128 --roll "$roll" $causal | grep "^RESULT" >>"$res" || exit 1; done
        "$fagen" ptx --arch sm_90a --headdim 128 --roll "$roll" $causal -o "$work/k.ptx" || exit 1
        for _ in $(seq "$n"); do
            # shellcheck disable=SC2086 # the options are words
            /usr/bin/time -o "$work/t" -f "%U %S" ptxas -arch=sm_90a ${PTXAS_OPTS:--O3} "$work/k.ptx" -o "$work/k.cubin"
            awk '{printf "%.0f\n", ($1 + $2) * 1000}' "$work/t" >>"$work/ptxas-$roll$causal"
        done
        cpu=$(field compile_again_cpu "$res") fe=$(field front_end_cpu "$res")
        printf "%-14s %8.1f %8.2f %9.1f %9.0f %9.0f %9.0f %8.0f %8.1f %8.0f\n" "$name" \
            "$(awk -v b="$(field ptx_bytes "$res")" 'BEGIN {print b / 1024}')" "$(field ptx_ms "$res")" "$(field load_ms "$res")" \
            "$(field compile_first_ms "$res")" "$cpu" "$fe" "$(awk -v a="$cpu" -v b="$fe" 'BEGIN {print a - b}')" "$(field store_ms "$res")" \
            "$(median <"$work/ptxas-$roll$causal")"
    done; done
    echo "columns: PTX size; PTX generation (first call in the process); compiler load (dlopen); the library's first"
    echo "compile (wall ms) and a second one (CPU ms); NVRTC's front end alone (CPU ms); their difference, NVRTC's ptxas;"
    echo "the disk stores (cubin + PTX, fsync'd; wall ms); standalone ptxas ${PTXAS_OPTS:--O3} (CPU ms). Medians of $n."
    exit 0
fi
fagen=${1:-build/tools/fagen/fagen}
[ -x "$fagen" ] || { echo "compile_ab.sh: $fagen is not built (cmake --build build --target fagen)"; exit 2; }
work=$(mktemp -d /tmp/fajit-compile-ab-XXXXXX)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

echo "== cold compile (fagen bench --latency, FAJIT_PREBUILT=0, CUDA_CACHE_DISABLE=1, fresh caches)"
for d in 64 128 256; do
    for roll in off on; do
        echo "-- D$d roll $roll"
        FAJIT_PREBUILT=0 CUDA_CACHE_DISABLE=1 timeout 60 "$fagen" bench --latency --arch sm_90a --headdim "$d" \
            --roll "$roll" 2>&1 | grep -E "^latency of|first kernel|second kernel|fagen:"
    done
done

echo "== speed (fagen bench --untuned --arch sm_90a; A = roll off, B = roll on; A B A B)"
export FAJIT_CACHE_DIR=$work/cache FAJIT_PREBUILT=0
header=0
bench() { # flags...: fagen bench's header once, then its result lines
    local out
    out=$(timeout 60 "$fagen" bench --untuned --arch sm_90a "$@" 2>&1)
    if [ $header = 0 ]; then grep -E "^fagen bench on|^config" <<<"$out"; header=1; fi
    grep -E "^sm_|fagen:" <<<"$out" || echo "(no result line: fagen bench $*)"
}
for shape in "--headdim 64" "--headdim 64 --causal" "--headdim 128" "--headdim 128 --causal" \
    "--headdim 128 --seqlen 16384" "--headdim 128 --seqlen 16384 --causal" "--headdim 256" "--headdim 256 --causal"; do
    for _ in 1 2; do
        for roll in off on; do
            # shellcheck disable=SC2086 # the shape is words
            bench $shape --roll $roll
        done
    done
done
echo "== done in $(($(date +%s) - start)) s"
