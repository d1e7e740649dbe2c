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
set -u
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
    for round in 1 2; do
        for roll in off on; do
            # shellcheck disable=SC2086 # the shape is words
            bench $shape --roll $roll
        done
    done
done
echo "== done in $(($(date +%s) - start)) s"
