#!/usr/bin/env bash
# fp8_ab.sh - GPU A/B of the FP8 experiments (FAJIT_FP8_KNOBS, src/codegen/fp8_ws.h) against the shipped FP8
# kernels, on issue 22's cells: B*N = 16k, H*D = 2048, N 4k / 16k, D 64 / 128 / 256, causal and not. One
# `fagen bench` process a run (the knobs change the PTX, not the config text), variants interleaved per cell and the
# shipped one timed first and last (drift), one whole line a run on stdout as it finishes, then the geometric
# mean of each variant over the shipped kernel. Caches off (FAJIT_CACHE=0, FAJIT_PREBUILT=0: every run compiles the same
# way; a knob set other than the default is in the cache key, " fp8knobs=..."), tuned winners ignored (--untuned). About 85 runs, ~3 minutes on an H100.
#   usage: bench/fp8_ab.sh [FAGEN]        env: REPS (default 20), CELLS="D,N,causal ..." (default all 12)
# Variants:
#   base      the shipped kernel (heuristic tiles: D64 br192 bc128 ov pp, D128 br128 bc192 ov pp, D256 br128 bc128)
#   vt        FAJIT_FP8_KNOBS=vt: the V transpose two blocks a branch
#   regs      FAJIT_FP8_KNOBS=regs: producer 24 / 32 registers, consumers 240 / 160; the shipped tiles (until
#             2026-11-27 32 / 240, past the CTA's register pool: the consumers' setmaxnreg.inc hung; bench/fp8_ab2.sh
#             is the A/B with checks and the ostage knob)
#   fa3       regs + FlashAttention-3's FP8 tiles: D64 br192 bc128 ov without ping-pong (FA3: bc160, which spills
#             here), D128 br128 bc224 ov pp, D256 br128 bc128 ov, pp non-causal (the model refuses pp causal at 240)
#   fa3+vt    the same with vt
#   fa3-pp    D256 non-causal only: regs,vt, br128 bc128 ov without ping-pong
#   roll      the shipped tiles with the rolled consumer loop (--roll on; opt-in for FP8 since 2026-11-29)
# VARIANTS="roll ..." runs only those (base and base2 always run).
set -u
fagen=${1:-${FAGEN:-build/tools/fagen/fagen}}
[ -x "$fagen" ] || { echo "fp8_ab: $fagen is not built" >&2; exit 2; }
export FAJIT_CACHE=0 FAJIT_PREBUILT=0
reps=${REPS:-20}
cells=${CELLS:-"64,4096,0 64,4096,1 64,16384,0 64,16384,1 128,4096,0 128,4096,1 128,16384,0 128,16384,1 256,4096,0 256,4096,1 256,16384,0 256,16384,1"}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

want() { [ -z "${VARIANTS:-}" ] || [[ " $VARIANTS " == *" $1 "* ]]; }

run() { # label knobs cell-key flags...
    local label=$1 knobs=$2 key=$3 line tf
    shift 3
    # no knobs: FAJIT_FP8_KNOBS unset (the shipped defaults); set but empty would mean none (until session 24 the
    # base runs here were knob-less kernels, not the shipped ones)
    local env=(env -u FAJIT_FP8_KNOBS)
    [ -n "$knobs" ] && env=(env "FAJIT_FP8_KNOBS=$knobs")
    line=$("${env[@]}" "$fagen" bench --untuned --reps "$reps" --warmup 5 --dtype e4m3 "$@" 2>&1 |
        grep -E "^sm_|fagen:|error" | head -1)
    printf '%-8s %-12s %s\n' "$label" "$key" "$line"
    tf=$(echo "$line" | awk '/^sm_/ { for (i = 1; i <= NF; i++) if ($i ~ /^D[0-9]+$/) { print $(i + 3 + ($(i + 1) == "causal")); exit } }')
    [ -n "$tf" ] && echo "$label $key $tf" >>"$out"
}

echo "fp8_ab: $("$fagen" --version 2>/dev/null | head -1) reps $reps; columns: variant cell config shape median-ms min-ms TFLOP/s sets smem regs spill from"
for cell in $cells; do
    IFS=, read -r d n c <<<"$cell"
    key="d${d}n$((n / 1024))k${c/1/c}"; key=${key%0}
    base=(--headdim "$d" --seqlen "$n")
    [ "$c" = 1 ] && base+=(--causal)
    case $d in
    64) fa3=(--br 192 --bc 128 --overlap on --pingpong off) ;;
    128) fa3=(--br 128 --bc 224 --overlap on --pingpong on) ;;
    256) if [ "$c" = 1 ]; then fa3=(--br 128 --bc 128 --overlap on --pingpong off)
         else fa3=(--br 128 --bc 128 --overlap on --pingpong on); fi ;;
    esac
    run base "" "$key" "${base[@]}"
    want roll && run roll "" "$key" "${base[@]}" --roll on
    want vt && run vt vt "$key" "${base[@]}"
    want regs && run regs regs "$key" "${base[@]}"
    want fa3 && run fa3 regs "$key" "${base[@]}" "${fa3[@]}"
    want fa3+vt && run fa3+vt regs,vt "$key" "${base[@]}" "${fa3[@]}"
    want fa3-pp && [ "$d" = 256 ] && [ "$c" = 0 ] && run fa3-pp regs,vt "$key" "${base[@]}" --br 128 --bc 128 --overlap on --pingpong off
    run base2 "" "$key" "${base[@]}"
done

echo "== geometric mean over the cells of variant / base (base = mean of the first and last shipped run of the cell)"
awk '{ tf[$1 " " $2] = $3; cells[$2] = 1; vars[$1] = 1 }
END {
    for (v in vars) {
        if (v == "base" || v == "base2") continue
        s = 0; m = 0; lo = 1e9; hi = 0
        for (c in cells) {
            b = (tf["base " c] + tf["base2 " c]) / 2
            if (!(v " " c in tf) || b <= 0 || tf["base " c] == "" || tf["base2 " c] == "") continue
            r = tf[v " " c] / b; s += log(r); m++
            if (r < lo) lo = r
            if (r > hi) hi = r
        }
        if (m) printf "%-8s %.3f over %d cells (%.3f .. %.3f)\n", v, exp(s / m), m, lo, hi
    }
    s = 0; m = 0
    for (c in cells) if (tf["base " c] > 0 && tf["base2 " c] > 0) { s += log(tf["base2 " c] / tf["base " c]); m++ }
    if (m) printf "drift    base2 / base %.3f over %d cells\n", exp(s / m), m
}' "$out"
