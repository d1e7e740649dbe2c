#!/usr/bin/env bash
# softmax_ab.sh - issue 24's arch-neutral softmax features on sm_90a, measured on one GPU: software exp2 on the FMA
# units for 1 or 2 of every 8 exponentials (FJ_SOFT_EXP2_SHARE, sm90.c) and O rescaled every tile instead of only
# when a row max grows past the reference by 2^8 (FJ_SM90_RESCALE_SLACK=-1; the default is the conditional rescale).
# Four fagen/libfajit builds of this tree (in parallel, ~1 min on 16 cores), then
#   accuracy: bench/accuracy_ratio.py per build (max|O - O_fp64| / SDPA-flash's, BF16 D128, 12 seeds, causal and not)
#             and fagen check --quick --arch sm_90a --headdim 128 (both masks: the worst fraction of each tolerance)
#   speed:    fagen bench --untuned (settled, median) of D64 N8k, D128 N4k/16k, D256 N8k x causal/not, B*N 16k, H*D 2048,
#             the four builds interleaved, two rounds
# The disk cache is off (FAJIT_CACHE=0) so no build reads another's cubins.
#   usage: [SPEED=0] bench/softmax_ab.sh [OUTDIR]   (PYTHONPATH with torch [+ FA3]; default OUTDIR /tmp/softmax-ab;
#          SPEED=0: the accuracy parts only)
set -u
cd "$(dirname "$0")/.." || exit 2
out=${1:-/tmp/softmax-ab}
mkdir -p "$out"
export FAJIT_CACHE=0
names=(base se1 se2 every)
# shellcheck source=bench/ab_builds.sh
source bench/ab_builds.sh
ab_build_all "$out" "fagen fajit_shared" base= se1=-DFJ_SOFT_EXP2_SHARE=1 se2=-DFJ_SOFT_EXP2_SHARE=2 \
    every=-DFJ_SM90_RESCALE_SLACK=-1 || exit 2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "== accuracy: bench/accuracy_ratio.py (ratio of max error to SDPA flash's; the fajit row is the build's sm_90a kernel)"
for b in "${names[@]}"; do
    for m in "" "--causal"; do
        # shellcheck disable=SC2086
        timeout 120 python3 bench/accuracy_ratio.py --lib "$out/build-$b/libfajit.so" --seeds 12 $m >"$out/acc-$b$m.log" 2>&1
        grep -E "fajit  |worst" "$out/acc-$b$m.log" | sed "s/^/$b ${m:-noncausal} /"
        grep -qE "worst" "$out/acc-$b$m.log" || { echo "$b $m: accuracy_ratio.py failed:"; tail -3 "$out/acc-$b$m.log"; }
    done
done
echo "== accuracy: fagen check --quick --arch sm_90a (worst fraction of the tolerance)"
for b in "${names[@]}"; do
    for d in 128; do for m in "" "--causal"; do
        # shellcheck disable=SC2086
        r=$(timeout 90 "$out/build-$b/tools/fagen/fagen" check --quick --arch sm_90a --headdim $d $m 2>&1 |
            grep -E "runs:|rel L2|row rel|LSE  |^PASS|^FAIL" | awk '{$1=$1};1' | cut -c1-40 | tr '\n' ';')
        printf 'check %-5s d%-3s %-8s %s\n' "$b" "$d" "${m:-nc}" "$r"
    done; done
done
[ "${SPEED:-1}" = 0 ] && exit 0
echo "== speed: fagen bench (TFLOP/s), rounds interleaved"
for round in 1 2; do
    for dn in 64:8192 128:4096 128:16384 256:8192; do d=${dn%:*} n=${dn#*:}; for m in "" "--causal"; do
        for b in "${names[@]}"; do
            # shellcheck disable=SC2086
            l=$(timeout 60 "$out/build-$b/tools/fagen/fagen" bench --arch sm_90a --untuned --reps 20 --headdim $d \
                --seqlen $n $m 2>&1 | grep -E "^sm_|fagen:" | head -1)
            printf 'r%d %-5s %s\n' "$round" "$b" "$l"
        done
    done; done
done
