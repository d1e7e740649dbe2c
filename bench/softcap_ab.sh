#!/usr/bin/env bash
# softcap_ab.sh - softcap's sm_90a tile, builds of this tree differing in -D macros, on one GPU:
#   one    -DFJ_SOFTCAP_SPLIT=0: one copy of the tile (fj_emit_scores: the early row max, then the mask's branch and the
#          rebase's vote branch between the tanh and the ex2 streams; the default before 2026-11-27)
#   split  the default: two copies, the unmasked one a single block (softmax.c fj_emit_softmax_split)
#   se1    split + 1 of 8 exponentials on the FMA units with the degree-3 polynomial (-DFJ_SOFTCAP_SOFT_EXP2=1
#          -DFJ_SOFT_EXP2_DEG=3, soft_exp2.h)
#   se2    the same with 2 of 8
# (bench/results/softcap-sass-vs-fa3-2026-11-27.md: the SASS of each and what they should gain.)
# Two or more fagen builds of this tree (ab_builds.sh), then
#   numerics: fagen check --quick --arch sm_90a --softcap 50 (D64/128/256, causal and not), window + softcap (Gemma 2's
#             pair), the unrolled loop (--roll off) and the serial schedule (--overlap off) of the split build; D128 /
#             D256 causal of se1 / se2; the sm_80 path (unchanged) through fagen check --arch sm_80 --quick
#   speed:    fagen bench --untuned --settle-ms 300 (median, TFLOP/s) of issue 20's softcap cells (causal B2 N8k, D128 H16
#             and D256 H8), D128 non-causal and window (4096, 0) + softcap, the builds interleaved, ROUNDS rounds
# The disk cache is off (FAJIT_CACHE=0) so no build reads the other's cubins.
#   usage: [ROUNDS=2] [SIDES="one split se1 se2"] [DIMS="64 128 256"] [CHECK=off] bench/softcap_ab.sh [OUTDIR]
#          (default OUTDIR /tmp/softcap-ab; SIDES: the builds to time, "split" always built and checked; DIMS: the
#          head dims of the split build's fagen check)
set -u
cd "$(dirname "$0")/.." || exit 2
out=${1:-/tmp/softcap-ab}
export FAJIT_CACHE=0 FAJIT_PREBUILT=0
# shellcheck source=bench/ab_builds.sh
source bench/ab_builds.sh
sides=${SIDES:-one split se1 se2}
specs=(split=)
for s in $sides; do
    case $s in
        one) specs+=("one=-DFJ_SOFTCAP_SPLIT=0") ;;
        se1) specs+=("se1=-DFJ_SOFTCAP_SOFT_EXP2=1 -DFJ_SOFT_EXP2_DEG=3") ;;
        se2) specs+=("se2=-DFJ_SOFTCAP_SOFT_EXP2=2 -DFJ_SOFT_EXP2_DEG=3") ;;
        split) ;;
        *) echo "softcap_ab: unknown side $s (one split se1 se2)" >&2; exit 2 ;;
    esac
done
ab_build_all "$out" fagen "${specs[@]}" || exit 2
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
check() { # build, then fagen check flags
    local b=$1 r
    shift
    r=$(timeout 120 "$(ab_fagen_bin "$b")" check --quick "$@" 2>&1 | tail -1)
    printf 'check %-5s %-58s %s\n' "$b" "$*" "$r"
}
if [ "${CHECK:-on}" != off ]; then
    echo "== numerics: fagen check --quick"
    for a in sm_90a sm_80; do for d in ${DIMS:-64 128 256}; do for m in "" "--causal"; do
        check split --arch "$a" --headdim "$d" $m --softcap 50
    done; done; done
    for d in 128 256; do check split --arch sm_90a --headdim $d --causal --softcap 30 --window 100,0; done
    check split --arch sm_90a --headdim 128 --causal --softcap 50 --roll off
    check split --arch sm_90a --headdim 128 --causal --softcap 50 --overlap off
    for s in $sides; do case $s in se1|se2)
        for d in 128 256; do check "$s" --arch sm_90a --headdim $d --causal --softcap 50; done ;;
    esac; done
fi
echo "== speed: fagen bench --untuned --settle-ms 300 (ms median, ms min, TFLOP/s)"
cells=("--headdim 128 --batch 2 --heads 16 --seqlen 8192 --causal --softcap 50"
       "--headdim 256 --batch 2 --heads 8 --seqlen 8192 --causal --softcap 50"
       "--headdim 128 --batch 2 --heads 16 --seqlen 8192 --softcap 50"
       "--headdim 128 --batch 1 --heads 16 --seqlen 32768 --causal --window 4096,0 --softcap 50")
runs=()
for s in $sides; do runs+=("$s=$(ab_fagen_bin "$s")"); done
ab_bench_rounds "${ROUNDS:-2}" 60 cells "${runs[@]}"
