#!/usr/bin/env bash
# kv8_sweep.sh - FP8 (e4m3) K/V-cache decode tiles against BF16 decode, the decode table's Nq 1 rows (D128), one GPU run.
#
#   bench/kv8_sweep.sh [BUILD_DIR]        (default build; needs build/tools/fagen/fagen and a GPU; ~3 min on an H100)
#
# Each line is a whole `fagen bench --grid decode --seqlen 1` line, printed as it comes: shape, median ms, min ms,
# GB/s of K + V (e4m3 rows count one byte an element), TFLOP/s, and the kernel(s) run (tile, variant bits, splits;
# " kv8intk kv8intv" = the integer widening). A "## <label>" line opens each run; BF16 runs come first, in the
# middle and last, so drift shows. Kernels go to a fresh cache directory (no tuned winners, nothing stale).
# Tiles (test_decode_ptx test_kv8_small_tiles assembles every one with seqlens + split + packgqa + paged):
#   default      br64 bc64 s4 w4 (the heuristic today), cvt widening
#   br32cw2      br32 w4 cw2: two 16-row row blocks, keys split over a warp pair (0.65-0.70x on the H100 before)
#   br16cw2      br16 w2 cw2: one 16-row block per GQA group, a warp pair splitting the keys
#   br16w1       br16 w1: one warp per CTA, more CTAs an SM
#   widen=int / intv: $FAJIT_KV8_WIDEN, K and V (or V only) widened with prmt/shl/and instead of cvt
#   direct-*     $FAJIT_KV8_DIRECT=1 (kernel text " kv8direct"): the MMA fragments straight from the e4m3 tiles
#                (kv8_frag.c; no 16-bit K/V tile, ~0.5-0.8 KB of smem traffic a key instead of ~3 KB); the e4m3-*
#                rows are the widening kernel, kept as the baseline (test_decode_ptx test_kv8_direct assembles the
#                direct tiles)
# The lead picks defaults from the ratio column printed at the end (e4m3 median / BF16 median, per row).
set -u
BUILD=${1:-build}
FAGEN=$BUILD/tools/fagen/fagen
[ -x "$FAGEN" ] || { echo "kv8_sweep.sh: $FAGEN not found (build first)" >&2; exit 2; }
CACHE=$(mktemp -d /tmp/kv8-sweep-cache-XXXXXX)
LOG=$(mktemp /tmp/kv8-sweep-log-XXXXXX)
trap 'rm -rf "$CACHE"' EXIT
export FAJIT_CACHE_DIR=$CACHE

run() { # label, env assignments (one word, space-separated; or -), fagen flags...
    local label=$1 envset=$2
    shift 2
    echo "## $label" | tee -a "$LOG"
    if [ "$envset" = - ]; then
        timeout 60 "$FAGEN" bench --grid decode --seqlen 1 "$@" 2>&1 | grep -v '^fagen bench on\|^tuned winners' | tee -a "$LOG"
    else
        env $envset timeout 60 "$FAGEN" bench --grid decode --seqlen 1 "$@" 2>&1 |
            grep -v '^fagen bench on\|^tuned winners' | tee -a "$LOG"
    fi
}
E="--kv-dtype e4m3"
D=FAJIT_KV8_DIRECT=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader 2>/dev/null | sed 's/^/# /'
run bf16 -
run e4m3-default - $E
run e4m3-br16cw2-bc32-s4 - $E --br 16 --bc 32 --stages 4 --warps 2 --col-warps 2
run direct-default $D $E
run direct-br32cw2-bc64-s4 $D $E --br 32 --bc 64 --stages 4 --warps 4 --col-warps 2
run direct-br16cw2-bc32-s4 $D $E --br 16 --bc 32 --stages 4 --warps 2 --col-warps 2
run direct-br16cw2-bc64-s4 $D $E --br 16 --bc 64 --stages 4 --warps 2 --col-warps 2
run bf16-again -
run direct-br16cw2-bc128-s2 $D $E --br 16 --bc 128 --stages 2 --warps 2 --col-warps 2
run direct-br16w1-bc32-s4 $D $E --br 16 --bc 32 --stages 4 --warps 1 --col-warps 1
run direct-br16w1-bc64-s3 $D $E --br 16 --bc 64 --stages 3 --warps 1 --col-warps 1
run direct-default-widen=int "$D FAJIT_KV8_WIDEN=int" $E
run direct-br16cw2-bc32-s4-widen=intv "$D FAJIT_KV8_WIDEN=intv" $E --br 16 --bc 32 --stages 4 --warps 2 --col-warps 2
run e4m3-br32cw2-bc64-s4 - $E --br 32 --bc 64 --stages 4 --warps 4 --col-warps 2
run bf16-last -

# Ratios: each e4m3 run's median over the first BF16 run's, per row (target <= 0.60 on every row).
echo "## ratios e4m3 / bf16 (median ms), rows in table order"
awk '/^## /{label=$2; next} /^B[0-9]+ H/{key=$1" "$2" "$3" "$4; if (label=="bf16") base[key]=$5; else if (label !~ /^bf16/) {r=(key in base)?$5/base[key]:0; line[label]=line[label] sprintf(" %.3f", r); if (!(label in seen)) {seen[label]=1; order[++n]=label}}}
     END{for (i=1;i<=n;i++) printf "%-36s%s\n", order[i], line[order[i]]}' "$LOG"
rm -f "$LOG"
