#!/usr/bin/env bash
# lean_ab.sh - GPU A/B of the sm_90a consumer-loop trims (FAJIT_SM90_LEAN, plan.lean: src/codegen/sm90.c) against
# the kernels before them, BF16, on one GPU from one build (the variable is read when the PTX is generated, so
# `old` and `new` are the same fagen; FAJIT_SM90_LEAN=0 gives main's PTX byte for byte: scripts/plain-ptx-diff.sh).
# Cells: D 64 / 128 / 256 x N 4k / 16k x causal or not (B*N = 16k, H*D = 2048: issue 3's first grid), then
# D64 Hq64/Hkv8 N8k causal with and without --sinks and D128 N8k causal --softcap 50 (issue 20's rows).
# First a numerics gate: fagen check of the new kernels on odd shapes (the cells are timed either way; a failed
# check is printed). Then per round (3) every cell old then new, the order swapped every other round (drift cancels
# over the rounds), one `fagen bench` process a run, tuned winners ignored (--untuned: the heuristic's config on
# both sides), prebuilt kernels off, each variant with its own fresh disk cache (rounds 2 and 3 skip the compile).
# Prints each run's line as it finishes, then per cell new / old (geometric mean over the rounds, and their
# spread), and the geometric mean over the cells. About 4 minutes on an H200 (90 runs; the first run of each cell
# and variant compiles).
#   usage: bench/lean_ab.sh [FAGEN]      (default $BUILD/tools/fagen/fagen, BUILD default ./build, as
#                                          `OUT=... bench/run_gpu.sh build` leaves it)
#   env:   REPS (bench calls a run, default 20), ROUNDS (default 3), NEW (FAJIT_SM90_LEAN of `new`, default unset =
#          all trims; e.g. NEW=wgu), CELLS (a subset of the cell names below, space separated; d64n8k / d64n8kc are
#          extra cells), KNOB and OLD (another planning knob: KNOB's value of `old`, NEW of `new`; e.g. issue 20's
#          causal schedule: KNOB=FAJIT_CAUSAL_SCHED OLD=static NEW=lpt
#          CELLS="d64n4k d64n4kc d64n8k d64n8kc d64n16k d64n16kc gqa64 gqa64sink d128n16kc")
set -u
cd "$(dirname "$0")/.." || exit 2
fagen=${1:-${FAGEN:-${BUILD:-build}/tools/fagen/fagen}}
[ -x "$fagen" ] || { echo "lean_ab: $fagen is not built (OUT=... bench/run_gpu.sh build)" >&2; exit 2; }
reps=${REPS:-20}
rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export FAJIT_PREBUILT=0
unset FAJIT_CACHE

# name: fagen bench flags
declare -A cell=(
    [d64n4k]="--headdim 64 --seqlen 4096"          [d64n4kc]="--headdim 64 --seqlen 4096 --causal"
    [d64n8k]="--headdim 64 --seqlen 8192"          [d64n8kc]="--headdim 64 --seqlen 8192 --causal"
    [d64n16k]="--headdim 64 --seqlen 16384"        [d64n16kc]="--headdim 64 --seqlen 16384 --causal"
    [d128n4k]="--headdim 128 --seqlen 4096"        [d128n4kc]="--headdim 128 --seqlen 4096 --causal"
    [d128n16k]="--headdim 128 --seqlen 16384"      [d128n16kc]="--headdim 128 --seqlen 16384 --causal"
    [d256n4k]="--headdim 256 --seqlen 4096"        [d256n4kc]="--headdim 256 --seqlen 4096 --causal"
    [d256n16k]="--headdim 256 --seqlen 16384"      [d256n16kc]="--headdim 256 --seqlen 16384 --causal"
    [gqa64]="--headdim 64 --seqlen 8192 --heads 64 --heads-kv 8 --causal"
    [gqa64sink]="--headdim 64 --seqlen 8192 --heads 64 --heads-kv 8 --causal --sinks"
    [cap128]="--headdim 128 --seqlen 8192 --causal --softcap 50"
    [gqa64b1]="--headdim 64 --batch 1 --seqlen 8192 --heads 64 --heads-kv 8 --causal"
    [gqa64b1sink]="--headdim 64 --batch 1 --seqlen 8192 --heads 64 --heads-kv 8 --causal --sinks"
    [gqa64n4k]="--headdim 64 --seqlen 4096 --heads 32 --heads-kv 8 --causal"
    [gqa64n16k]="--headdim 64 --batch 1 --seqlen 16384 --heads 64 --heads-kv 8 --causal"
    [gqa64g4]="--headdim 64 --seqlen 8192 --heads 32 --heads-kv 8 --causal"
    [gqa64g2]="--headdim 64 --seqlen 8192 --heads 32 --heads-kv 16 --causal"
    [mqa64]="--headdim 64 --seqlen 8192 --heads 32 --heads-kv 1 --causal"
    [gqa128]="--headdim 128 --seqlen 8192 --heads 32 --heads-kv 8 --causal"
    [gqa128n4k]="--headdim 128 --seqlen 4096 --heads 32 --heads-kv 8 --causal"
    [gqa256]="--headdim 256 --seqlen 8192 --heads 16 --heads-kv 4 --causal")
