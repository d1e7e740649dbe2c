#!/usr/bin/env bash
# kv8_sweep.sh - FP8 (e4m3) K/V-cache decode candidates against BF16 decode on the decode table's Nq 1 rows (D128,
# B1 H32/32 N32k, B1 H32/8 N128k, B8 H32/8 N8k, B64 H32/8 N2k, B1 H8/1 N512k), then `fagen check` of each candidate on
# an odd decode shape; one GPU run, ~2-3 min.
#
#   bench/kv8_sweep.sh [BUILD_DIR]        (default build; needs BUILD_DIR/tools/fagen/fagen and a GPU)
#   e.g. OUT=/tmp/o bench/run_gpu.sh build && bench/kv8_sweep.sh build 2>&1 | tee kv8-sweep.log
#
# Each bench line is a whole `fagen bench --grid decode --seqlen 1 --layout bnhd --settle-ms 300` line (K / V laid out
# [B, N, Hkv, D] as a cache is; the B64 row runs 13% slower in bhnd, session 19), printed as it comes: shape,
# median ms, min ms, GB/s of K + V (e4m3 rows count one byte an element), TFLOP/s, and the kernel(s) run (tile, variant
# bits, splits). A "## <label>" line opens each run; BF16 runs first, in the middle and last, so drift shows. Kernels go
# to a fresh cache directory (no tuned winners, nothing stale).
# Candidates (test_kv8_knobs plans every default tile):
#   e4m3-default         the library's choice: the tile by rows (br16 w2 cw2 up to 16 rows a KV head's CTA - bc32 s4
#                        at D128 since session 18, bc64 s3 at other head dims -, br32 w4 cw2 bc64 s3 up to 32;
#                        config.c) with kv8direct (D 64/128/256)
#   e4m3-widen           the same tile, FAJIT_KV8_DIRECT=0: K / V widened (cvt) into a 16-bit tile
#   e4m3-br64-old        the default before session 5 (br64 bc64 s4 w4), kv8direct off, for contrast
#   direct-br16cw2-bc64-s3  the D128 default before session 18 (per-call times bimodal on the H200)
#   direct-br16cw2-bc32-s3 / direct-br16w1-bc32-s4 / direct-br16w1-bc16-s4   the default's neighbours: fewer stages,
#                        one warp (no key split between a warp pair), 16-key tiles
# SASS per 16 KB of e4m3 K + V (d128, sm_90a, per CTA; nvdisasm of fagen cubin, the KV loop body): default br64
# 2828 warp-instr, 320 F2FP, 193 KB smem traffic; br32cw2 1984 / 288 / 139 KB; rows br16 cw2 1184 / 272 / 101 KB;
# rows-direct 1110 / 272 / 37 KB; direct br64 3624 / 1088 / 81 KB. Budget at 4.8 TB/s: ~890 SM cycles per 16 KB;
# smem at 128 B/clk: default 1548 cycles (the bound: 0.72x BF16), rows-direct 302.
# The ratio table at the end: each run's median over the first BF16 run's, per row (issue 22: <= 0.60 on every row).
set -u
BUILD=${1:-build}
FAGEN=$BUILD/tools/fagen/fagen
[ -x "$FAGEN" ] || { echo "kv8_sweep.sh: $FAGEN not found (build first)" >&2; exit 2; }
CACHE=$(mktemp -d /tmp/kv8-sweep-cache-XXXXXX)
LOG=$(mktemp /tmp/kv8-sweep-log-XXXXXX)
trap 'rm -rf "$CACHE" "$LOG"' EXIT
export FAJIT_CACHE_DIR=$CACHE
E="--kv-dtype e4m3"
W=FAJIT_KV8_DIRECT=0

