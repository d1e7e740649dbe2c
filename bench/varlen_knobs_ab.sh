#!/usr/bin/env bash
# varlen_knobs_ab.sh - issue 20's varlen speed knobs side by side on one GPU: builds of this tree that differ only in
# -D macros (bench/ab_builds.sh), the default longest-first schedule (lpt) in each.
#   base    no macro: the producer writes each work tile's decoded coordinates and sequence bounds into its smem slot
#           and the consumers read them after the Q full wait (FJ_LPT_COORDS=1, the default since session 10)
#   index   -DFJ_LPT_COORDS=0: the slot holds the tile index alone; the consumers divide it (3-4 dependent div.u32)
#           and read cu_seqlens_q / _k again in their loop head and epilogue (src/codegen/sched.h)
#   l2      -DFJ_SCHED_L2_BYTES=33554432: L2 sections of 32 query heads instead of 8 for this batch (every head of a
#           sequence in one section, its row blocks longest first across all of them)
# numerics: fagen check --varlen (sm_90a lpt, FAJIT_DECODE_SM90=1) of each build: D128 / D64 causal and D128 non-causal
#           GQA 8/2 on lengths 2976,471,1,17,200,1000,128,129; issue 20's batch at D128 causal Hq32/8 (GPU reference:
#           the checks took 2-3 minutes a build on an H200, session 10). CHECK=off skips them.
# speed:    fagen bench --untuned --settle-ms 300 --reps 30, sides interleaved per cell, ROUNDS rounds (default 2), on
#           issue 20's batch (24 documents of 200-6000 tokens, T ~ 68k, bench/variants_compare.py doc_lengths seed 0),
#           Hq32/Hkv8: D128 causal (the target), D128 non-causal, D64 causal; then TFLOP/s per side (median over rounds)
#           and the ratio to base. About 2 minutes on an H200 with CHECK=off (the builds ~1 min of it).
#   usage: [ROUNDS=2] [OUT=/tmp/varlen-knobs] [SIDES="base index"] [TARGET_ONLY=1] [CHECK=off] bench/varlen_knobs_ab.sh
#          (SIDES: a subset of the builds; TARGET_ONLY=1: D128 causal alone, in the checks and the speed cells)
# PEERS=1: then bench/variants_compare.py --cases varlen (FA3 / FA4 beside fajit, its own timing) with each side's
# library (torch and the peers' site from PEERS_SITE, default /tmp/peers-site; about 1 minute each).
set -u
cd "$(dirname "$0")/.." || exit 2
export FAJIT_CACHE=0 FAJIT_PREBUILT=0 FAJIT_DECODE_SM90=1
# shellcheck source=bench/ab_builds.sh
source bench/ab_builds.sh
out=${OUT:-/tmp/varlen-knobs}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
all=(base= index=-DFJ_LPT_COORDS=0 l2=-DFJ_SCHED_L2_BYTES=33554432)
sides=()
for s in "${all[@]}"; do
    [[ " ${SIDES:-base index l2} " == *" ${s%%=*} "* ]] && sides+=("$s")
done
[ "${#sides[@]}" -ge 1 ] || { echo "varlen_knobs_ab.sh: SIDES='${SIDES:-}' names none of base index l2"; exit 2; }
echo "== building ${#sides[@]} fagen variants into $out"
ab_build_all "$out" "fagen fajit_shared" "${sides[@]}" || exit 2
lens=$(cd bench && python3 -c 'import variants_compare as v; print(",".join(map(str, v.doc_lengths())))')
echo "lengths (T = $(python3 -c "print(sum([$lens]))")): $lens"

if [ "${CHECK:-on}" != off ]; then
    echo "== numerics: fagen check --arch sm_90a --varlen (last line of each)"
    small=2976,471,1,17,200,1000,128,129
    for s in "${sides[@]}"; do
        name=${s%%=*}
        checks=("--headdim 128 --causal" "--headdim 64 --causal" "--headdim 128")
        [ "${TARGET_ONLY:-0}" = 1 ] && checks=("${checks[0]}")
        for a in "${checks[@]}"; do
            # shellcheck disable=SC2086 # the flags are words
            r=$(timeout 120 "$(ab_fagen_bin "$name")" check --arch sm_90a --varlen $small --heads-q 8 --heads-kv 2 $a 2>&1 |
                tail -1)
            printf '%-6s %-22s small GQA 8/2: %s\n' "$name" "$a" "$r"
        done
        r=$(timeout 200 "$(ab_fagen_bin "$name")" check --arch sm_90a --varlen "$lens" --heads-q 32 --heads-kv 8 \
            --headdim 128 --causal 2>&1 | tail -1)
        printf '%-6s %-22s issue batch Hq32/8: %s\n' "$name" "--headdim 128 --causal" "$r"
    done
fi

echo "== speed: fagen bench --untuned --settle-ms 300 --reps 30 (config, shape, median ms, min ms, TFLOP/s, ...)"
cells=("--varlen $lens --heads 32 --heads-kv 8 --headdim 128 --causal"
       "--varlen $lens --heads 32 --heads-kv 8 --headdim 128"
       "--varlen $lens --heads 32 --heads-kv 8 --headdim 64 --causal")
[ "${TARGET_ONLY:-0}" = 1 ] && cells=("${cells[0]}")
args=()
for s in "${sides[@]}"; do args+=("${s%%=*}=$(ab_fagen_bin "${s%%=*}")"); done
ab_bench_rounds "${ROUNDS:-2}" 60 cells "${args[@]}" | tee "$out/speed.txt" | sed 's/--varlen [0-9,]*/--varlen .../'
echo "== TFLOP/s per side (median over rounds) and ratio to base; cells: D128 causal, D128, D64 causal"
python3 - "$out/speed.txt" "${#cells[@]}" <<'EOF'
import re, statistics, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("r")]
ncells, res, order = int(sys.argv[2]), {}, []
seen = {}
for l in lines:
    side = l.split()[1]
    i = seen.get(side, 0)  # a side's i-th line: cell i % ncells of round i // ncells
    seen[side] = i + 1
    m = re.search(r"(\d+\.\d{3})\s+(\d+\.\d{3})\s+(\d+\.\d)\s", l)
    if side not in order:
        order.append(side)
    res.setdefault((side, i % ncells), []).append(float(m.group(3)) if m else float("nan"))
names = ["d128 causal", "d128", "d64 causal"]
for c in range(ncells):
    base = statistics.median(res.get(("base", c), [float("nan")]))
    row = []
    for s in order:
        t = statistics.median(res.get((s, c), [float("nan")]))
        row.append(f"{s} {t:.1f} ({t / base:.3f}x)" if base == base and base > 0 else f"{s} {t:.1f}")
    print(f"{names[c] if c < len(names) else c:12s} " + "   ".join(row))
EOF
if [ "${PEERS:-0}" = 1 ]; then
    echo "== bench/variants_compare.py --cases varlen, each side's library (| case | shape | fajit | FA3 | FA4 | ...)"
    for s in "${sides[@]}"; do
        name=${s%%=*}
        r=$(PYTHONPATH="python/src:${PEERS_SITE:-/tmp/peers-site}" timeout 300 python3 bench/variants_compare.py \
            --cases varlen --reps 20 --lib "$out/build-$name/libfajit.so" 2>&1)
        row=$(grep -E '^\| varlen' <<<"$r" | head -2)
        printf '%-6s %s\n' "$name" "${row:-$(tail -2 <<<"$r")}"
    done
fi
