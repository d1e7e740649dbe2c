#!/usr/bin/env bash
# fp8_ab2.sh - GPU A/B of the FP8 knob sets (FAJIT_FP8_KNOBS, src/codegen/fp8_ws.h) with FlashAttention-3's layout,
# from one build: first `fagen check --dtype e4m3` of every variant (odd lengths, GQA, masked rows, a multi-round
# shape), then `fagen bench --dtype e4m3` on issue 22's 12 cells (B*N = 16k, H*D = 2048, N 4k / 16k, D 64 / 128 / 256,
# causal and not), the variants interleaved per cell, REPS passes over the grid. Every command runs under `timeout`:
# a hang costs its limit once, and the variant is then dropped for the rest of the run (marked HANG). One line a run
# on stdout as it finishes; at the end the geometric mean of each variant over base, per head dim and overall, and
# each variant's check verdict. Caches off (FAJIT_CACHE=0, FAJIT_PREBUILT=0: every run compiles the same way;
# a knob set other than the default is in the cache key, " fp8knobs=..."), tuned winners ignored (--untuned). About 5 minutes on an H200 (REPS 3).
#   usage: bench/fp8_ab2.sh [FAGEN]       (FAGEN default: build/tools/fagen/fagen, as `bench/run_gpu.sh build` makes)
#   env:   REPS (3), BENCH_REPS (20, fagen bench --reps), CELLS ("D,N,causal ..."; default the 12), VARIANTS (names
#          below; default base regs fa3 fa3r), CHECK (full: every check shape; quick: fagen check --quick; off), T_BENCH (60 s),
#          T_CHECK (180 s), SETTLE_MS (fagen bench --settle-ms; unset: fagen's default, 300 ms of untimed calls)
# Variants (knobs; tiles):
#   base   unset (the default knobs: vt; D256 regs,vt,ostage unless built with FJ_FP8_D256_FA3=0); the heuristic's
#          tiles: D64 br192 bc128 ov pp, D128 br128 bc192 ov pp (producer / consumers 40 / 152 or 40 / 232), D256
#          FA3's br128 bc128 ov, pp when not causal, O staged in the V ring, 24 / 240 = fa3 (built with
#          FJ_FP8_D256_FA3=0: br128 bc128 without overlap, O from registers, 40 / 232). Variant old =
#          FAJIT_FP8_KNOBS=vt (the heuristic drops
#          the overlap where 232 registers refuse it): the earlier D256 default whatever the build's macro
# The check step (CHECK) runs fagen check, which covers BF16 / F16 and e4m3 K/V caches but not e4m3 Q/K/V: for FP8
# kernels it refuses (nothing checked); tests/test_gpu_fp8 and bench/fp8_compare.py check FP8 numerics.
#   regs   regs,vt; the heuristic's tiles at 32 / 160 or 24 / 240 registers
#   fa3    regs,vt,ostage; FlashAttention-3's FP8 tiles: D64 br192 bc128 ov (no pp; FA3: bc160, which spills here),
#          D128 br128 bc224 ov pp, D256 br128 bc128 ov pp (causal: no pp, the register model refuses it), O staged
#          in the V ring at D256 (ostage; no effect at D64 / D128, which have an O buffer)
#   fa3r   regs,vt; FA3's tiles, O from registers at D256 (fa3 without ostage; D256 cells only)
#   old    vt; the heuristic's tiles (= base before 2026-11-27; differs from base at D256 only: VARIANTS="base old")
#   fa3n   regs,ostage; FA3's tiles without vt (not in the default list: VARIANTS="base fa3 fa3n") (at 24 registers ptxas keeps one ldmatrix in flight either way)
#   vt4    vt4; the heuristic's tiles (as old: D256 without the overlap), the V transpose on all 4 producer warps as
#          straight code (warp 0 loads first, then joins), two ldmatrix in flight (not in the default list:
#          VARIANTS="base vt4 fa3 fa3v4"; 40 registers: no spill at D64 / D128 / D256)
#   fa3v4  regs,vt4,ostage; fa3 with vt4: at 24 producer registers (D128 / D256) the lean vt4 form (fp8_ws.h,
#          fj_fp8_vt4_lean: 0 spills; before 2026-11-27 ptxas spilled 52-160 bytes there)
#   v4lean regs,vt4,ostage; the heuristic's tiles under those knobs (D256: FA3's tile, so base with vt -> lean vt4;
#          D128: what the regs model picks, lean vt4; D64: 3 consumer warpgroups, 32 registers, plain vt4)
set -u
fagen=${1:-${FAGEN:-build/tools/fagen/fagen}}
[ -x "$fagen" ] || { echo "fp8_ab2: $fagen is not built (OUT=... bench/run_gpu.sh build)" >&2; exit 2; }
export FAJIT_CACHE=0 FAJIT_PREBUILT=0
reps=${REPS:-3}
bench_reps=${BENCH_REPS:-20}
t_bench=${T_BENCH:-60}
t_check=${T_CHECK:-180}
check=${CHECK:-full}
cells=${CELLS:-"64,4096,0 64,4096,1 64,16384,0 64,16384,1 128,4096,0 128,4096,1 128,16384,0 128,16384,1 256,4096,0 256,4096,1 256,16384,0 256,16384,1"}
variants=${VARIANTS:-"base regs fa3 fa3r"}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A hung verdict

