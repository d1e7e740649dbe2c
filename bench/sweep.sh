#!/usr/bin/env bash
# sweep.sh - time a list of sm_80 configs per head dim with fagen bench (BF16, B*N = 16384, H*D = 2048),
# to choose the heuristic's defaults. One line per config: config, shape, times, TFLOP/s.
#   usage: bench/sweep.sh [fagen] [seqlen] [causal: 0|1]      (run on a GPU machine)
set -u
FAGEN=${1:-build/tools/fagen/fagen}
N=${2:-4096}
CAUSAL=${3:-0}
flags=()
[ "$CAUSAL" = 1 ] && flags+=(--causal)
configs_64="128,64,3,4 128,64,2,4 128,32,2,4 128,32,3,4 128,64,4,4 64,64,3,4"
configs_128="128,32,2,4 128,32,3,4 128,32,4,4 64,64,2,4 64,64,3,4 128,64,2,8"
configs_256="64,64,1,4 64,64,2,4 64,32,2,4 64,32,3,4 128,64,1,8"
for d in 64 128 256; do
    var=configs_$d
    for c in ${!var}; do
        IFS=, read -r br bc st w <<<"$c"
        "$FAGEN" bench --headdim "$d" --seqlen "$N" --br "$br" --bc "$bc" --stages "$st" --warps "$w" --reps 20 \
            "${flags[@]}" 2>&1 | grep -E "^sm_80|fagen:" | head -1
    done
done
