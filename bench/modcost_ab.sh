#!/usr/bin/env bash
# modcost_ab.sh - issue 20's score-modification costs (softcap, ALiBi) A/B on one GPU, interleaved (A B A B, as
# bench/ab.sh: the disk cache off, so no build reads another's cubins). Builds fagen four ways from this tree
# (fagen target only, in parallel, ~20 s on 16 cores), checks the knobbed builds' numerics with fagen check (one
# odd causal shape per variant), then times causal bf16 B2 N8192 sm_90a: plain D128 / D256, softcap 50 D128 / D256,
# ALiBi D128. Prints each line as it is measured; under 3 minutes on an H100.
#   builds:  old  -DFJ_ALIBI_FOLD=0                         ALiBi as on main (an add per column + FMA per score)
#            new  defaults                                  ALiBi folded: one FMA per score (mask.c)
#            k1   -DFJ_ALIBI_LOOKAHEAD=32 -DFJ_SOFTCAP_SOFT_EXP2=1   m set up to 32 above the max (mask.h); 1 of 8
#                                                                   softcap exponentials on the FMA units (sm90.c)
#            k2   -DFJ_ALIBI_LOOKAHEAD=64 -DFJ_SOFTCAP_SOFT_EXP2=2   the same, 64 and 2 of 8
#   Plain kernels are the same in all four (scripts/plain-ptx-diff.sh); softcap's are the same in old and new.
#   usage: bench/modcost_ab.sh [OUTDIR]       (default /tmp/modcost-ab; builds go in OUTDIR/build-*)
set -u
cd "$(dirname "$0")/.." || exit 2
out=${1:-/tmp/modcost-ab}
mkdir -p "$out"
export FAJIT_CACHE=0
# shellcheck source=bench/ab_builds.sh
source bench/ab_builds.sh
ab_build_all "$out" fagen old=-DFJ_ALIBI_FOLD=0 new= "k1=-DFJ_ALIBI_LOOKAHEAD=32 -DFJ_SOFTCAP_SOFT_EXP2=1" \
    "k2=-DFJ_ALIBI_LOOKAHEAD=64 -DFJ_SOFTCAP_SOFT_EXP2=2" || exit 2
fg() { ab_fagen "$@"; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

echo "== numerics: fagen check, causal B1 H16, bf16 + f16 (the last line of each): ALiBi Nq = Nk = 1000 and Nq 300 Nk 1000,"
echo "   softcap Nq 300 Nk 1000"
for b in new k1 k2; do
    for m in "--alibi" "--softcap 50"; do
        for s in "--seqlen-q 1000 --seqlen-k 1000" "--seqlen-q 300 --seqlen-k 1000"; do
            [ "$m" = "--softcap 50" ] && [ "${s#*q 1000}" != "$s" ] && continue
            for dt in bf16 f16; do
                # shellcheck disable=SC2086
                r=$(fg $b check --arch sm_90a --dtype $dt --headdim 128 --causal $m --batch 1 --heads-q 16 --heads-kv 16 \
                    $s 2>&1 | tail -1)
                printf 'check %-3s %-12s %-29s %s  %s\n' "$b" "$m" "$s" "$dt" "$r"
            done
        done
    done
done

echo "== bench: TFLOP/s (fagen bench, median of 20; two rounds interleaved)"
bench() { # build, flags...
    local line
    # shellcheck disable=SC2086
    line=$(fg "$1" bench --arch sm_90a --untuned --reps 20 --causal --batch 2 --seqlen 8192 "${@:2}" 2>&1 |
        grep -E "^sm_|fagen:" | head -1)
    printf '%-3s %-38s %s\n' "$1" "${*:2}" "$line"
}
for round in 1 2; do
    echo "-- round $round"
    bench new --headdim 128 --heads 16
    for b in old new k1 k2; do bench $b --headdim 128 --heads 16 --alibi; done
    for b in new k1 k2; do bench $b --headdim 128 --heads 16 --softcap 50; done
    bench new --headdim 256 --heads 8
    for b in new k1 k2; do bench $b --headdim 256 --heads 8 --softcap 50; done
done