knobs_of() { # variant -> FAJIT_FP8_KNOBS ("-" = unset)
    case $1 in
    base) echo - ;;
    old) echo vt ;;
    regs) echo regs,vt ;;
    fa3) echo regs,vt,ostage ;;
    fa3r) echo regs,vt ;;
    fa3n) echo regs,ostage ;;
    vt4) echo vt4 ;;
    fa3v4 | v4lean) echo regs,vt4,ostage ;;
    *) echo "fp8_ab2: unknown variant $1" >&2; exit 2 ;;
    esac
}

tiles_of() { # variant D causal -> tile flags (base / regs: --stages 2 = the heuristic's one config in fagen check)
    case $1 in
    base | regs | old | vt4 | v4lean) echo --stages 2 ;;
    *) case $2 in
       64) echo --br 192 --bc 128 --stages 2 --overlap on --pingpong off ;;
       128) echo --br 128 --bc 224 --stages 2 --overlap on --pingpong on ;;
       256) if [ "$3" = 1 ]; then echo --br 128 --bc 128 --stages 2 --overlap on --pingpong off
            else echo --br 128 --bc 128 --stages 2 --overlap on --pingpong on; fi ;;
       esac ;;
    esac
}

skip_cell() { # variant D: 0 when the variant differs from another one at D
    [ "$1" = fa3r ] && [ "$2" != 256 ] && return 0
    [ "$1" = old ] && [ "$2" != 256 ] && return 0
    return 1
}

with_knobs() { # knobs cmd... : run cmd with FAJIT_FP8_KNOBS set (or unset for "-")
    local k=$1
    shift
    if [ "$k" = - ]; then env -u FAJIT_FP8_KNOBS "$@"; else FAJIT_FP8_KNOBS=$k "$@"; fi
}

echo "fp8_ab2: $("$fagen" --version 2>/dev/null | head -1); $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); reps $reps x $bench_reps; variants: $variants"

# ---- correctness: fagen check of each variant, every head dim, both masks --------------------------------------
if [ "$check" != off ]; then
    echo "== fagen check --dtype e4m3 per variant (limit ${t_check} s each)"
    for v in $variants; do
        verdict[$v]=pass
        for d in 64 128 256; do
            skip_cell "$v" "$d" && continue
            for c in 0 1; do
                # one command runs both masks (no --causal), except D256, whose FA3 tiles differ by mask (ping-pong
                # off causal): there the first command's causal configs are refused by the register model (skipped)
                # or the same as the second's, and the second runs --causal with its own flags
                if [ "$d" != 256 ] && [ "$c" = 1 ]; then continue; fi
                mask=()
                [ "$d" = 256 ] && [ "$c" = 1 ] && mask=(--causal)
                q=()
                [ "$check" = quick ] && q=(--quick)
                log=$out/check-$v-$d-$c.log
                # shellcheck disable=SC2046
                with_knobs "$(knobs_of "$v")" timeout "$t_check" "$fagen" check --dtype e4m3 --arch sm_90a \
                    --headdim "$d" "${mask[@]}" "${q[@]}" $(tiles_of "$v" "$d" "$c") >"$log" 2>&1
                rc=$?
                summary=$(grep -E "runs|passed|failed" "$log" | tail -1)
                case $rc in
                0) st=ok ;;
                124 | 137) st=HANG; hung[$v]=1 ;;
                *) st="FAIL rc $rc" ;;
                esac
                [ "$st" != ok ] && verdict[$v]="$st (d$d${mask[*]:+ causal})"
                printf 'check %-5s d%-3s %-8s %-9s %s\n' "$v" "$d" "${mask[*]:-both}" "$st" "$summary"
                [ "$st" != ok ] && grep -E "FAIL|ERROR" "$log" | head -3 | sed 's/^/    /'
                [ -n "${hung[$v]:-}" ] && break 2
            done
        done
    done
