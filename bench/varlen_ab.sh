#!/usr/bin/env bash
# varlen_ab.sh - the varlen schedules of the sm_90a kernel side by side on one GPU: static round-robin (the default)
# against the dynamic longest-first schedule (FAJIT_VARLEN_SCHED=lpt, src/codegen/sched.c), interleaved A B A B in
# fresh processes (the context reads the variable when it is made). The batch is issue 20's: 24 documents of 200-6000
# tokens, T ~ 68k (bench/variants_compare.py doc_lengths, seed 0), Hq32/Hkv8; D128 causal, D128 non-causal, D64
# causal. One line per run as it finishes: side, round, then fagen bench's line (config, shape, median ms, min ms,
# TFLOP/s, ..., and the kernel that ran: "... varlen varlenk [lpt] (sm_90a decode variant)"). About 1-2 minutes.
#   usage: bench/varlen_ab.sh [FAGEN]          (default build/tools/fagen/fagen; ROUNDS=N for more rounds)
set -u
FAGEN=${1:-build/tools/fagen/fagen}
ROUNDS=${ROUNDS:-2}
lens=$(cd "$(dirname "$0")" && python3 -c 'import variants_compare as v; print(",".join(map(str, v.doc_lengths())))')
echo "lengths (T = $(python3 -c "print(sum([$lens]))")): $lens"
cases=("--headdim 128 --causal" "--headdim 128" "--headdim 64 --causal")
for c in "${cases[@]}"; do
    echo "== $c --heads 32 --heads-kv 8"
    for round in $(seq 1 "$ROUNDS"); do
        for side in static lpt; do
            # shellcheck disable=SC2086
            line=$(FAJIT_VARLEN_SCHED=$side "$FAGEN" bench --varlen "$lens" --heads 32 --heads-kv 8 $c --reps 30 2>&1 |
                   grep -E "^sm_|fagen:|rror" | head -1)
            printf '%-6s r%d  %s\n' "$side" "$round" "$line"
        done
    done
done
