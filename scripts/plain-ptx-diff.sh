#!/usr/bin/env bash
# plain-ptx-diff.sh [--wide] REV [TUNED_FILE...] - are the plain (non-decode) kernels this tree generates byte-identical
# to what REV generated? Builds REV's fagen from `git archive REV` in a temporary directory (no tests), then
# prints and diffs the PTX of the 80 default configs (paths sm_80 / sm_90a x f16 / bf16 x head dims 64 96 128
# 192 256 x causal or not, each at verbosity 0 and 2) and of every config line of the tuned-winner files given
# (bench/results/*tuned-v1*.txt). "What the GPU measured at REV still stands" rests on this. No GPU needed.
# --wide adds every kernel family (issue 24): the tuned winners of bench/results/*tuned-v1*.txt, the decode
# variants (--variant, both paths), FP8 (--dtype e4m3, with the attention variants and --varlen; --kv-dtype e4m3 decode,
# kv8direct on the FP8 K/V decode tiles), the attention variants
# (--window/--softcap/--sinks/--alibi/--chunk, alone, together and with decode variants) and a tile grid (stages,
# warps, overlap / ping-pong, warp pairs); a config both fagens refuse (the same exit status) counts as identical.
#   usage: scripts/plain-ptx-diff.sh 0c0f362 bench/results/h200-tuned-v1-codegen12-2026-11-24.txt
#          scripts/plain-ptx-diff.sh --wide main
#   env:   FAGEN (default build/tools/fagen/fagen, this tree's); OLD_FAGEN (REV's fagen, already built: no build);
#          KEEP=1 keeps the temporary directory
# exit: 0 all identical, 1 a difference (listed), 2 usage or build failure
set -u
wide=0
[ "${1:-}" = --wide ] && { wide=1; shift; }
[ $# -ge 1 ] || { sed -n 2,16p "$0"; exit 2; }
rev=$1; shift
cd "$(dirname "$0")/.."
new=${FAGEN:-build/tools/fagen/fagen}
[ -x "$new" ] || { echo "plain-ptx-diff: $new is not built" >&2; exit 2; }
tmp=$(mktemp -d)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/a" "$tmp/b"
if [ -n "${OLD_FAGEN:-}" ]; then
    old=$OLD_FAGEN
    [ -x "$old" ] || { echo "plain-ptx-diff: OLD_FAGEN=$old is not an executable" >&2; exit 2; }
else
    git archive "$rev" | tar -x -C "$tmp/src" || exit 2
    cmake -S "$tmp/src" -B "$tmp/build" -DFAJIT_BUILD_TESTS=OFF -DFAJIT_INSTALL=OFF -DFAJIT_PREBUILT=OFF \
        >"$tmp/cmake.log" 2>&1 &&
        cmake --build "$tmp/build" -j2 --target fagen >>"$tmp/cmake.log" 2>&1 ||
        { echo "plain-ptx-diff: building $rev failed (log $tmp/cmake.log)" >&2; KEEP=1; exit 2; }
    old=$tmp/build/tools/fagen/fagen
fi
n=0 bad=0 made=0 refused=0
# the header's FJ_CODEGEN_VERSION tag is not code: a bump alone shows no difference
untag() { sed 's/fajit-codegen-[0-9]*/fajit-codegen-N/' "$1" 2>/dev/null; }
one() { # name, flags...
    local name=$1; shift
    "$old" ptx "$@" -o "$tmp/a/$name.ptx" 2>"$tmp/a/$name.err"; local ra=$?
    "$new" ptx "$@" -o "$tmp/b/$name.ptx" 2>"$tmp/b/$name.err"; local rb=$?
    n=$((n + 1))
    if [ $ra -ne 0 ] && [ $ra -eq $rb ]; then refused=$((refused + 1))
    elif [ $ra -ne $rb ] || ! cmp -s <(untag "$tmp/a/$name.ptx") <(untag "$tmp/b/$name.ptx"); then
        bad=$((bad + 1)); echo "DIFFERS: fagen ptx $* (exit $ra -> $rb)"
    elif [ $ra -eq 0 ]; then made=$((made + 1))
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
# --wide: one config a line (fagen ptx flags), the families of issue 24's list
wide_configs() {
    local a dt d c v m
    for f in bench/results/*tuned-v1*.txt; do
        awk -F' [|] ' '!/^#/ && NF >= 5 {print $5}' "$f" | while IFS= read -r cfg; do
            fl=$(flags_of "$cfg") && printf '%s -v 0\n' "$fl"
        done
    done
    for a in sm_80 sm_90a; do for d in 64 128 256; do for c in "" --causal; do
        for v in seqlens split packgqa paged seqlens+split seqlens+paged split+paged packgqa+split packgqa+paged \
            seqlens+split+packgqa+paged paged+gather paged+ahead paged+gather+ahead seqlens+split+paged+gather+ahead \
            varlen varlenq varlenq+paged varlen+seqlens varlenq+seqlens+paged; do
            echo "--arch $a --dtype bf16 --headdim $d $c --variant $v -v 0"
        done
        echo "--arch $a --dtype f16 --headdim $d $c --variant seqlens+split+packgqa+paged -v 2"
        echo "--arch $a --dtype bf16 --headdim $d $c --variant combine -v 0"
    done; done; done
    for d in 64 128 256; do for c in "" --causal; do for v in 0 2; do
        echo "--arch sm_90a --dtype e4m3 --headdim $d $c -v $v"
        echo "--arch sm_90a --dtype e4m3 --out-dtype f16 --headdim $d $c -v $v"
        for m in "--window 128,0" "--softcap 30" --sinks --alibi "--chunk 256" --varlen "--window 64,0 --softcap 30 --varlen"; do
            echo "--arch sm_90a --dtype e4m3 --headdim $d $c $m -v $v"
        done
        for dv in split packgqa seqlens paged seqlens+split+packgqa+paged; do # (assembled only: session 19)
            echo "--arch sm_90a --dtype e4m3 --headdim $d $c --variant $dv -v $v"
        done
    done; done; done
    for a in sm_80 sm_90a; do for dt in bf16 f16; do for d in 64 128 256; do for c in "" --causal; do
        echo "--arch $a --dtype $dt --kv-dtype e4m3 --headdim $d $c -v 0"
        for v in seqlens split packgqa paged seqlens+split+packgqa+paged paged+gather+ahead varlen varlenq+paged; do
            echo "--arch $a --dtype $dt --kv-dtype e4m3 --headdim $d $c --variant $v -v 0"
        done
    done; done; done; done
    # the FP8 K/V decode kernels that run: kv8direct on the tiles by rows (config.c fj_config_kv8_decode_tile)
    for dt in bf16 f16; do for d in 64 128 256; do for c in "" --causal; do
        for t in "--br 16 --warps 2 --col-warps 2 --bc 32 --stages 4" "--br 16 --warps 2 --col-warps 2 --bc 64 --stages 3" \
            "--br 32 --warps 4 --col-warps 2 --bc 64 --stages 3"; do
            for v in split+packgqa+kv8direct seqlens+paged+packgqa+kv8direct packgqa+kv8direct; do
                echo "--arch sm_80 --dtype $dt --kv-dtype e4m3 --headdim $d $c $t --variant $v -v 0"
            done
        done
    done; done; done
    for a in sm_80 sm_90a; do for dt in bf16 f16; do for d in 64 128 256; do for c in "" --causal; do
        for m in "--window 256,0" "--window 64,64" "--softcap 30" --sinks --alibi "--chunk 512" \
            "--window 256,0 --softcap 30 --sinks --alibi" "--softcap 50 --alibi" "--chunk 256 --sinks"; do
            echo "--arch $a --dtype $dt --headdim $d $c $m -v 0"
            echo "--arch $a --dtype $dt --headdim $d $c $m --variant seqlens+split -v 0"
            echo "--arch $a --dtype $dt --headdim $d $c $m --variant paged -v 0"
            echo "--arch $a --dtype $dt --headdim $d $c $m --variant varlen -v 0"
        done
        echo "--arch $a --dtype $dt --headdim $d $c --window 128,0 --softcap 30 --sinks --alibi -v 2"
    done; done; done; done
    for dt in bf16 f16; do for d in 64 128 256; do for c in "" --causal; do
        for s in 1 2 3 4; do for w in 8 12 16; do for ov in on off; do for pp in on off; do
            echo "--arch sm_90a --dtype $dt --headdim $d $c --stages $s --warps $w --overlap $ov --pingpong $pp -v 0"
        done; done; done; done
        for s in 1 2 3; do for w in 4 8; do for cw in 1 2; do for bm in 64 128; do
            echo "--arch sm_80 --dtype $dt --headdim $d $c --stages $s --warps $w --col-warps $cw --br $bm -v 0"
        done; done; done; done
    done; done; done
}
if [ $wide = 1 ]; then
    i=0
    while IFS= read -r fl; do
        i=$((i + 1))
        # shellcheck disable=SC2086 # the flags are words
        one "wide-$i" $fl
    done < <(wide_configs)
fi
echo "plain-ptx-diff: $n kernels ($made generated, $refused refused by both), $bad differ from $rev"
[ $bad -eq 0 ]