# The candidates: label | env assignments (space-separated, or -) | fagen config flags
CANDIDATES=(
    "e4m3-default|-|$E"
    "e4m3-widen|$W|$E"
    "e4m3-br64-old|$W|$E --br 64 --bc 64 --stages 4 --warps 4 --col-warps 1"
    "direct-br16cw2-bc64-s3|-|$E --br 16 --bc 64 --stages 3 --warps 2 --col-warps 2"
    "direct-br16cw2-bc32-s3|-|$E --br 16 --bc 32 --stages 3 --warps 2 --col-warps 2"
    "direct-br16w1-bc32-s4|-|$E --br 16 --bc 32 --stages 4 --warps 1 --col-warps 1"
    "direct-br16w1-bc16-s4|-|$E --br 16 --bc 16 --stages 4 --warps 1 --col-warps 1"
)

with_env() { # env assignments (or -), command...
    local envset=$1
    shift
    # shellcheck disable=SC2086 # the assignments are words
    if [ "$envset" = - ]; then "$@"; else env $envset "$@"; fi
}

bench() { # label, env, flags...
    local label=$1 envset=$2
    shift 2
    echo "## $label${envset:+ [$envset]}" | sed 's/ \[-\]//' | tee -a "$LOG"
    with_env "$envset" timeout 90 "$FAGEN" bench --grid decode --seqlen 1 --layout bnhd --settle-ms 300 "$@" 2>&1 |
        grep -v '^fagen bench on\|^tuned winners' | tee -a "$LOG"
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader 2>/dev/null | sed 's/^/# /'
bench bf16 -
half=$(( ${#CANDIDATES[@]} / 2 ))
for i in "${!CANDIDATES[@]}"; do
    IFS='|' read -r label envset flags <<<"${CANDIDATES[$i]}"
    [ "$i" -eq "$half" ] && bench bf16-again -
    # shellcheck disable=SC2086 # flags are words
    bench "$label" "$envset" $flags
done
bench bf16-last -

# Numerics of each candidate on an odd decode shape: B5 H32/8 Nq1 Nk1000, per-sequence lengths (1, 64k, Nk, random,
# 0), bf16 queries, both masks, against the float64 reference on the dequantized K / V (random power-of-two descales).
echo "## fagen check --kv-dtype e4m3: B5 H32/8 Nq1 Nk1000 --seqlens (bf16, d128, both masks)"
CHECK="--kv-dtype e4m3 --dtype bf16 --headdim 128 --quick --batch 5 --heads-q 32 --heads-kv 8 --seqlen-q 1 --seqlen-k 1000 --seqlens"
check_fail=0
for c in "${CANDIDATES[@]}"; do
    IFS='|' read -r label envset flags <<<"$c"
    # shellcheck disable=SC2086
    out=$(with_env "$envset" timeout 120 "$FAGEN" check $CHECK ${flags#"$E"} 2>&1)
    rc=$?
    [ $rc -ne 0 ] && check_fail=1
    printf '%-28s rc %d  %s  %s\n' "$label" $rc "$(echo "$out" | grep -E '^[0-9]+ runs:' | cut -d';' -f1)" \
        "$(echo "$out" | tail -1)"
    echo "$out" | grep -E ' (PASS|FAIL|ERROR)|^first failure' | awk '{print "    " $0}' | cut -c1-240
done

# Ratios: each e4m3 run's median over the first BF16 run's, per row (target <= 0.60 on every row).
echo "## ratios e4m3 / bf16 (median ms), rows: B1 H32/32 32k, B1 H32/8 128k, B8 H32/8 8k, B64 H32/8 2k, B1 H8/1 512k"
awk '/^## /{label=$2; next} /^B[0-9]+ H/{key=$1" "$2" "$3" "$4; if (label=="bf16") base[key]=$5; else if (label !~ /^bf16/) {r=(key in base)?$5/base[key]:0; line[label]=line[label] sprintf(" %.3f", r); if (!(label in seen)) {seen[label]=1; order[++n]=label}}}
     /^## fagen check/{exit}
     END{for (i=1;i<=n;i++) printf "%-28s%s\n", order[i], line[order[i]]}' "$LOG"
awk '/^## /{label=$2; next} /^B[0-9]+ H/{if (label ~ /^bf16/) line[label]=line[label] sprintf(" %s", $5)} END{for (l in line) printf "# %-12s ms:%s\n", l, line[l]}' "$LOG"
exit $check_fail
