#!/usr/bin/env bash
# plain-ptx-diff.sh REV [TUNED_FILE...] - are the plain (non-decode) kernels this tree generates byte-identical
# to what REV generated? Builds REV's fagen from `git archive REV` in a temporary directory (no tests), then
# prints and diffs the PTX of the 80 default configs (paths sm_80 / sm_90a x f16 / bf16 x head dims 64 96 128
# 192 256 x causal or not, each at verbosity 0 and 2) and of every config line of the tuned-winner files given
# (bench/results/*tuned-v1*.txt). "What the GPU measured at REV still stands" rests on this. No GPU needed.
#   usage: scripts/plain-ptx-diff.sh 0c0f362 bench/results/h200-tuned-v1-codegen12-2026-11-24.txt
#   env:   FAGEN (default build/tools/fagen/fagen, this tree's); KEEP=1 keeps the temporary directory
# exit: 0 all identical, 1 a difference (listed), 2 usage or build failure
set -u
[ $# -ge 1 ] || { sed -n 2,8p "$0"; exit 2; }
rev=$1; shift
cd "$(dirname "$0")/.."
new=${FAGEN:-build/tools/fagen/fagen}
[ -x "$new" ] || { echo "plain-ptx-diff: $new is not built" >&2; exit 2; }
tmp=$(mktemp -d)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/a" "$tmp/b"
git archive "$rev" | tar -x -C "$tmp/src" || exit 2
cmake -S "$tmp/src" -B "$tmp/build" -DFAJIT_BUILD_TESTS=OFF -DFAJIT_INSTALL=OFF >"$tmp/cmake.log" 2>&1 &&
    cmake --build "$tmp/build" -j2 --target fagen >>"$tmp/cmake.log" 2>&1 ||
    { echo "plain-ptx-diff: building $rev failed (log $tmp/cmake.log)" >&2; KEEP=1; exit 2; }
old=$tmp/build/tools/fagen/fagen
n=0 bad=0
one() { # name, flags...
    local name=$1; shift
    "$old" ptx "$@" -o "$tmp/a/$name.ptx" 2>"$tmp/a/$name.err"; local ra=$?
    "$new" ptx "$@" -o "$tmp/b/$name.ptx" 2>"$tmp/b/$name.err"; local rb=$?
    n=$((n + 1))
    if [ $ra -ne $rb ] || ! cmp -s "$tmp/a/$name.ptx" "$tmp/b/$name.ptx"; then
        bad=$((bad + 1)); echo "DIFFERS: fagen ptx $* (exit $ra -> $rb)"
    fi
}
for arch in sm_80 sm_90a; do for dt in f16 bf16; do for d in 64 96 128 192 256; do for c in "" --causal; do
    for v in 0 2; do one "$arch-$dt-$d${c:+-c}-v$v" --arch $arch --dtype $dt --headdim $d $c -v $v; done
done; done; done; done
# a tuned winner's config text as fagen ptx flags ("sm_90a f16 d64 br192 bc128 s2 sw128 w16 ov pp noncausal")
flags_of() {
    local t out="" ov=off pp=off
    for t in $1; do
        case "$t" in
        sm_80 | sm_90a | sm_100a) out="$out --arch $t" ;;
        f16 | bf16) out="$out --dtype $t" ;;
        d[0-9]*) out="$out --headdim ${t#d}" ;;
        br[0-9]*) out="$out --br ${t#br}" ;;
        bc[0-9]*) out="$out --bc ${t#bc}" ;;
        sw[0-9]*) out="$out --swizzle ${t#sw}" ;;
        s[0-9]*) out="$out --stages ${t#s}" ;;
        w[0-9]*) out="$out --warps ${t#w}" ;;
        cw[0-9]*) out="$out --col-warps ${t#cw}" ;;
        ov) ov=on ;;
        pp) pp=on ;;
        causal) out="$out --causal" ;;
        noncausal) ;;
        *) echo "plain-ptx-diff: unknown config token '$t' in '$1'" >&2; return 1 ;;
        esac
    done
    case "$1" in sm_90a*) out="$out --overlap $ov --pingpong $pp" ;; esac
    printf '%s\n' "$out"
}
for f in "$@"; do
    i=0
    while IFS= read -r cfg; do
        i=$((i + 1))
        fl=$(flags_of "$cfg") || { bad=$((bad + 1)); continue; }
        # shellcheck disable=SC2086 # the flags are words
        one "$(basename "$f" .txt)-$i" $fl -v 0
    done < <(awk -F' [|] ' '!/^#/ && NF >= 5 {print $5}' "$f")
done
echo "plain-ptx-diff: $n kernels, $bad differ from $rev"
[ $bad -eq 0 ]
