#!/usr/bin/env bash
# fp8_ptx_diff.sh OLD_FAGEN [NEW_FAGEN] - is the FP8 (e4m3, sm_90a) PTX of this tree byte-identical to OLD_FAGEN's
# with FAJIT_FP8_KNOBS unset? The issue-22 grid's defaults (D 64/128/256 x N 4k/16k x causal or not, at -v 0 and 2)
# and the tiles bench/fp8_ab.sh times. scripts/plain-ptx-diff.sh covers the 16-bit kernels. No GPU needed.
#   usage: bench/fp8_ptx_diff.sh /tmp/main-build/tools/fagen/fagen
# exit: 0 all identical, 1 a difference (listed), 2 usage
set -u
old=${1:?usage: bench/fp8_ptx_diff.sh OLD_FAGEN [NEW_FAGEN]}
new=${2:-build/tools/fagen/fagen}
unset FAJIT_FP8_KNOBS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
one() {
    "$old" ptx "$@" -o "$tmp/a.ptx" 2>/dev/null; local ra=$?
    "$new" ptx "$@" -o "$tmp/b.ptx" 2>/dev/null; local rb=$?
    n=$((n + 1))
    if [ $ra -ne $rb ] || ! cmp -s "$tmp/a.ptx" "$tmp/b.ptx"; then bad=$((bad + 1)); echo "DIFFERS: fagen ptx $*"; fi
}
for d in 64 128 256; do for c in "" --causal; do for v in 0 2; do
    one --arch sm_90a --dtype e4m3 --headdim $d $c -v $v
    one --arch sm_90a --dtype e4m3 --out-dtype f16 --headdim $d $c -v $v
done; done; done
for c in "" --causal; do
    one --arch sm_90a --dtype e4m3 --headdim 256 --br 128 --bc 96 --overlap on $c
    one --arch sm_90a --dtype e4m3 --headdim 128 --br 128 --bc 128 --overlap on --pingpong on $c
    one --arch sm_90a --dtype e4m3 --headdim 64 --br 192 --bc 128 --stages 3 --overlap on $c
done
echo "fp8-ptx-diff: $n configs, $bad differ"
[ $bad -eq 0 ]
