#!/usr/bin/env bash
# tune_compare.sh - the issue-3 measurement in one GPU run: build, `fagen tune --grid issue3` into a fresh
# cache directory, then compare.py over the full grid with those winners, then ncu (profile.sh) on the
# BF16 D=128 N=4096 winner. Logs, the tune file, the report and the profile land in $OUT/tc/.
#   usage (repository root, GPU machine; carry .deps for cmocka): OUT=dir bench/tune_compare.sh
set -u
cd "$(dirname "$0")/.."
O=${OUT:-build/gpu-out}/tc; mkdir -p "$O"
t0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - t0 ))s"; }
nvidia-smi > "$O/nvidia-smi.txt" 2>&1
st build; OUT=$O/gpu BUILD=build timeout 200 bench/run_gpu.sh build > "$O/build.log" 2>&1; tail -1 "$O/build.log"
FB=build/tools/fagen/fagen
export FAJIT_CACHE_DIR=${TMPDIR:-/tmp}/fajit-tune-compare; rm -rf "$FAJIT_CACHE_DIR"
st tune; timeout 400 $FB tune --grid issue3 > "$O/tune.log" 2>&1; echo "rc $?"; tail -1 "$O/tune.log"
cp "$FAJIT_CACHE_DIR/tuned-v1.txt" "$O/tuned-v1.txt"
st compare; PYTHONUNBUFFERED=1 timeout 400 python3 bench/compare.py --lib build/libfajit.so --out "$O/cmp" \
    --config-from-tune "$O/tuned-v1.txt" > "$O/compare.log" 2>&1; echo "rc $?"; tail -8 "$O/compare.log"
# the winner's fields: "... | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br128 bc32 s3 sw128 w4 noncausal | ..."
w=$(grep -E "\| *bf16 d128 noncausal n4096 *\|" "$O/tuned-v1.txt" | head -1 | awk -F'|' '{print $5}')
field() { echo " $w " | grep -oE " $1[0-9]+ " | tr -dc 0-9; }
echo "winner bf16 d128 n4096: $w"
st ncu; timeout 120 bench/profile.sh $FB --headdim 128 --seqlen 4096 --br "$(field br)" --bc "$(field bc)" \
    --stages "$(field s)" --warps "$(field w)" > "$O/ncu.log" 2>&1
grep -E "bank|tensor|stalled_wait" "$O/ncu.log" | sed 's/  */ /g'
st done