order=${CELLS:-"d64n4k d64n4kc d64n16k d64n16kc d128n4k d128n4kc d128n16k d128n16kc d256n4k d256n4kc d256n16k d256n16kc gqa64 gqa64sink cap128"}

knob=${KNOB:-FAJIT_SM90_LEAN}
old_value=${OLD-0}
lean_env() { # variant -> the env(1) words that set the knob (FAJIT_SM90_LEAN unless KNOB) for it
    if [ "$1" = old ]; then if [ -n "$old_value" ]; then echo "$knob=$old_value"; else echo "-u $knob"; fi
    elif [ -n "${NEW-}" ]; then echo "$knob=$NEW"
    else echo "-u $knob"; fi
}
run() { # variant cell round
    local v=$1 c=$2 line tf
    # shellcheck disable=SC2046,SC2086
    line=$(env $(lean_env "$v") FAJIT_CACHE_DIR="$tmp/cache-$v" timeout 120 "$fagen" bench --arch sm_90a --dtype bf16 --untuned \
        --reps "$reps" --warmup 5 ${cell[$c]} 2>&1 | grep -E "^sm_|fagen:|rror" | head -1)
    printf '%-3s %-10s r%s  %s\n' "$v" "$c" "$3" "$line"
    tf=$(echo "$line" | awk '/^sm_/ { for (i = 1; i <= NF; i++) if ($i ~ /^D[0-9]+$/) { print $(i + 3 + ($(i + 1) == "causal")); exit } }')
    [ -n "$tf" ] && echo "$c $v $3 $tf" >>"$tmp/tf"
}

echo "lean_ab: $("$fagen" --version 2>/dev/null | head -1); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?');" \
     "old = $(lean_env old), new = $(lean_env new); reps $reps, rounds $rounds"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

echo "== numerics (new kernels): fagen check, bf16, odd shapes (last line of each)"
checks=("--headdim 64 --causal --batch 1 --heads-q 16 --heads-kv 16 --seqlen-q 300 --seqlen-k 1000"
        "--headdim 128 --causal --batch 1 --heads-q 16 --heads-kv 16 --seqlen-q 1000 --seqlen-k 1000"
        "--headdim 256 --batch 1 --heads-q 8 --heads-kv 8 --seqlen-q 777 --seqlen-k 1001"
        "--headdim 64 --causal --sinks --batch 1 --heads-q 16 --heads-kv 2 --seqlen-q 1000 --seqlen-k 1000"
        "--headdim 128 --causal --softcap 50 --batch 1 --heads-q 16 --heads-kv 16 --seqlen-q 300 --seqlen-k 1000")
for ck in "${checks[@]}"; do
    # shellcheck disable=SC2046,SC2086
    r=$(env $(lean_env new) FAJIT_CACHE_DIR="$tmp/cache-new" timeout 120 "$fagen" check --arch sm_90a --dtype bf16 $ck 2>&1 | tail -1)
    printf 'check %-90s %s\n' "$ck" "$r"
done

echo "== bench (columns: variant cell round | config shape median-ms min-ms TFLOP/s sets smem regs spill from)"
for r in $(seq 1 "$rounds"); do
    for c in $order; do
        [ -n "${cell[$c]+x}" ] || { echo "lean_ab: no cell $c" >&2; continue; }
        if [ $((r % 2)) = 1 ]; then run old "$c" "$r"; run new "$c" "$r"; else run new "$c" "$r"; run old "$c" "$r"; fi
    done
done

echo "== new / old per cell (geometric mean over the rounds of new / old; min .. max of the rounds)"
[ -s "$tmp/tf" ] || { echo "lean_ab: no run gave a TFLOP/s figure"; exit 1; }
awk '{ k = $1 " " $3; s[k " " $2] += $4; n[k " " $2]++; cells[$1] = 1; rounds[$3] = 1 }
END {
    G = 0; M = 0
    for (c in cells) {
        g = 0; m = 0; lo = 1e9; hi = 0
        for (r in rounds) {
            o = n[c " " r " old"] ? s[c " " r " old"] / n[c " " r " old"] : 0
            w = n[c " " r " new"] ? s[c " " r " new"] / n[c " " r " new"] : 0
            if (o <= 0 || w <= 0) continue
            q = w / o; g += log(q); m++
            if (q < lo) lo = q
            if (q > hi) hi = q
        }
        if (m) { printf "%-10s %.3f  (%.3f .. %.3f, %d rounds)\n", c, exp(g / m), lo, hi, m; G += g / m; M++ }
    }
    if (M) printf "geomean    %.3f over %d cells\n", exp(G / M), M
}' "$tmp/tf" | sort | awk '/^geomean/ { g = $0; next } { print } END { if (g != "") print g }'
