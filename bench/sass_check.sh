#!/usr/bin/env bash
# sass_check.sh - compile every kernel named in a tune file (fagen tune's tuned-v1.txt) and read what the
# compiler made of it: ptxas -v spill bytes, and in the SASS the instructions the path must use (sm_90a:
# HGMMA, UTMALDG, and USETMAXREG unless it has one consumer warpgroup; sm_80: HMMA) and none it must not
# (LDL / STL: local memory).
# Needs no GPU: fagen cubin, and cuobjdump or nvdisasm (a CUDA toolkit, or the nvidia-cuda-nvdisasm wheel;
# $NVDISASM names one).
#   usage: bench/sass_check.sh [--fagen PATH] TUNE_FILE
# One line per kernel, then a total; exit 1 when any kernel misses an instruction, spills or fails to build.
set -u
fagen=build/tools/fagen/fagen
[ "${1:-}" = "--fagen" ] && { fagen=$2; shift 2; }
file=${1:?usage: bench/sass_check.sh [--fagen PATH] TUNE_FILE}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

disasm() { # cubin -> SASS text on stdout
    if [ -n "${NVDISASM:-}" ]; then "$NVDISASM" "$1"
    elif command -v cuobjdump >/dev/null; then cuobjdump -sass "$1"
    elif command -v nvdisasm >/dev/null; then nvdisasm "$1"
    elif [ -x /usr/local/cuda/bin/cuobjdump ]; then /usr/local/cuda/bin/cuobjdump -sass "$1"
    else echo "sass_check: no cuobjdump or nvdisasm (set NVDISASM)" >&2; return 1; fi
}

# "sm_90a bf16 d64 br128 bc128 s2 sw128 w12 ov pp noncausal" -> fagen config flags
flags_of() {
    local w out=() ov=off pp=off
    for w in $1; do
        case "$w" in
        sm_*) out+=(--arch "$w") ;;
        bf16 | f16) out+=(--dtype "$w") ;;
        d[0-9]*) out+=(--headdim "${w#d}") ;;
        br[0-9]*) out+=(--br "${w#br}") ;;
        bc[0-9]*) out+=(--bc "${w#bc}") ;;
        s[0-9]*) out+=(--stages "${w#s}") ;;
        swnone) out+=(--swizzle none) ;;
        sw[0-9]*) out+=(--swizzle "${w#sw}") ;;
        w[0-9]*) out+=(--warps "${w#w}") ;;
        cw[0-9]*) out+=(--col-warps "${w#cw}") ;;
        ov) ov=on ;;
        pp) pp=on ;;
        causal) out+=(--causal) ;;
        noncausal) ;;
        *) echo "sass_check: unknown config word '$w'" >&2; return 1 ;;
        esac
    done
    case "$1" in sm_90a*) out+=(--overlap $ov --pingpong $pp) ;; esac
    echo "${out[@]}"
}

count() { grep -cE "$1" "$2" || true; }

n=0 bad=0
printf '%-62s %6s %6s %6s %6s %6s %5s  %s\n' config HGMMA UTMALDG SETMAX HMMA LDL/STL spill result
while IFS='|' read -r _ _ _ _ cfg _; do
    cfg=$(echo "$cfg" | xargs)
    [ -n "$cfg" ] || continue
    n=$((n + 1))
    f=$(flags_of "$cfg") || { bad=$((bad + 1)); continue; }
    # shellcheck disable=SC2086
    if ! "$fagen" cubin $f -v -o "$tmp/k.cubin" 2>"$tmp/log" || ! disasm "$tmp/k.cubin" >"$tmp/sass"; then
        printf '%-62s %s\n' "$cfg" "BUILD FAILED: $(head -c 200 "$tmp/log")"
        bad=$((bad + 1))
        continue
    fi
    if grep -qE 'bytes spill (stores|loads)' "$tmp/log"; then
        spill=$(grep -oE '[0-9]+ bytes spill (stores|loads)' "$tmp/log" | awk '{s += $1} END {print s + 0}')
    else
        spill="?" # no ptxas -v report: counted as a failure
    fi
    hgmma=$(count 'HGMMA' "$tmp/sass") tma=$(count 'UTMALDG' "$tmp/sass") setmax=$(count 'USETMAXREG' "$tmp/sass")
    hmma=$(count 'HMMA' "$tmp/sass") local=$(count '[^A-Z](LDL|STL)[. ]' "$tmp/sass")
    ok=1
    case "$cfg" in
    # one consumer warpgroup (w8, 256 threads): every thread may hold 255 registers already, so the
    # kernel has no setmaxnreg; with two or three it must have both (the producer's dec, the consumers' inc)
    sm_90a*" w8 "*) [ "$hgmma" -gt 0 ] && [ "$tma" -gt 0 ] || ok=0 ;;
    sm_90a*) [ "$hgmma" -gt 0 ] && [ "$tma" -gt 0 ] && [ "$setmax" -gt 0 ] || ok=0 ;;
    *) [ "$hmma" -gt 0 ] || ok=0 ;;
    esac
    [ "$local" -eq 0 ] && [ "$spill" = 0 ] || ok=0
    [ $ok -eq 1 ] && r=ok || { r=FAIL; bad=$((bad + 1)); }
    printf '%-62s %6s %6s %6s %6s %6s %5s  %s\n' "$cfg" "$hgmma" "$tma" "$setmax" "$hmma" "$local" "$spill" "$r"
done < <(grep -v '^#' "$file")
echo "$n kernels, $((n - bad)) ok, $bad failed (sm_90a: HGMMA, UTMALDG, and USETMAXREG with two or three consumer"
echo "warpgroups; sm_80: HMMA; every path: no LDL/STL, 0 spill bytes)"
[ $bad -eq 0 ]
