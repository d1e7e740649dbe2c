#!/usr/bin/env bash
# ab.sh - A/B two fagen builds on the same GPU in one run, interleaved (A B A B) to cancel clock drift.
# Prints one line per run: label, config, TFLOP/s. The disk cache is off so neither reads the other's cubins.
#   usage: bench/ab.sh FAGEN_A FAGEN_B "bench flags" ["bench flags" ...]
set -u
A=$1 B=$2
shift 2
export FAJIT_CACHE=0
for flags in "$@"; do
    for round in 1 2; do
        for side in A B; do
            bin=$A; [ $side = B ] && bin=$B
            # shellcheck disable=SC2086
            line=$("$bin" bench --reps 20 $flags 2>&1 | grep -E "^sm_|fagen:" | head -1)
            printf '%s r%d  %s\n' "$side" "$round" "$line"
        done
    done
done
