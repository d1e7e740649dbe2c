#!/usr/bin/env bash
# softcap_ab.sh - softcap's row max taken ahead of the tanh (FJ_SOFTCAP_EARLY_MAX=1, softmax.c: the max reduction
# overlaps the tanh.approx instructions on the MUFU) against the max of the capped scores (=0), on one GPU.
# Two fagen builds of this tree (ab_builds.sh), then
#   numerics: fagen check --quick --arch sm_90a --softcap 50 (D64/128/256, causal and not) and window + softcap
#             (Gemma 2's pair) of the new build; the sm_80 path through fagen check --arch sm_80 --quick
#   speed:    fagen bench --untuned --settle-ms 300 (median, TFLOP/s) of issue 20's softcap cells (causal B2 N8k, D128 H16
#             and D256 H8), D128 non-causal and window (4096, 0) + softcap, the builds interleaved, ROUNDS rounds
# The disk cache is off (FAJIT_CACHE=0) so no build reads the other's cubins.
#   usage: [ROUNDS=3] [DIMS="64 128 256"] bench/softcap_ab.sh [OUTDIR]     (default OUTDIR /tmp/softcap-ab; DIMS: the
#          head dims fagen check runs)
set -u
cd "$(dirname "$0")/.." || exit 2
out=${1:-/tmp/softcap-ab}
export FAJIT_CACHE=0 FAJIT_PREBUILT=0
# shellcheck source=bench/ab_builds.sh
source bench/ab_builds.sh
ab_build_all "$out" fagen late=-DFJ_SOFTCAP_EARLY_MAX=0 early= || exit 2
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "== numerics (build early): fagen check --quick"
for a in sm_90a sm_80; do for d in ${DIMS:-64 128 256}; do for m in "" "--causal"; do
    # shellcheck disable=SC2086
    r=$(timeout 90 "$(ab_fagen_bin early)" check --quick --arch $a --headdim $d $m --softcap 50 2>&1 | tail -1)
    printf 'check %-6s d%-3s %-8s softcap 50: %s\n' "$a" "$d" "${m:-nc}" "$r"
done; done; done
for d in 128 256; do
    r=$(timeout 90 "$(ab_fagen_bin early)" check --quick --arch sm_90a --headdim $d --causal --softcap 30 --window 100,0 2>&1 | tail -1)
    printf 'check sm_90a d%-3s causal softcap 30 window 100,0: %s\n' "$d" "$r"
done
echo "== speed: fagen bench --untuned --settle-ms 300 (ms median, ms min, TFLOP/s)"
cells=("--headdim 128 --batch 2 --heads 16 --seqlen 8192 --causal --softcap 50"
       "--headdim 256 --batch 2 --heads 8 --seqlen 8192 --causal --softcap 50"
       "--headdim 128 --batch 2 --heads 16 --seqlen 8192 --softcap 50"
       "--headdim 128 --batch 1 --heads 16 --seqlen 32768 --causal --window 4096,0 --softcap 50")
ab_bench_rounds "${ROUNDS:-3}" 60 cells "late=$(ab_fagen_bin late)" "early=$(ab_fagen_bin early)"