fi

# ---- speed: fagen bench, variants interleaved per cell, REPS passes ---------------------------------------------
echo "== fagen bench --dtype e4m3 --untuned (limit ${t_bench} s each); columns: variant cell pass config shape median-ms min-ms TFLOP/s sets smem regs spill from"
for rep in $(seq 1 "$reps"); do
    for cell in $cells; do
        IFS=, read -r d n c <<<"$cell"
        key="d${d}n$((n / 1024))k"
        [ "$c" = 1 ] && key="${key}c"
        shape=(--headdim "$d" --seqlen "$n")
        [ "$c" = 1 ] && shape+=(--causal)
        for v in $variants; do
            skip_cell "$v" "$d" && continue
            if [ -n "${hung[$v]:-}" ]; then continue; fi
            tiles=()
            [ "$v" != base ] && [ "$v" != regs ] && [ "$v" != old ] && read -r -a tiles <<<"$(tiles_of "$v" "$d" "$c")"
            settle=()
            [ -n "${SETTLE_MS:-}" ] && settle=(--settle-ms "$SETTLE_MS")
            line=$(with_knobs "$(knobs_of "$v")" timeout "$t_bench" "$fagen" bench --untuned --reps "$bench_reps" \
                --warmup 5 "${settle[@]}" --dtype e4m3 --arch sm_90a "${shape[@]}" "${tiles[@]}" 2>&1 |
                grep -E "^sm_|fagen:|error" | head -1)
            rc=${PIPESTATUS[0]}
            if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
                hung[$v]=1
                line="HANG (timeout ${t_bench} s): $v dropped"
            fi
            printf '%-5s %-9s %s %s\n' "$v" "$key" "$rep" "$line"
            tf=$(echo "$line" | awk '/^sm_/ { for (i = 1; i <= NF; i++) if ($i ~ /^D[0-9]+$/) { print $(i + 3 + ($(i + 1) == "causal")); exit } }')
            [ -n "$tf" ] && echo "$v $key $tf" >>"$out/tf"
        done
    done
done

echo "== median TFLOP/s over the passes; ratio to base; geometric means"
[ -f "$out/tf" ] || { echo "no bench lines"; exit 1; }
awk -v order="$variants" '
function med(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ v[$1 " " $2] = v[$1 " " $2] " " $3; cells[$2] = 1 }
END {
    nv = split(order, vs, " ")
    printf "%-10s", "cell"; for (i = 1; i <= nv; i++) printf " %14s", vs[i]; printf "\n"
    nc = 0
    for (c in cells) cl[++nc] = c
    for (i = 1; i <= nc; i++) for (j = i + 1; j <= nc; j++) if (cl[j] < cl[i]) { t = cl[i]; cl[i] = cl[j]; cl[j] = t }
    for (k = 1; k <= nc; k++) {
        c = cl[k]; b = ("base " c in v) ? med(v["base " c]) : 0
        printf "%-10s", c
        for (i = 1; i <= nv; i++) {
            if (!((vs[i] " " c) in v)) { printf " %14s", "-"; continue }
            m = med(v[vs[i] " " c])
            if (b > 0) {
                r = m / b; printf " %7.1f %6.3f", m, r
                d = c; sub(/n.*/, "", d)
                s[vs[i]] += log(r); n[vs[i]]++; sd[vs[i] " " d] += log(r); nd[vs[i] " " d]++
            } else printf " %14.1f", m
        }
        printf "\n"
    }
    for (i = 1; i <= nv; i++) {
        x = vs[i]; if (x == "base" || !n[x]) continue
        printf "%-5s / base: geomean %.3f over %d cells", x, exp(s[x] / n[x]), n[x]
        split("d64 d128 d256", ds, " ")
        for (j = 1; j <= 3; j++) if (nd[x " " ds[j]]) printf "; %s %.3f", ds[j], exp(sd[x " " ds[j]] / nd[x " " ds[j]])
        printf "\n"
    }
}' "$out/tf"
for v in $variants; do
    printf 'verdict %-5s check: %s%s\n' "$v" "${verdict[$v]:-not run}" "${hung[$v]:+; HUNG (dropped)}"
done
