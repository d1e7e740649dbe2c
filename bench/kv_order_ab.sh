#!/usr/bin/env bash
# kv_order_ab.sh - issue 20: the sm_90a KV tiles walked descending (plan.kv_desc, the default for causal ALiBi) against
# ascending, on one GPU, one fagen build of this tree (FAJIT_KV_ORDER=asc|desc picks the order per process; an order
# other than the default is in the kernel's cache key, " kvorder=...", but the disk cache and the prebuilt kernels stay
# off so that every run compiles the same way).
#   numerics: fagen check of ALiBi with the default (descending for causal): --quick D64/128/256 causal and not, then
#             causal GQA (Hq 8, Hkv 2) at Nq/Nk 1000/17, 17/1000, 1/1000, 1000/1000 per head dim; FAJIT_KV_ORDER=desc
#             for plain causal and window too (the knob's other users); test_gpu_variants if it is built
#   speed:    fagen bench --untuned --settle-ms 300 (ms median, ms min, TFLOP/s), asc and desc interleaved, ROUNDS
#             rounds: causal ALiBi B2 N8k D128 H16 (issue 20's cell), D64 H32, D256 H8, and plain D128 causal
#   usage: [ROUNDS=2] [FAGEN=build/tools/fagen/fagen] bench/kv_order_ab.sh       (about 4 minutes on an H100)
set -u
cd "$(dirname "$0")/.." || exit 2
export FAJIT_CACHE=0 FAJIT_PREBUILT=0
# shellcheck source=bench/ab_builds.sh
source bench/ab_builds.sh
f=${FAGEN:-build/tools/fagen/fagen}
[ -x "$f" ] || { echo "kv_order_ab: $f is not built" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "== numerics: fagen check --arch sm_90a --alibi (default order: descending when causal)"
for d in 64 128 256; do for m in "" "--causal"; do
    # shellcheck disable=SC2086
    r=$(timeout 60 "$f" check --quick --arch sm_90a --headdim $d $m --alibi 2>&1 | tail -1)
    printf 'check d%-3s %-8s alibi quick: %s\n' "$d" "${m:-nc}" "$r"
done; done
for d in 64 128 256; do for nn in "1000 17" "17 1000" "1 1000" "1000 1000"; do
    # shellcheck disable=SC2086
    set -- $nn
    r=$(timeout 40 "$f" check --quick --arch sm_90a --headdim $d --causal --alibi --batch 2 --heads-q 8 --heads-kv 2 \
        --seqlen-q "$1" --seqlen-k "$2" 2>&1 | tail -1)
    printf 'check d%-3s causal alibi GQA 8/2 Nq %-4s Nk %-4s: %s\n' "$d" "$1" "$2" "$r"
done; done
for a in "--causal" "--causal --window 300,0" "--causal --chunk 512"; do
    # shellcheck disable=SC2086
    r=$(FAJIT_KV_ORDER=desc timeout 60 "$f" check --quick --arch sm_90a --headdim 128 $a 2>&1 | tail -1)
    printf 'check d128 FAJIT_KV_ORDER=desc %-22s: %s\n' "$a" "$r"
done
if [ -x build/tests/test_gpu_variants ]; then
    echo "== test_gpu_variants (default order)"
    timeout 90 build/tests/test_gpu_variants 2>&1 | grep -E "PASSED|FAILED|SKIP|ERROR" | head -8
fi
echo "== speed: fagen bench --untuned --settle-ms 300, FAJIT_KV_ORDER asc vs desc (ms median, ms min, TFLOP/s)"
cells=("--headdim 128 --batch 2 --heads 16 --seqlen 8192 --causal --alibi"
       "--headdim 64 --batch 2 --heads 32 --seqlen 8192 --causal --alibi"
       "--headdim 256 --batch 2 --heads 8 --seqlen 8192 --causal --alibi"
       "--headdim 128 --batch 2 --heads 16 --seqlen 8192 --causal")
ab_bench_rounds "${ROUNDS:-2}" 40 cells "asc=env FAJIT_KV_ORDER=asc $f" "desc=env FAJIT_KV_ORDER=desc $f"
